// train.precision = bf16 on the GPU as it runs today: the CUDA backend under
// RoundedStorageBackend (fp32 kernels, outputs rounded to bf16, GEMMs on TF32 tensor cores)
// against the CPU backend under the same decorator. Inputs are bf16 values, as the model's are.
//
// Tolerances, relative to the largest reference value (twin_test_support.h):
// - rounded outputs: the twins' fp32 results differ by ~1e-6, so now and then one lands on the
//   other side of a bf16 rounding midpoint and the stored values differ by one bf16 unit, at
//   most 2^-7 of the largest value (a unit at v is 2^(floor(log2 |v|) - 7)): kOneBf16Unit;
// - attention: TF32 also rounds its internal intermediates (the probabilities before P V and
//   P^T dO, the softmax gradient) to 11 bits, ~5e-4 before the output's own rounding: two
//   units;
// - fp32 outputs (weight gradients from TF32 GEMMs on exact bf16 inputs, LayerNorm statistics,
//   attention's row log-sum-exp, whose scores are TF32 products of bf16 q and k, exact, with
//   fp32 sums): kReductionTolerance, as in fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <cublas_v2.h>  // cublasCreate (the pointer-array attention test calls the launchers)

#include "kernels/cuda/attention.cuh"     // cuda::attention_forward/backward, attention_matrix_pointers
#include "kernels/cuda/cuda_backend.h"  // CudaBackend::epilogue_counts
#include "kernels/precision.h"
#include "kernels/rounded_storage_backend.h"
#include "tests/gpu/twin_test_support.h"

namespace trident::kernels::gpu_test {
namespace {

constexpr double kOneBf16Unit = 1.0 / 128.0;
constexpr double kTwoBf16Units = 2.0 / 128.0;

class Bf16StorageTwins : public TwinBackends {
 protected:
  void SetUp() override {
    TwinBackends::SetUp();
    cpu16_ = std::make_unique<RoundedStorageBackend>(*cpu_, Precision::kBf16);
    gpu16_ = std::make_unique<RoundedStorageBackend>(*gpu_, Precision::kBf16);  // turns on TF32
  }

  template <typename Call>
  void run_on_both_bf16(Call call) {
    call(*cpu16_, Side::kCpu);
    call(*gpu16_, Side::kGpu);
    gpu16_->synchronize();
  }

  std::vector<float> bf16_uniform(std::size_t n, float lo, float hi) {
    std::vector<float> v = uniform(n, lo, hi);
    for (float& x : v) x = round_to_bf16(x);
    return v;
  }

  // Attention forward and backward on 16-bit buffers against the CPU twin (defined below).
  void expect_sixteen_bit_attention_twins(Backend& device, const std::string& name);

  std::unique_ptr<RoundedStorageBackend> cpu16_;
  std::unique_ptr<RoundedStorageBackend> gpu16_;
};

TEST_F(Bf16StorageTwins, MatmulForwardAndBackward) {
  const int N = 74, C = 48, OC = 144;
  auto inp = twin(bf16_uniform(count_of(N, C), -1.0f, 1.0f));
  auto weight = twin(bf16_uniform(count_of(OC, C), -1.0f, 1.0f));
  auto bias = twin(bf16_uniform(count_of(OC, 1), -1.0f, 1.0f));
  auto out = twin(uniform(count_of(N, OC), 5.0f, 9.0f));
  run_on_both_bf16([&](Backend& b, Side side) {
    b.matmul_forward(out.on(side), inp.on(side), weight.on(side), bias.on(side), N, C, OC);
  });
  expect_twins_agree(out, kOneBf16Unit, "out");
  auto dout = twin(bf16_uniform(count_of(N, OC), -1.0f, 1.0f));
  auto dinp = twin(std::vector<float>(count_of(N, C), 0.0f));
  auto dweight = twin(uniform(count_of(OC, C), -1.0f, 1.0f));
  auto dbias = twin(uniform(count_of(OC, 1), -1.0f, 1.0f));
  run_on_both_bf16([&](Backend& b, Side side) {
    b.matmul_backward(dinp.on(side), dweight.on(side), dbias.on(side), dout.on(side), inp.on(side), weight.on(side),
                      N, C, OC);
  });
  expect_twins_agree(dinp, kOneBf16Unit, "dinp");
  expect_twins_agree(dweight, kReductionTolerance, "dweight (fp32)");
  expect_twins_agree(dbias, kReductionTolerance, "dbias (fp32)");
}

TEST_F(Bf16StorageTwins, LayernormForwardAndBackward) {
  const int N = 67, C = 300;  // rows longer than a block
  auto inp = twin(bf16_uniform(count_of(N, C), -2.0f, 2.0f));
  auto weight = twin(bf16_uniform(count_of(C, 1), 0.5f, 1.5f));
  auto bias = twin(bf16_uniform(count_of(C, 1), -0.5f, 0.5f));
  auto out = twin(uniform(count_of(N, C), 5.0f, 9.0f));
  auto mean = twin(uniform(count_of(N, 1), 5.0f, 9.0f));
  auto rstd = twin(uniform(count_of(N, 1), 5.0f, 9.0f));
  run_on_both_bf16([&](Backend& b, Side side) {
    b.layernorm_forward(out.on(side), mean.on(side), rstd.on(side), inp.on(side), weight.on(side), bias.on(side), N,
                        C);
  });
  expect_twins_agree(out, kOneBf16Unit, "out");
  expect_twins_agree(mean, kReductionTolerance, "mean (fp32)");
  expect_twins_agree(rstd, kReductionTolerance, "rstd (fp32)");
  auto dout = twin(bf16_uniform(count_of(N, C), -1.0f, 1.0f));
  auto dinp = twin(bf16_uniform(count_of(N, C), -1.0f, 1.0f));  // accumulated into, then rounded
  auto dweight = twin(std::vector<float>(count_of(C, 1), 0.0f));
  auto dbias = twin(std::vector<float>(count_of(C, 1), 0.0f));
  run_on_both_bf16([&](Backend& b, Side side) {
    b.layernorm_backward(dinp.on(side), dweight.on(side), dbias.on(side), dout.on(side), inp.on(side),
                         weight.on(side), mean.on(side),
                         rstd.on(side), N, C);
  });
  expect_twins_agree(dinp, kOneBf16Unit, "dinp");
  expect_twins_agree(dweight, kReductionTolerance, "dweight (fp32)");
  expect_twins_agree(dbias, kReductionTolerance, "dbias (fp32)");
}

TEST_F(Bf16StorageTwins, AttentionForwardAndBackward) {
  const int B = 2, T = 37, C = 48, NH = 3;
  auto qkv = twin(bf16_uniform(count_of(B * T, 3 * C), -1.0f, 1.0f));
  auto out = twin(uniform(count_of(B * T, C), 5.0f, 9.0f));
  auto lse = twin(uniform(count_of(B * NH, T), 5.0f, 9.0f));
  auto scratch_cpu = cpu_->attention_scratch_size(B, T, NH);
  auto scratch_gpu = gpu_->attention_scratch_size(B, T, NH);
  auto scratch = twin(uniform(std::max(scratch_cpu, scratch_gpu), 5.0f, 9.0f));  // garbage
  run_on_both_bf16([&](Backend& b, Side side) {
    b.attention_forward(out.on(side), lse.on(side), scratch.on(side), qkv.on(side), B, T, C, NH);
  });
  expect_twins_agree(out, kTwoBf16Units, "out");
  expect_twins_agree(lse, kReductionTolerance, "lse (fp32)");
  auto dout = twin(bf16_uniform(count_of(B * T, C), -1.0f, 1.0f));
  auto dqkv = twin(bf16_uniform(count_of(B * T, 3 * C), 5.0f, 9.0f));  // stale values: overwritten
  // Each side's own forward state, as in training (out rounded, lse fp32).
  run_on_both_bf16([&](Backend& b, Side side) {
    b.attention_backward(dqkv.on(side), scratch.on(side), dout.on(side), qkv.on(side), out.on(side), lse.on(side),
                         B, T, C, NH);
  });
  expect_twins_agree(dqkv, kTwoBf16Units, "dqkv");
}

TEST_F(Bf16StorageTwins, GeluAndCrossEntropyBackward) {
  const std::size_t n = 4099;
  auto inp = twin(bf16_uniform(n, -6.0f, 6.0f));
  auto out = twin(uniform(n, 5.0f, 9.0f));
  run_on_both_bf16([&](Backend& b, Side side) { b.gelu_forward(out.on(side), inp.on(side), n); });
  expect_twins_agree(out, kOneBf16Unit, "gelu out");
  const int N = 37, V = 61, Vp = 64;
  auto logits = twin(bf16_uniform(count_of(N, Vp), -3.0f, 3.0f));
  auto targets = twin_tokens(uniform_ids(count_of(N, 1), 0, V));
  auto dlogits = twin(uniform(count_of(N, Vp), 5.0f, 9.0f));
  run_on_both_bf16([&](Backend& b, Side side) {
    b.cross_entropy_backward(dlogits.on(side), logits.on(side), targets.on(side), 1.0f / 37.0f, N, V, Vp);
  });
  expect_twins_agree(dlogits, kOneBf16Unit, "dlogits");
}

// --- 16-bit buffers on the device (the model's arena under bf16) --------------------------------
// A 16-bit buffer (bf16 unless said) travels in a float twin, two patterns per float (n even).
std::vector<float> packed(const std::vector<float>& values, Precision p = Precision::kBf16) {
  std::vector<uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) bits[i] = encode_16bit(values[i], p);
  std::vector<float> f(bits.size() / 2);
  std::memcpy(f.data(), bits.data(), f.size() * sizeof(float));
  return f;
}
std::vector<float> unpacked(const std::vector<float>& f, Precision p = Precision::kBf16) {
  std::vector<uint16_t> bits(f.size() * 2);
  std::memcpy(bits.data(), f.data(), f.size() * sizeof(float));
  std::vector<float> values(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) values[i] = decode_16bit(bits[i], p);
  return values;
}
ActPtr sixteen_bit_at(TwinFloats& t, Side side, Precision p) {
  return ActPtr(reinterpret_cast<uint16_t*>(t.on(side)), p);
}
ActPtr bf16_at(TwinFloats& t, Side side) { return sixteen_bit_at(t, side, Precision::kBf16); }

TEST_F(Bf16StorageTwins, DeviceNarrowAndWidenGiveTheCpuEncoding) {
  const std::size_t n = 4096;
  auto x = twin(uniform(n, -3.0f, 3.0f));
  auto bits = twin(std::vector<float>(n / 2, 0.0f));
  auto back = twin(std::vector<float>(n, 0.0f));
  run_on_both([&](Backend& b, Side side) {
    b.narrow(bf16_at(bits, side), x.on(side), n);
    b.widen(back.on(side), ConstActPtr(bf16_at(bits, side)), n);
  });
  EXPECT_EQ(bits.values(Side::kGpu), bits.values(Side::kCpu));  // the same patterns, bit for bit
  expect_twins_agree(back, 0.0, "widened");
}

TEST_F(Bf16StorageTwins, SixteenBitBuffersGiveTheBitsOfRoundedFp32BuffersOnTheDevice) {
  // The same GPU kernels on the same values: 16-bit buffers widened into the workspace and
  // narrowed back must store exactly what fp32 buffers holding the rounded values store.
  const int N = 74, C = 48, OC = 144;
  const auto inp_h = bf16_uniform(count_of(N, C), -1.0f, 1.0f), dout_h = bf16_uniform(count_of(N, OC), -1.0f, 1.0f);
  const auto dinp_h = bf16_uniform(count_of(N, C), -1.0f, 1.0f);  // stale values: overwritten
  auto weight = twin(bf16_uniform(count_of(OC, C), -1.0f, 1.0f));
  auto inp = twin(inp_h), dout = twin(dout_h), dinp = twin(dinp_h), out = twin(std::vector<float>(count_of(N, OC)));
  auto inp16 = twin(packed(inp_h)), dout16 = twin(packed(dout_h)), dinp16 = twin(packed(dinp_h));
  auto out16 = twin(std::vector<float>(count_of(N, OC) / 2));
  auto dw = twin(std::vector<float>(count_of(OC, C), 0.0f)), dw16 = twin(std::vector<float>(count_of(OC, C), 0.0f));
  const Side g = Side::kGpu;
  gpu16_->matmul_forward(out.on(g), inp.on(g), weight.on(g), nullptr, N, C, OC);
  gpu16_->matmul_forward(bf16_at(out16, g), ConstActPtr(bf16_at(inp16, g)), weight.on(g), nullptr, N, C, OC);
  gpu16_->matmul_backward(dinp.on(g), dw.on(g), nullptr, dout.on(g), inp.on(g), weight.on(g), N, C, OC);
  gpu16_->matmul_backward(bf16_at(dinp16, g), dw16.on(g), nullptr, ConstActPtr(bf16_at(dout16, g)),
                          ConstActPtr(bf16_at(inp16, g)), weight.on(g), N, C, OC);
  gpu16_->synchronize();
  EXPECT_EQ(unpacked(out16.values(g)), out.values(g));
  EXPECT_EQ(unpacked(dinp16.values(g)), dinp.values(g));
  EXPECT_EQ(dw16.values(g), dw.values(g));
  EXPECT_EQ(gpu16_->staging_floats(), count_of(N, C) * 2 + count_of(N, OC));
  // With the weight as a 16-bit buffer too (the model's compute copy under bf16) every operand
  // is 16-bit, and the call goes to the CUDA backend's own 16-bit matmul (cublasGemmEx on the
  // tensor cores, Backend::native_16bit) without widening: the workspace does not grow.
  // Other kernels, other summation order: out and dinp within one bf16 unit of the widened
  // path's (kOneBf16Unit), dW (fp32 sums of the same exact products) within kReductionTolerance.
  EXPECT_TRUE(gpu16_->native_16bit().matmul);
  const std::size_t staged = gpu16_->staging_floats();
  auto weight16 = twin(packed(weight.values(Side::kCpu)));
  auto out16w = twin(std::vector<float>(count_of(N, OC) / 2)), dinp16w = twin(packed(dinp_h));
  auto dw16w = twin(std::vector<float>(count_of(OC, C), 0.0f));
  const ConstActPtr w16(bf16_at(weight16, g));
  gpu16_->matmul_forward(bf16_at(out16w, g), ConstActPtr(bf16_at(inp16, g)), w16, nullptr, N, C, OC);
  gpu16_->matmul_backward(bf16_at(dinp16w, g), dw16w.on(g), nullptr, ConstActPtr(bf16_at(dout16, g)),
                          ConstActPtr(bf16_at(inp16, g)), w16, N, C, OC);
  gpu16_->synchronize();
  expect_twins_agree(unpacked(out16w.values(g)), out.values(g), kOneBf16Unit, "native out");
  expect_twins_agree(unpacked(dinp16w.values(g)), dinp.values(g), kOneBf16Unit, "native dinp");
  expect_twins_agree(dw16w.values(g), dw.values(g), kReductionTolerance, "native dW");
  EXPECT_EQ(gpu16_->staging_floats(), staged);
}

// The native 16-bit matmul with a bias, every operand a bf16 buffer, against the CPU twin
// (which widens, multiplies in fp32 and rounds): out and dinp within one bf16 unit, the fp32
// weight and bias gradients within the reductions' tolerance.
TEST_F(Bf16StorageTwins, NativeSixteenBitMatmulWithBiasMatchesCpu) {
  const int N = 74, C = 48, OC = 144;
  auto inp = twin(packed(bf16_uniform(count_of(N, C), -1.0f, 1.0f)));
  auto weight = twin(packed(bf16_uniform(count_of(OC, C), -1.0f, 1.0f)));
  auto bias = twin(packed(bf16_uniform(count_of(OC, 1), -1.0f, 1.0f)));
  auto dout = twin(packed(bf16_uniform(count_of(N, OC), -1.0f, 1.0f)));
  auto out = twin(std::vector<float>(count_of(N, OC) / 2, 0.0f));
  auto dinp = twin(packed(bf16_uniform(count_of(N, C), -1.0f, 1.0f)));  // stale values: overwritten
  auto dw = twin(uniform(count_of(OC, C), -1.0f, 1.0f)), db = twin(uniform(count_of(OC, 1), -1.0f, 1.0f));
  run_on_both_bf16([&](Backend& b, Side side) {
    b.matmul_forward(bf16_at(out, side), ConstActPtr(bf16_at(inp, side)), ConstActPtr(bf16_at(weight, side)),
                     ConstActPtr(bf16_at(bias, side)), N, C, OC);
    b.matmul_backward(bf16_at(dinp, side), dw.on(side), db.on(side), ConstActPtr(bf16_at(dout, side)),
                      ConstActPtr(bf16_at(inp, side)), ConstActPtr(bf16_at(weight, side)), N, C, OC);
  });
  expect_twins_agree(unpacked(out.values(Side::kGpu)), unpacked(out.values(Side::kCpu)), kOneBf16Unit, "out");
  expect_twins_agree(unpacked(dinp.values(Side::kGpu)), unpacked(dinp.values(Side::kCpu)), kOneBf16Unit, "dinp");
  expect_twins_agree(dw, kReductionTolerance, "dweight");
  expect_twins_agree(db, kReductionTolerance, "dbias");
  // The LM head's form: 16-bit inputs, fp32 logits holding rounded values.
  auto logits = twin(uniform(count_of(N, OC), 5.0f, 9.0f));
  run_on_both_bf16([&](Backend& b, Side side) {
    b.matmul_forward(logits.on(side), ConstActPtr(bf16_at(inp, side)), ConstActPtr(bf16_at(weight, side)), nullptr,
                     N, C, OC);
  });
  expect_twins_agree(logits, kOneBf16Unit, "fp32 logits");
  for (float x : logits.values(Side::kGpu)) ASSERT_EQ(round_to_bf16(x), x) << "logits not rounded";
  EXPECT_EQ(gpu16_->staging_floats(), 0u);  // nothing widened on the device
}

// The other native 16-bit kernels (kernels/stored_element.h): every operand a bf16 buffer, so the
// decorator passes each call to the CUDA backend's own kernel (nothing staged), against the CPU
// twin, which widens, computes in fp32 and rounds. The same fp32 math on the same exact inputs,
// in another order for the row and column sums: stored values within one bf16 unit (a result
// near a rounding midpoint may land on the other side), fp32 results (statistics, parameter
// gradients) within the reductions' tolerance.
TEST_F(Bf16StorageTwins, NativeSixteenBitKernelsMatchCpu) {
  const Native16BitKernels native = gpu16_->native_16bit();
  EXPECT_TRUE(native.layernorm && native.gelu && native.add && native.embedding && native.cross_entropy);
  EXPECT_TRUE(native.attention);  // the GEMM path too (NativeSixteenBitGemmAttentionMatchesCpu)
  const int N = 67, C = 300;        // rows longer than a block
  auto bf16 = [&](std::size_t n, float lo, float hi) { return twin(packed(bf16_uniform(n, lo, hi))); };
  auto at = [](TwinFloats& t, Side side) { return bf16_at(t, side); };
  auto in = [](TwinFloats& t, Side side) { return ConstActPtr(bf16_at(t, side)); };
  auto expect_bf16_agree = [](TwinFloats& t, double tolerance, const char* what) {
    expect_twins_agree(unpacked(t.values(Side::kGpu)), unpacked(t.values(Side::kCpu)), tolerance, what);
  };
  auto x = bf16(count_of(N, C), -2.0f, 2.0f), weight = bf16(count_of(C, 1), 0.5f, 1.5f);
  auto bias = bf16(count_of(C, 1), -0.5f, 0.5f), out = bf16(count_of(N, C), -1.0f, 1.0f);
  auto mean = twin(uniform(count_of(N, 1), 5.0f, 9.0f)), rstd = twin(uniform(count_of(N, 1), 5.0f, 9.0f));
  run_on_both_bf16([&](Backend& b, Side side) {
    b.layernorm_forward(at(out, side), mean.on(side), rstd.on(side), in(x, side), in(weight, side), in(bias, side), N,
                        C);
  });
  expect_bf16_agree(out, kOneBf16Unit, "layernorm out");
  expect_twins_agree(mean, kReductionTolerance, "mean (fp32)");
  expect_twins_agree(rstd, kReductionTolerance, "rstd (fp32)");
  // The fused residual add + LayerNorm, the residual in place of a (as the model calls it).
  auto residual = bf16(count_of(N, C), -2.0f, 2.0f);
  run_on_both_bf16([&](Backend& b, Side side) {
    b.residual_layernorm_forward(at(residual, side), at(out, side), mean.on(side), rstd.on(side), in(residual, side),
                                 in(x, side), in(weight, side), in(bias, side), N, C);
  });
  expect_bf16_agree(residual, 0.0, "residual (one fp32 sum of the same values, rounded once)");
  expect_bf16_agree(out, kOneBf16Unit, "residual layernorm out");
  expect_twins_agree(mean, kReductionTolerance, "residual mean (fp32)");
  auto dout = bf16(count_of(N, C), -1.0f, 1.0f), dinp = bf16(count_of(N, C), -1.0f, 1.0f);  // accumulated into
  auto dweight = twin(uniform(count_of(C, 1), -1.0f, 1.0f)), dbias = twin(uniform(count_of(C, 1), -1.0f, 1.0f));
  run_on_both_bf16([&](Backend& b, Side side) {
    b.layernorm_backward(at(dinp, side), dweight.on(side), dbias.on(side), in(dout, side), in(x, side),
                         in(weight, side), mean.on(side), rstd.on(side), N, C);
  });
  expect_bf16_agree(dinp, kOneBf16Unit, "layernorm dinp");
  expect_twins_agree(dweight, kReductionTolerance, "layernorm dweight (fp32)");
  expect_twins_agree(dbias, kReductionTolerance, "layernorm dbias (fp32)");
  // GELU both ways and the residual add: elementwise, one rounding each.
  const std::size_t n = count_of(N, C);
  auto g = bf16(n, -6.0f, 6.0f), gout = bf16(n, -1.0f, 1.0f), gdinp = bf16(n, -1.0f, 1.0f), sum = bf16(n, 0.0f, 1.0f);
  run_on_both_bf16([&](Backend& b, Side side) {
    b.gelu_forward(at(gout, side), in(g, side), n);
    b.gelu_backward(at(gdinp, side), in(g, side), in(dout, side), n);
    b.add(at(sum, side), in(sum, side), in(x, side), n);
  });
  expect_bf16_agree(gout, kOneBf16Unit, "gelu out");
  expect_bf16_agree(gdinp, kOneBf16Unit, "gelu dinp");
  expect_bf16_agree(sum, 0.0, "add");
  // Embedding on a vocabulary shard [3, 40) of 50 tokens, with and without the position table.
  const int B = 3, T = 20, V = 50, begin = 3, end = 40;
  auto wte = bf16(count_of(end - begin, C), -1.0f, 1.0f), wpe = bf16(count_of(T, C), -1.0f, 1.0f);
  auto tokens = twin_tokens(uniform_ids(count_of(B, T), 0, V));
  auto emb = bf16(count_of(B * T, C), 5.0f, 9.0f), emb_no_pos = bf16(count_of(B * T, C), 5.0f, 9.0f);
  auto demb = bf16(count_of(B * T, C), -1.0f, 1.0f);
  auto dwte = twin(uniform(count_of(end - begin, C), -1.0f, 1.0f)), dwpe = twin(uniform(count_of(T, C), -1.0f, 1.0f));
  run_on_both_bf16([&](Backend& b, Side side) {
    b.embedding_forward(at(emb, side), tokens.on(side), in(wte, side), in(wpe, side), B, T, C, begin, end);
    b.embedding_forward(at(emb_no_pos, side), tokens.on(side), in(wte, side), nullptr, B, T, C, begin, end);
    b.embedding_backward(dwte.on(side), dwpe.on(side), in(demb, side), tokens.on(side), B, T, C, begin, end);
  });
  expect_bf16_agree(emb, 0.0, "embedding out");
  expect_bf16_agree(emb_no_pos, 0.0, "embedding out without wpe");
  expect_twins_agree(dwte, 0.0, "dwte (fp32; the twin's additions in its order)");
  expect_twins_agree(dwpe, kReductionTolerance, "dwpe (fp32)");
  // Cross-entropy on bf16 logits (the model's under bf16 with this backend), the gradient
  // written over them as Gpt does; then the vocabulary-parallel pieces on a shard.
  const int rows = 37, Vr = 61, Vp = 64;
  auto logits = bf16(count_of(rows, Vp), -3.0f, 3.0f), dlogits = twin(logits.values(Side::kCpu));
  auto targets = twin_tokens(uniform_ids(count_of(rows, 1), 0, Vr));
  auto losses = twin(uniform(count_of(rows, 1), 5.0f, 9.0f));
  run_on_both_bf16([&](Backend& b, Side side) {
    b.cross_entropy_forward(losses.on(side), nullptr, nullptr, in(logits, side), targets.on(side), rows, Vr, Vp);
    b.cross_entropy_backward(at(dlogits, side), in(dlogits, side), targets.on(side), 1.0f / 37.0f, rows, Vr, Vp);
  });
  expect_twins_agree(losses, kReductionTolerance, "losses (fp32)");
  expect_bf16_agree(dlogits, kOneBf16Unit, "dlogits");
  auto stats = twin(uniform(count_of(3 * rows, 1), 5.0f, 9.0f));
  auto dshard = twin(logits.values(Side::kCpu));
  run_on_both_bf16([&](Backend& b, Side side) {
    b.cross_entropy_shard_statistics(stats.on(side), in(logits, side), targets.on(side), rows, 30, 32, 16);
    b.cross_entropy_backward_sharded(at(dshard, side), in(dshard, side), targets.on(side), stats.on(side),
                                     stats.on(side) + rows, 1.0f / 37.0f, rows, 30, 32, 16);
  });
  const std::vector<float> cpu_stats = stats.values(Side::kCpu), gpu_stats = stats.values(Side::kGpu);
  for (int r = 0; r < rows; r++) {
    EXPECT_EQ(gpu_stats[r], cpu_stats[r]) << "row max (a max of the same values), row " << r;
    EXPECT_NEAR(gpu_stats[rows + r], cpu_stats[rows + r], kReductionTolerance * std::abs(cpu_stats[rows + r]))
        << "row sum (fp32), row " << r;
    EXPECT_EQ(gpu_stats[2 * rows + r], cpu_stats[2 * rows + r]) << "target logit, row " << r;
  }
  expect_bf16_agree(dshard, kOneBf16Unit, "sharded dlogits");
  EXPECT_EQ(gpu16_->staging_floats(), 0u);  // nothing widened on the device
}

// One 16-bit attention forward and backward, bf16 and fp16, on `device` (a CUDA backend) against
// the CPU twin (fp32 on the widened values, each output rounded once): out and dqkv within two
// steps of the format at the largest value (the reasons at the two tests below), lse within
// kReductionTolerance. Head size 64, T not a multiple of a tile, B > NH. The device's scratch
// starts as NaN in every 16-bit half, and again before backward, so reading anything not
// written first (or left by the forward) fails.
void Bf16StorageTwins::expect_sixteen_bit_attention_twins(Backend& device, const std::string& name) {
  for (const Precision p : {Precision::kBf16, Precision::kFp16}) {
    SCOPED_TRACE(name + ", " + precision_name(p));
    RoundedStorageBackend cpu16(*cpu_, p), gpu16(device, p);
    EXPECT_TRUE(gpu16.native_16bit().attention);
    const double step = p == Precision::kBf16 ? 0x1p-7 : 0x1p-10;
    const int B = 3, T = 129, C = 128, NH = 2;
    auto pack = [p](const std::vector<float>& values) { return packed(values, p); };
    auto unpack = [p](const std::vector<float>& f) { return unpacked(f, p); };
    auto at = [p](TwinFloats& t, Side side) { return sixteen_bit_at(t, side, p); };
    auto nan_scratch = [](std::size_t floats) {
      std::vector<float> v(floats);
      const uint32_t nan_in_both_halves = 0x7fff7fffu;
      for (float& f : v) std::memcpy(&f, &nan_in_both_halves, sizeof f);
      return v;
    };
    auto qkv = twin(pack(uniform(count_of(B * T, 3 * C), -2.0f, 2.0f)));
    auto out = twin(pack(uniform(count_of(B * T, C), 5.0f, 9.0f)));  // stale: overwritten
    auto lse = twin(uniform(count_of(B * NH, T), 5.0f, 9.0f));
    BackendFloats cpu_scratch(*cpu_, uniform(cpu_->attention_scratch_size(B, T, NH), 5.0f, 9.0f));
    const std::vector<float> nan = nan_scratch(device.attention_scratch_size(B, T, NH));
    BackendFloats gpu_scratch(device, nan);
    const Side c = Side::kCpu, g = Side::kGpu;
    cpu16.attention_forward(at(out, c), lse.on(c), cpu_scratch.get(), ConstActPtr(at(qkv, c)), B, T, C, NH);
    gpu16.attention_forward(at(out, g), lse.on(g), gpu_scratch.get(), ConstActPtr(at(qkv, g)), B, T, C, NH);
    gpu16.synchronize();
    expect_twins_agree(unpack(out.values(g)), unpack(out.values(c)), 2 * step, name + " out");
    expect_twins_agree(lse, kReductionTolerance, name + " lse (fp32)");
    // Backward from the CPU's forward state on both sides, so that only the backward is measured.
    auto cpu_out = twin(out.values(c)), cpu_lse = twin(lse.values(c));
    auto dout = twin(pack(uniform(count_of(B * T, C), -1.0f, 1.0f)));
    auto dqkv = twin(pack(uniform(count_of(B * T, 3 * C), 5.0f, 9.0f)));  // stale: overwritten
    device.copy_to_device(gpu_scratch.get(), nan.data(), nan.size());  // backward owes nothing to forward's
    cpu16.attention_backward(at(dqkv, c), cpu_scratch.get(), ConstActPtr(at(dout, c)), ConstActPtr(at(qkv, c)),
                             ConstActPtr(at(cpu_out, c)), cpu_lse.on(c), B, T, C, NH);
    gpu16.attention_backward(at(dqkv, g), gpu_scratch.get(), ConstActPtr(at(dout, g)), ConstActPtr(at(qkv, g)),
                             ConstActPtr(at(cpu_out, g)), cpu_lse.on(g), B, T, C, NH);
    gpu16.synchronize();
    expect_twins_agree(unpack(dqkv.values(g)), unpack(dqkv.values(c)), 2 * step, name + " dqkv");
    EXPECT_EQ(gpu16.staging_floats(), 0u);  // nothing widened on the device
  }
}

// The GEMM attention (run.attention = gemm, the default) on 16-bit buffers, bf16 and fp16: the
// CUDA backend reads qkv and dout and stores out and dqkv in 16 bits itself, rounding the
// probabilities and the score gradient to the same format between its products
// (kernels/cuda/attention_schedule.h), against the CPU twin (fp32 on the widened values, each
// output rounded once). The host replay of the same schedule measures that rounding at under one
// step of the format at the largest value (out 0.5 steps, dqkv up to 0.88:
// tests/unit/kernels/attention_schedule_replay_test.cpp); here cuBLAS's fp32 sums and expf may
// also move a value across a rounding midpoint, so two steps. B = 3: region B's fp32 slots lie
// over the packed 16-bit probabilities of two batch elements each. The scratch starts as NaN in
// every 16-bit half, so reading anything not written first fails.
TEST_F(Bf16StorageTwins, NativeSixteenBitGemmAttentionMatchesCpu) {
  expect_sixteen_bit_attention_twins(*gpu_, "gemm attention");
}

// Flash attention on 16-bit buffers (run.attention = flash under train.precision = bf16 or fp16):
// the tensor-core kernels (kernels/cuda/flash_attention_mma*.cu) read qkv, dout and out and store
// out and dqkv in 16 bits. They round P and dS to the storage format to enter the tensor cores,
// as the GEMM attention's 16-bit schedule does, so the same two steps; lse sums the unrounded
// probabilities in fp32, so it keeps kReductionTolerance. (On the emulation: out and dqkv at
// 0.25 and 0.35 of the tolerance in bf16, 0.25 and 0.22 in fp16; lse 1.5e-7.)
TEST_F(Bf16StorageTwins, NativeSixteenBitFlashAttentionMatchesCpu) {
  auto flash = make_backend(Device::kCuda, kCpuThreads, 0, {.attention = AttentionKernel::kFlash});
  expect_sixteen_bit_attention_twins(*flash, "flash attention");
}

// The same with dQ made in the dK/dV walk (FlashDq::kInKeyWalk: the key tiles add their shares
// into fp32 sums in turn, kernels/cuda/ordered_turns.cuh) instead of a second walk: the same two
// rounding steps, the same tolerances. T = 129 gives each query tile up to 3 shares, the last
// tile one row; the scratch (sums included) starts as NaN.
TEST_F(Bf16StorageTwins, NativeSixteenBitFlashAttentionWithDqInTheKeyWalkMatchesCpu) {
  auto flash = make_backend(Device::kCuda, kCpuThreads, 0,
                            {.attention = AttentionKernel::kFlash, .flash_dq = FlashDq::kInKeyWalk});
  expect_sixteen_bit_attention_twins(*flash, "flash attention, dQ in the key walk");
}

// The attention launchers' other options (cuda::GemmAttentionOptions: pointer arrays, each
// product one pointer-array cuBLAS call; causal row blocks, the upper corners left out;
// perf/kernels' attention variants 6 to 8, not yet production's) against the defaults
// (min(B, NH) strided calls over the full square, production), on the device directly, in
// fp32, bf16 and fp16. Even T, so that every product takes the pointer path (attention_schedule's
// aligned_matrices; B > NH and B < NH both), and an odd T, whose fp32 score slots are not
// 16-byte aligned and take the strided calls instead. Each matrix's product has the same
// operands on both sides, but cuBLAS may pick other kernels for the two kinds of call, so the
// results are held to the CPU-twin tolerances (fp32 kReductionTolerance; 16-bit two rounding
// steps), not to the bit. The scratch and the pointer room start as NaN and 0xff bytes.
TEST_F(Bf16StorageTwins, GemmAttentionOptionsMatchTheDefaults) {
  cublasHandle_t cublas = nullptr;
  ASSERT_EQ(cublasCreate(&cublas), CUBLAS_STATUS_SUCCESS);  // CUBLAS_DEFAULT_MATH: fp32 stays fp32
  struct Shape {
    int B, T, C, NH;
  };
  const Shape shapes[] = {{3, 128, 128, 2}, {2, 64, 192, 3}, {3, 33, 128, 2}};
  const Precision precisions[] = {Precision::kFp32, Precision::kBf16, Precision::kFp16};
  for (std::size_t shape = 0; shape < std::size(shapes); ++shape) {
    for (std::size_t precision = 0; precision < std::size(precisions); ++precision) {
      // Under the race checker, 3 of the 9 cases: each shape in one precision (kRaceChecker).
      if (kRaceChecker && shape != precision) continue;
      const Shape s = shapes[shape];
      const Precision p = precisions[precision];
      SCOPED_TRACE(std::string(precision_name(p)) + " B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) +
                   " NH=" + std::to_string(s.NH));
      const bool wide = p == Precision::kFp32;
      const double tolerance = wide ? kReductionTolerance : p == Precision::kBf16 ? 2 * 0x1p-7 : 2 * 0x1p-10;
      // Device buffers of n values in p (packed two to a float when 16-bit), and back.
      auto on_device = [&](const std::vector<float>& values) {
        return std::make_unique<BackendFloats>(*gpu_, wide ? values : packed(values, p));
      };
      auto act = [&](BackendFloats& b) {
        return wide ? ActPtr(b.get()) : ActPtr(reinterpret_cast<uint16_t*>(b.get()), p);
      };
      auto values_of = [&](BackendFloats& b, std::size_t n) {
        std::vector<float> f(wide ? n : n / 2);
        gpu_->copy_to_host(f.data(), b.get(), f.size());
        return wide ? f : unpacked(f, p);
      };
      auto nan_floats = [](std::size_t floats) {
        std::vector<float> v(floats);
        const uint32_t nan_in_both_halves = 0x7fff7fffu;
        for (float& f : v) std::memcpy(&f, &nan_in_both_halves, sizeof f);
        return v;
      };
      auto representable = [&](std::vector<float> v) { return wide ? v : unpacked(packed(v, p), p); };
      const std::size_t n_qkv = count_of(s.B * s.T, 3 * s.C), n_out = count_of(s.B * s.T, s.C);
      const std::size_t n_lse = count_of(s.B * s.NH, s.T);
      const std::vector<float> qkv_h = representable(uniform(n_qkv, -2.0f, 2.0f));
      const std::vector<float> dout_h = representable(uniform(n_out, -1.0f, 1.0f));
      auto qkv = on_device(qkv_h), dout = on_device(dout_h);
      // The scratch is counted in floats whatever the storage (not packed as on_device packs).
      const std::vector<float> nan = nan_floats(gpu_->attention_scratch_size(s.B, s.T, s.NH));
      auto scratch = std::make_unique<BackendFloats>(*gpu_, nan);
      // attention_matrix_pointers pointers of 8 bytes: two floats each, 0xff bytes to start.
      std::vector<float> garbage(2 * cuda::attention_matrix_pointers(s.B, s.NH));
      std::memset(garbage.data(), 0xff, garbage.size() * sizeof(float));
      BackendFloats room(*gpu_, garbage);
      void** pointers = reinterpret_cast<void**>(room.get());

      struct Run {
        std::vector<float> out, lse, dqkv;
      };
      // Every backward starts from the defaults' forward lse, so that the backwards are compared
      // alone; with other options that lse is within a few ulps of the run's own (its scores
      // come from other calls), not the bits attention.cuh asks for between a forward and its
      // backward, which the tolerances cover.
      std::vector<float> backward_lse;
      auto run = [&](const cuda::GemmAttentionOptions& options) {
        // NaN scratch before each forward and backward: a read of anything the run has not
        // written (past a causal block's end, say) shows, not the previous run's values.
        gpu_->copy_to_device(scratch->get(), nan.data(), nan.size());
        auto out = on_device(std::vector<float>(n_out, 7.0f));  // stale: overwritten
        auto dqkv = on_device(std::vector<float>(n_qkv, 7.0f));
        BackendFloats lse(*gpu_, std::vector<float>(n_lse, 7.0f));
        cuda::attention_forward(act(*out), lse.get(), scratch->get(), ConstActPtr(act(*qkv)), s.B, s.T, s.C, s.NH,
                                cublas, nullptr, options);
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        Run r{values_of(*out, n_out), std::vector<float>(n_lse), {}};
        gpu_->copy_to_host(r.lse.data(), lse.get(), n_lse);
        if (backward_lse.empty()) backward_lse = r.lse;
        gpu_->copy_to_device(lse.get(), backward_lse.data(), n_lse);
        gpu_->copy_to_device(scratch->get(), nan.data(), nan.size());
        cuda::attention_backward(act(*dqkv), scratch->get(), ConstActPtr(act(*dout)), ConstActPtr(act(*qkv)), lse.get(),
                                 s.B, s.T, s.C, s.NH, cublas, nullptr, options);
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        r.dqkv = values_of(*dqkv, n_qkv);
        return r;
      };
      const Run strided = run({});
      // Pointer arrays; causal blocks (2, and 3 with pointer arrays: uneven blocks, whose starts
      // are still multiples of 8 rows; unless 4 divides T, the 16-bit slots themselves are off
      // 16 bytes and take the strided calls).
      const cuda::GemmAttentionOptions others[] = {{pointers, 1}, {nullptr, 2}, {pointers, 3}};
      for (const cuda::GemmAttentionOptions& options : others) {
        SCOPED_TRACE(std::string(options.matrix_pointers ? "pointer arrays" : "strided calls") + ", " +
                     std::to_string(options.causal_blocks) + " causal blocks");
        const Run other = run(options);
        expect_twins_agree(other.out, strided.out, tolerance, "out");
        expect_twins_agree(other.lse, strided.lse, kReductionTolerance, "lse (fp32)");
        expect_twins_agree(other.dqkv, strided.dqkv, tolerance, "dqkv");
      }
    }
  }
  EXPECT_EQ(cublasDestroy(cublas), CUBLAS_STATUS_SUCCESS);
}

// The MLP's fused calls on bf16 buffers (Backend::matmul_gelu_forward and
// matmul_backward_through_gelu) against the CPU twin's two separate calls, which round the GEMM's
// result before the GELU (or its gradient) reads it. Under run.matmul_epilogues = fused the CUDA
// backend runs each as one cuBLASLt GEMM whose epilogue applies the GELU to the unrounded fp32
// result. The pre-activation pre is the GEMM's result rounded once on both sides: one bf16 unit.
// out = gelu(pre) and dpre = gelu'(pre) * (dout @ W) differ by the intermediate rounding the
// fused path skips (2^-8 relative, times |gelu'| <= 1.13) on top of each side's own rounding of
// the stored value (half a unit each), and by cuBLASLt's tanh (the approximation GPT-2 uses;
// its hardware tanh is good to about 2^-11): together under two units (kTwoBf16Units). A wrong
// layout, a missing bias or GELU applied twice is O(1). The weight and bias gradients are the
// separate path's fp32 GEMM and column sums: kReductionTolerance.
// `epilogues` picks the CUDA backend's path; check_mlp returns how many calls ran in a cuBLASLt
// epilogue and how many fell back to the separate kernels (CudaBackend::epilogue_counts: a
// fallback of the fused forward runs the matmul with its bias epilogue, itself counted).
class MlpEpilogueTwins : public Bf16StorageTwins {
 protected:
  cuda::CudaBackend::EpilogueCounts check_mlp(MatmulEpilogues epilogues, int N, int C, int H) {
    auto cuda = make_backend(Device::kCuda, kCpuThreads, 0, {.matmul_epilogues = epilogues});
    RoundedStorageBackend cuda16(*cuda, Precision::kBf16);
    auto bf16 = [&](std::size_t n, float lo, float hi) { return twin(packed(bf16_uniform(n, lo, hi))); };
    auto in = [](TwinFloats& t, Side side) { return ConstActPtr(bf16_at(t, side)); };
    auto expect_bf16_agree = [](TwinFloats& t, double tolerance, const std::string& what) {
      expect_twins_agree(unpacked(t.values(Side::kGpu)), unpacked(t.values(Side::kCpu)), tolerance, what);
    };
    const std::string shape = " (N " + std::to_string(N) + ", C " + std::to_string(C) + ", H " + std::to_string(H) + ")";
    auto inp = bf16(count_of(N, C), -1.0f, 1.0f), w_up = bf16(count_of(H, C), -0.5f, 0.5f);
    auto b_up = bf16(count_of(H, 1), -0.5f, 0.5f), w_down = bf16(count_of(C, H), -0.5f, 0.5f);
    auto pre = bf16(count_of(N, H), 5.0f, 9.0f), out = bf16(count_of(N, H), 5.0f, 9.0f);  // stale: overwritten
    // The backward reads inputs of its own, the same on both sides (the forward's outputs differ
    // by up to two units between the twins, which the fp32 weight gradient would show).
    auto h = bf16(count_of(N, H), -0.2f, 2.0f), h_pre = bf16(count_of(N, H), -3.0f, 3.0f);
    auto dout = bf16(count_of(N, C), -1.0f, 1.0f), dpre = bf16(count_of(N, H), 5.0f, 9.0f);
    auto dw = twin(uniform(count_of(C, H), -1.0f, 1.0f)), db = twin(uniform(count_of(C, 1), -1.0f, 1.0f));
    const auto before = dynamic_cast<cuda::CudaBackend&>(*cuda).epilogue_counts();
    for (const Side side : {Side::kCpu, Side::kGpu}) {
      Backend& b = side == Side::kCpu ? static_cast<Backend&>(*cpu16_) : static_cast<Backend&>(cuda16);
      b.matmul_gelu_forward(bf16_at(out, side), bf16_at(pre, side), in(inp, side), in(w_up, side), in(b_up, side), N,
                            C, H);
      b.matmul_backward_through_gelu(bf16_at(dpre, side), dw.on(side), db.on(side), in(dout, side), in(h, side),
                                     in(w_down, side), in(h_pre, side), N, H, C);
    }
    cuda16.synchronize();
    expect_bf16_agree(pre, kOneBf16Unit, "pre" + shape);
    expect_bf16_agree(out, kTwoBf16Units, "gelu out" + shape);
    expect_bf16_agree(dpre, kTwoBf16Units, "dpre" + shape);
    expect_twins_agree(dw, kReductionTolerance, "dweight (fp32)" + shape);
    expect_twins_agree(db, kReductionTolerance, "dbias (fp32)" + shape);
    const auto after = dynamic_cast<cuda::CudaBackend&>(*cuda).epilogue_counts();
    EXPECT_EQ(cuda16.staging_floats(), 0u) << "nothing widened" << shape;
    return {after.fused - before.fused, after.fell_back - before.fell_back};
  }
};

TEST_F(MlpEpilogueTwins, FusedGeluEpiloguesMatchCpu) {
  const auto counts = check_mlp(MatmulEpilogues::kFused, 128, 64, 256);  // GPT-2's proportions
  EXPECT_EQ(counts.fused, 2u) << "the GELU forward and backward epilogues both ran";
  EXPECT_EQ(counts.fell_back, 0u);
}

TEST_F(MlpEpilogueTwins, RaggedShapesMatchCpuFusedOrNot) {
  // H = 36 is no multiple of 8, which the GELU input's leading dimension must be: both calls fall
  // back to the separate kernels. N = 74 tokens: cuBLASLt may or may not have an algorithm for
  // it, so there only the results are checked, not which path ran.
  EXPECT_GE(check_mlp(MatmulEpilogues::kFused, 128, 48, 36).fell_back, 2u);
  check_mlp(MatmulEpilogues::kFused, 74, 64, 256);
}

// The bias epilogue of a plain 16-bit matmul (every matmul with a bias): one GEMM adds the bias
// to the fp32 result and rounds once, as the broadcast-then-accumulate path does; within one bf16
// unit of the CPU twin (the order of the sums), and it must have run in the epilogue.
TEST_F(MlpEpilogueTwins, BiasEpilogueMatchesCpu) {
  auto cuda = make_backend(Device::kCuda, kCpuThreads, 0, {.matmul_epilogues = MatmulEpilogues::kFused});
  RoundedStorageBackend cuda16(*cuda, Precision::kBf16);
  const int N = 128, C = 64, OC = 192;
  auto inp = twin(packed(bf16_uniform(count_of(N, C), -1.0f, 1.0f)));
  auto weight = twin(packed(bf16_uniform(count_of(OC, C), -1.0f, 1.0f)));
  auto bias = twin(packed(bf16_uniform(count_of(OC, 1), -1.0f, 1.0f)));
  auto out = twin(packed(bf16_uniform(count_of(N, OC), 5.0f, 9.0f)));  // stale: overwritten
  const auto before = dynamic_cast<cuda::CudaBackend&>(*cuda).epilogue_counts();
  for (const Side side : {Side::kCpu, Side::kGpu}) {
    Backend& b = side == Side::kCpu ? static_cast<Backend&>(*cpu16_) : static_cast<Backend&>(cuda16);
    b.matmul_forward(bf16_at(out, side), ConstActPtr(bf16_at(inp, side)), ConstActPtr(bf16_at(weight, side)),
                     ConstActPtr(bf16_at(bias, side)), N, C, OC);
  }
  cuda16.synchronize();
  expect_twins_agree(unpacked(out.values(Side::kGpu)), unpacked(out.values(Side::kCpu)), kOneBf16Unit, "out");
  const auto after = dynamic_cast<cuda::CudaBackend&>(*cuda).epilogue_counts();
  EXPECT_EQ(after.fused - before.fused, 1u) << "the matmul ran with the bias epilogue";
}

TEST_F(MlpEpilogueTwins, SeparateKernelsMatchCpu) {
  const auto counts = check_mlp(MatmulEpilogues::kSeparate, 128, 64, 256);  // also the bias broadcast path
  EXPECT_EQ(counts.fused + counts.fell_back, 0u) << "run.matmul_epilogues = separate never tries cuBLASLt";
}

}  // namespace
}  // namespace trident::kernels::gpu_test
