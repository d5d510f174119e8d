// The CUDA backend against its CPU twin (kernels/cpu, the reference): every Backend method but
// the cross-entropy family (cuda_cross_entropy_test.cpp), on seeded random inputs, run on both
// backends, copied back and compared (twin_test_support.h: the measure and the tolerances).
//
// - Shapes are small but not multiples of 32 (B=2, T=37, C=48, NH=3), so every kernel's partial
//   warps and blocks are exercised; a second, wider case per row-wise operation has rows longer
//   than a block of 256 threads (T=300, C=771), so the strided loops inside a block take several
//   turns; elementwise ops also run on 3M elements, beyond one pass of the capped grid.
// - Backwards that accumulate get gradient outputs pre-filled with non-zero values; outputs
//   that are overwritten are pre-filled with garbage.
// - The vocabulary-parallel embedding runs on a shard in the middle of the vocabulary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <stdexcept>
#include <iterator>
#include <utility>
#include <vector>

#include "kernels/backend.h"              // Backend, AdamWArgs
#include "kernels/out_of_memory.h"        // OutOfMemory
#include "tests/gpu/twin_test_support.h"  // TwinBackends, expect_twins_agree, tolerances

namespace trident::kernels::gpu_test {
namespace {

// Small elementwise length (not a multiple of 32) and a large one (more than
// kMaxElementwiseBlocks * 256 threads, so each thread takes several turns of its loop).
constexpr std::size_t kSmallLength = 14213;
constexpr std::size_t kLargeLength = 3000017;

struct AttentionShape {
  const char* name;
  int B, T, C, NH;
};
constexpr AttentionShape kAttentionShapes[] = {
    {"B=2 T=37 C=48 NH=3", 2, 37, 48, 3},
    {"B=1 T=300 C=96 NH=4 (rows longer than a block)", 1, 300, 96, 4},
    {"B=2 T=129 C=128 NH=2 (GPT-2's head size 64)", 2, 129, 128, 2},
    {"B=4 T=33 C=64 NH=2 (B > NH: each product NH strided calls of B matrices)", 4, 33, 64, 2},
};

struct RowShape {
  const char* name;
  int N, C;
};
constexpr RowShape kLayernormShapes[] = {
    {"N=74 C=48", 74, 48},
    {"N=5 C=771 (rows longer than a block)", 5, 771},
};

// --- the backend itself ------------------------------------------------------------------------

TEST_F(TwinBackends, CudaBackendNamesItsDevice) {
  EXPECT_EQ(gpu_->device(), Device::kCuda);
  const std::string name = gpu_->name();
  EXPECT_EQ(name.rfind("cuda (", 0), 0u) << name;
  EXPECT_NE(name.find(", sm_"), std::string::npos) << name;
  EXPECT_EQ(name.back(), ')') << name;
}

// trident check counts the 16-bit families from native_16bit_kernels without a backend; the
// backend must claim exactly those, for both attention kernels.
TEST_F(TwinBackends, ClaimsTheNativeFamiliesTridentCheckCounts) {
  EXPECT_EQ(gpu_->native_16bit(), native_16bit_kernels(Device::kCuda));
  EXPECT_EQ(cpu_->native_16bit(), native_16bit_kernels(Device::kCpu));
  BackendOptions flash;
  flash.attention = AttentionKernel::kFlash;
  EXPECT_EQ(make_backend(Device::kCuda, kCpuThreads, 0, flash)->native_16bit(),
            native_16bit_kernels(Device::kCuda, flash));
}

TEST_F(TwinBackends, AllocationsAreAlignedDeviceMemory) {
  for (const std::size_t count :
       {std::size_t{0}, std::size_t{1}, std::size_t{17}, std::size_t{1000}}) {
    float* p = gpu_->allocate(count);
    EXPECT_NE(p, nullptr) << count << " floats";
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u) << count << " floats";
    EXPECT_TRUE(gpu_->is_device_memory(p)) << count << " floats";
    gpu_->release(p);
    int32_t* t = gpu_->allocate_tokens(count);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t) % 64, 0u) << count << " tokens";
    gpu_->release_tokens(t);
  }
  std::vector<float> host(4);
  EXPECT_FALSE(gpu_->is_device_memory(host.data()));
}

TEST_F(TwinBackends, DeviceMemoryHighWaterCountsLiveAllocations) {
  auto gpu = make_backend(Device::kCuda, kCpuThreads);
  EXPECT_EQ(gpu->device_bytes_high_water(), 0u);
  float* a = gpu->allocate(1000);
  int32_t* t = gpu->allocate_tokens(10);
  EXPECT_EQ(gpu->device_bytes_high_water(), 4040u);
  gpu->release(a);
  float* b = gpu->allocate(500);  // fits in what was released: the mark stays
  EXPECT_EQ(gpu->device_bytes_high_water(), 4040u);
  gpu->release(b);
  gpu->release_tokens(t);
  EXPECT_EQ(cpu_->device_bytes_high_water(), 0u);  // host memory: not counted here
}

// An allocation no GPU holds (256 TiB) fails as std::bad_alloc that names the GPU, the size
// and what was free, and leaves the backend usable.
TEST_F(TwinBackends, FailedAllocationSaysWhatRanOut) {
  auto gpu = make_backend(Device::kCuda, kCpuThreads);
  const std::size_t floats = std::size_t{1} << 46;
  try {
    gpu->allocate(floats);
    ADD_FAILURE() << "a 256 TiB device allocation succeeded";
  } catch (const OutOfMemory& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("out of device memory on GPU 0: cudaMalloc of 268435456.0 MiB failed with ", 0), 0u) << what;
    EXPECT_NE(what.find(" free of "), std::string::npos) << what;
  }
  EXPECT_EQ(gpu->device_bytes_high_water(), 0u);
  float* small = gpu->allocate(16);  // the failure is not sticky
  gpu->release(small);
}

TEST_F(TwinBackends, CopiesAndZeroFillRoundTrip) {
  const std::vector<float> host = uniform(kSmallLength, -1.0f, 1.0f);
  float* dev = gpu_->allocate(host.size());
  gpu_->copy_to_device(dev, host.data(), host.size());
  std::vector<float> back(host.size());
  gpu_->copy_to_host(back.data(), dev, host.size());
  EXPECT_EQ(back, host);
  gpu_->fill_zero(dev + 1, host.size() - 2);  // not the first and last: exact extent
  gpu_->copy_to_host(back.data(), dev, host.size());
  EXPECT_EQ(back.front(), host.front());
  EXPECT_EQ(back.back(), host.back());
  EXPECT_EQ(std::count(back.begin() + 1, back.end() - 1, 0.0f),
            static_cast<std::ptrdiff_t>(host.size() - 2));
  gpu_->release(dev);
}

// --- embeddings --------------------------------------------------------------------------------

struct EmbeddingCase {
  const char* name;
  int vocab_begin, vocab_end;
  bool with_positions;
};
constexpr int kEmbB = 2, kEmbT = 37, kEmbC = 48, kEmbVp = 64;
constexpr EmbeddingCase kEmbeddingCases[] = {
    {"whole vocabulary, with positions", 0, kEmbVp, true},
    {"middle shard [20, 41), with positions", 20, 41, true},
    {"middle shard [20, 41), without positions", 20, 41, false},
};

TEST_F(TwinBackends, EmbeddingForwardMatchesCpu) {
  for (const EmbeddingCase& c : kEmbeddingCases) {
    SCOPED_TRACE(c.name);
    const int N = kEmbB * kEmbT;
    auto tokens = twin_tokens(uniform_ids(count_of(N, 1), 0, kEmbVp));
    auto wte = twin(uniform(count_of(c.vocab_end - c.vocab_begin, kEmbC), -1.0f, 1.0f));
    auto wpe = twin(uniform(count_of(kEmbT, kEmbC), -1.0f, 1.0f));
    auto out = twin(uniform(count_of(N, kEmbC), 5.0f, 9.0f));  // garbage: overwritten
    run_on_both([&](Backend& b, Side side) {
      b.embedding_forward(out.on(side), tokens.on(side), wte.on(side),
                          c.with_positions ? wpe.on(side) : nullptr, kEmbB, kEmbT, kEmbC,
                          c.vocab_begin, c.vocab_end);
    });
    expect_twins_agree(out, kElementwiseTolerance, "out");
  }
}

// B*T*C = 925200 > 1024 blocks * 256 threads: the forward's grid-stride loop takes several
// turns (its i / C and bt % T cross rows and sequences mid-pass); C = 771 leaves the backward's
// last tile of 128 channels partial. Forward and backward add in the CPU's order: identical
// (dwpe: the batch summed in order on both sides; dwte: the device sort keeps each token's
// positions ascending).
TEST_F(TwinBackends, EmbeddingOverSeveralGridPassesMatchesCpu) {
  const int B = 4, T = 300, C = 771, Vp = 64;
  const int N = B * T;
  auto tokens = twin_tokens(uniform_ids(count_of(N, 1), 0, Vp));
  auto wte = twin(uniform(count_of(Vp, C), -1.0f, 1.0f));
  auto wpe = twin(uniform(count_of(T, C), -1.0f, 1.0f));
  auto out = twin(uniform(count_of(N, C), 5.0f, 9.0f));  // garbage: overwritten
  run_on_both([&](Backend& b, Side side) {
    b.embedding_forward(out.on(side), tokens.on(side), wte.on(side), wpe.on(side), B, T, C, 0, Vp);
  });
  expect_twins_agree(out, 0.0, "out");
  auto dout = twin(uniform(count_of(N, C), -1.0f, 1.0f));
  auto dwte = twin(uniform(count_of(Vp, C), -1.0f, 1.0f));
  auto dwpe = twin(uniform(count_of(T, C), -1.0f, 1.0f));
  run_on_both([&](Backend& b, Side side) {
    b.embedding_backward(dwte.on(side), dwpe.on(side), dout.on(side), tokens.on(side), B, T, C, 0, Vp);
  });
  expect_twins_agree(dwte, 0.0, "dwte");
  expect_twins_agree(dwpe, 0.0, "dwpe");
}

// GPT-2's micro-batch and more: 16384 positions (B = 16, T = 1024), few distinct tokens (runs of
// hundreds of positions, as frequent tokens make), so the device sort takes its multi-pass,
// multi-block path: it must still keep each token's positions in order (equal bits), also on a
// vocabulary shard that skips the tokens below it.
TEST_F(TwinBackends, EmbeddingBackwardOfALargeBatchIsTheCpusBitForBit) {
  const int B = 16, T = 1024, C = 64, Vp = 96;
  auto tokens = twin_tokens(uniform_ids(count_of(B * T, 1), 0, Vp));
  auto dout = twin(uniform(count_of(B * T, C), -1.0f, 1.0f));
  for (const int vocab_begin : {0, 40}) {
    SCOPED_TRACE("rows [" + std::to_string(vocab_begin) + ", " + std::to_string(Vp) + ")");
    auto dwte = twin(uniform(count_of(Vp - vocab_begin, C), -1.0f, 1.0f));
    run_on_both([&](Backend& b, Side side) {
      b.embedding_backward(dwte.on(side), nullptr, dout.on(side), tokens.on(side), B, T, C, vocab_begin, Vp);
    });
    expect_twins_agree(dwte, 0.0, "dwte");
  }
}

TEST_F(TwinBackends, EmbeddingBackwardAccumulatesLikeCpu) {
  for (const EmbeddingCase& c : kEmbeddingCases) {
    SCOPED_TRACE(c.name);
    const int N = kEmbB * kEmbT;
    // Few distinct tokens, so rows receive many additions (the scatter's hard case).
    auto tokens = twin_tokens(uniform_ids(count_of(N, 1), 14, 47));
    auto dout = twin(uniform(count_of(N, kEmbC), -1.0f, 1.0f));
    auto dwte = twin(uniform(count_of(c.vocab_end - c.vocab_begin, kEmbC), -1.0f, 1.0f));
    auto dwpe = twin(uniform(count_of(kEmbT, kEmbC), -1.0f, 1.0f));
    run_on_both([&](Backend& b, Side side) {
      b.embedding_backward(dwte.on(side), c.with_positions ? dwpe.on(side) : nullptr, dout.on(side),
                           tokens.on(side), kEmbB, kEmbT, kEmbC, c.vocab_begin, c.vocab_end);
    });
    // The device sorts the positions by token and adds each token's rows in position order, the
    // twin's order, with the same fp32 additions: equal bit for bit (embedding_math.h).
    expect_twins_agree(dwte, 0.0, "dwte");
    expect_twins_agree(dwpe, kReductionTolerance, "dwpe");  // untouched when not passed
  }
}

// --- matmul ------------------------------------------------------------------------------------

struct MatmulShape {
  const char* name;
  int N, C, OC;
};
constexpr MatmulShape kMatmulShapes[] = {
    {"N=74 C=48 OC=144", 74, 48, 144},
    {"N=74 C=48 OC=61 (an LM head)", 74, 48, 61},
    // N*OC = 462600 > 1024 blocks * 256 threads: the bias broadcast's grid-stride loop takes
    // several turns; OC = 771 leaves the last dbias block of 32 columns partial.
    {"N=600 C=48 OC=771 (bias broadcast past one grid pass)", 600, 48, 771},
};

TEST_F(TwinBackends, MatmulForwardMatchesCpu) {
  for (const MatmulShape& s : kMatmulShapes) {
    for (const bool with_bias : {true, false}) {
      SCOPED_TRACE(std::string(s.name) + (with_bias ? ", with bias" : ", without bias"));
      auto inp = twin(uniform(count_of(s.N, s.C), -1.0f, 1.0f));
      auto weight = twin(uniform(count_of(s.OC, s.C), -1.0f, 1.0f));
      auto bias = twin(uniform(count_of(s.OC, 1), -1.0f, 1.0f));
      auto out = twin(uniform(count_of(s.N, s.OC), 5.0f, 9.0f));  // garbage: overwritten
      run_on_both([&](Backend& b, Side side) {
        b.matmul_forward(out.on(side), inp.on(side), weight.on(side),
                         with_bias ? bias.on(side) : nullptr, s.N, s.C, s.OC);
      });
      expect_twins_agree(out, kReductionTolerance, "out");
    }
  }
}

// With every input bf16- or fp16-representable, the TF32 tensor-core GEMMs that
// set_gemm_input_precision turns on are exact on the inputs and accumulate in fp32: the same
// tolerance as fp32 math. Unrounded inputs would be rounded to TF32 (2^-11 relative) and fail it.
TEST_F(TwinBackends, Tf32GemmsAgreeWithFp32OnRoundedInputs) {
  for (const Precision p : {Precision::kBf16, Precision::kFp16}) {
    gpu_->set_gemm_input_precision(p);
    for (const MatmulShape& s : kMatmulShapes) {
      SCOPED_TRACE(std::string(precision_name(p)) + ", " + s.name);
      auto rounded = [p](std::vector<float> v) {
        for (float& x : v) x = round_to_precision(x, p);
        return v;
      };
      auto inp = twin(rounded(uniform(count_of(s.N, s.C), -1.0f, 1.0f)));
      auto weight = twin(rounded(uniform(count_of(s.OC, s.C), -1.0f, 1.0f)));
      auto out = twin(uniform(count_of(s.N, s.OC), 5.0f, 9.0f));
      run_on_both([&](Backend& b, Side side) {
        b.matmul_forward(out.on(side), inp.on(side), weight.on(side), nullptr, s.N, s.C, s.OC);
      });
      expect_twins_agree(out, kReductionTolerance, "out");
      auto dout = twin(rounded(uniform(count_of(s.N, s.OC), -1.0f, 1.0f)));
      auto dweight = twin(uniform(count_of(s.OC, s.C), -1.0f, 1.0f));
      run_on_both([&](Backend& b, Side side) {
        b.matmul_backward(nullptr, dweight.on(side), nullptr, dout.on(side), inp.on(side), weight.on(side), s.N, s.C,
                          s.OC);
      });
      expect_twins_agree(dweight, kReductionTolerance, "dweight");
    }
  }
  gpu_->set_gemm_input_precision(Precision::kFp32);
}

// dweight and dbias accumulate into their non-zero start; dinp is overwritten (garbage start).
TEST_F(TwinBackends, MatmulBackwardMatchesCpu) {
  for (const MatmulShape& s : kMatmulShapes) {
    for (const bool all_outputs : {true, false}) {
      SCOPED_TRACE(std::string(s.name) + (all_outputs ? ", all outputs" : ", dweight only"));
      auto dout = twin(uniform(count_of(s.N, s.OC), -1.0f, 1.0f));
      auto inp = twin(uniform(count_of(s.N, s.C), -1.0f, 1.0f));
      auto weight = twin(uniform(count_of(s.OC, s.C), -1.0f, 1.0f));
      auto dinp = twin(uniform(count_of(s.N, s.C), 5.0f, 9.0f));  // garbage: overwritten
      auto dweight = twin(uniform(count_of(s.OC, s.C), -1.0f, 1.0f));
      auto dbias = twin(uniform(count_of(s.OC, 1), -1.0f, 1.0f));
      run_on_both([&](Backend& b, Side side) {
        b.matmul_backward(all_outputs ? dinp.on(side) : nullptr, dweight.on(side),
                          all_outputs ? dbias.on(side) : nullptr, dout.on(side), inp.on(side),
                          weight.on(side), s.N, s.C, s.OC);
      });
      expect_twins_agree(dinp, kReductionTolerance, "dinp");
      expect_twins_agree(dweight, kReductionTolerance, "dweight");
      expect_twins_agree(dbias, kReductionTolerance, "dbias");
    }
  }
}

// The bias and LayerNorm parameter gradients are sums over rows in a fixed order
// (kernels/cuda/column_sums_math.h, a two-stage reduction over row chunks): two runs from the
// same state give the same bits. At N = 8192 rows (GPT-2 124M at micro-batch 8) the sums are
// longest; against the CPU's rows-in-order fp32 loop the difference is that loop's own rounding,
// ~sqrt(N) ulp (the playground measured up to 3.7e-6 of the largest sum): kReductionTolerance.
TEST_F(TwinBackends, ParameterGradientSumsAreTheSameBitsRunToRun) {
  const int N = 8192, C = 768, OC = 3 * C;
  auto dout = twin(uniform(count_of(N, OC), -1.0f, 1.0f)), inp = twin(uniform(count_of(N, C), -2.0f, 2.0f));
  auto weight = twin(uniform(count_of(OC, C), -1.0f, 1.0f));
  const std::vector<float> dbias_start = uniform(count_of(OC, 1), -1.0f, 1.0f);
  auto dweight = twin(std::vector<float>(count_of(OC, C), 0.0f));
  auto dbias = twin(dbias_start), again = twin(dbias_start);
  run_on_both([&](Backend& b, Side side) {
    b.matmul_backward(nullptr, dweight.on(side), dbias.on(side), dout.on(side), inp.on(side), weight.on(side), N, C,
                      OC);
  });
  gpu_->matmul_backward(nullptr, dweight.on(Side::kGpu), again.on(Side::kGpu), dout.on(Side::kGpu), inp.on(Side::kGpu),
                        weight.on(Side::kGpu), N, C, OC);
  expect_twins_agree(dbias, kReductionTolerance, "dbias at N = 8192");
  EXPECT_EQ(again.values(Side::kGpu), dbias.values(Side::kGpu)) << "bias gradient, run to run";

  // LayerNorm's pair on the first C columns of dout, with made-up statistics (any values do).
  auto ln_dout = twin(uniform(count_of(N, C), -1.0f, 1.0f)), dinp = twin(std::vector<float>(count_of(N, C), 0.0f));
  auto ln_weight = twin(uniform(count_of(C, 1), 0.5f, 1.5f));
  auto mean = twin(uniform(count_of(N, 1), -0.5f, 0.5f)), rstd = twin(uniform(count_of(N, 1), 0.5f, 2.0f));
  const std::vector<float> start = uniform(count_of(C, 1), -1.0f, 1.0f);
  auto dw = twin(start), db = twin(start), dw2 = twin(start), db2 = twin(start);
  run_on_both([&](Backend& b, Side side) {
    b.layernorm_backward(dinp.on(side), dw.on(side), db.on(side), ln_dout.on(side), inp.on(side), ln_weight.on(side),
                         mean.on(side), rstd.on(side), N, C);
  });
  const Side g = Side::kGpu;
  gpu_->layernorm_backward(dinp.on(g), dw2.on(g), db2.on(g), ln_dout.on(g), inp.on(g), ln_weight.on(g), mean.on(g),
                           rstd.on(g), N, C);
  expect_twins_agree(dw, kReductionTolerance, "layernorm dweight at N = 8192");
  expect_twins_agree(db, kReductionTolerance, "layernorm dbias at N = 8192");
  EXPECT_EQ(dw2.values(g), dw.values(g)) << "layernorm dweight, run to run";
  EXPECT_EQ(db2.values(g), db.values(g)) << "layernorm dbias, run to run";
}

// --- layernorm ---------------------------------------------------------------------------------

TEST_F(TwinBackends, LayernormForwardMatchesCpu) {
  for (const RowShape& s : kLayernormShapes) {
    SCOPED_TRACE(s.name);
    auto inp = twin(uniform(count_of(s.N, s.C), -2.0f, 3.0f));  // mean ~0.5: centring matters
    auto weight = twin(uniform(count_of(s.C, 1), 0.5f, 1.5f));
    auto bias = twin(uniform(count_of(s.C, 1), -0.5f, 0.5f));
    auto out = twin(uniform(count_of(s.N, s.C), 5.0f, 9.0f));  // garbage: overwritten
    auto mean = twin(uniform(count_of(s.N, 1), 5.0f, 9.0f));
    auto rstd = twin(uniform(count_of(s.N, 1), 5.0f, 9.0f));
    run_on_both([&](Backend& b, Side side) {
      b.layernorm_forward(out.on(side), mean.on(side), rstd.on(side), inp.on(side), weight.on(side),
                          bias.on(side), s.N, s.C);
    });
    expect_twins_agree(out, kReductionTolerance, "out");
    expect_twins_agree(mean, kReductionTolerance, "mean");
    expect_twins_agree(rstd, kReductionTolerance, "rstd");
  }
}

// The fused residual add + LayerNorm: against the CPU's fused twin within the LayerNorm's
// tolerance (the add is one IEEE rounding on both sides, so the residual is identical), and on
// the GPU bit-identical to its own add followed by its own LayerNorm (the contract in
// backend.h), also with the residual overwriting an input.
TEST_F(TwinBackends, FusedResidualLayernormMatchesCpuAndItsParts) {
  for (const RowShape& s : kLayernormShapes) {
    SCOPED_TRACE(s.name);
    const std::size_t n = count_of(s.N, s.C);
    auto a = twin(uniform(n, -2.0f, 3.0f));
    auto b = twin(uniform(n, -1.0f, 1.0f));
    auto weight = twin(uniform(count_of(s.C, 1), 0.5f, 1.5f));
    auto bias = twin(uniform(count_of(s.C, 1), -0.5f, 0.5f));
    auto residual = twin(uniform(n, 5.0f, 9.0f));  // garbage: overwritten
    auto out = twin(uniform(n, 5.0f, 9.0f));
    auto mean = twin(uniform(count_of(s.N, 1), 5.0f, 9.0f));
    auto rstd = twin(uniform(count_of(s.N, 1), 5.0f, 9.0f));
    run_on_both([&](Backend& be, Side side) {
      be.residual_layernorm_forward(residual.on(side), out.on(side), mean.on(side), rstd.on(side), a.on(side),
                                    b.on(side), weight.on(side), bias.on(side), s.N, s.C);
    });
    expect_twins_agree(residual, 0.0, "residual");
    expect_twins_agree(out, kReductionTolerance, "out");
    expect_twins_agree(mean, kReductionTolerance, "mean");
    expect_twins_agree(rstd, kReductionTolerance, "rstd");

    // The GPU's parts, then the fused kernel in place: the residual overwriting a, then b
    // (both allowed by the contract); the same bits.
    auto sum = twin(uniform(n, 5.0f, 9.0f));
    auto parts_out = twin(uniform(n, 5.0f, 9.0f));
    for (auto* residual_in_place : {&a, &b}) {
      gpu_->add(sum.on(Side::kGpu), a.on(Side::kGpu), b.on(Side::kGpu), n);
      gpu_->layernorm_forward(parts_out.on(Side::kGpu), mean.on(Side::kGpu), rstd.on(Side::kGpu), sum.on(Side::kGpu),
                              weight.on(Side::kGpu), bias.on(Side::kGpu), s.N, s.C);
      gpu_->residual_layernorm_forward(residual_in_place->on(Side::kGpu), out.on(Side::kGpu), mean.on(Side::kGpu),
                                       rstd.on(Side::kGpu), a.on(Side::kGpu), b.on(Side::kGpu), weight.on(Side::kGpu),
                                       bias.on(Side::kGpu), s.N, s.C);
      EXPECT_EQ(residual_in_place->values(Side::kGpu), sum.values(Side::kGpu));
      EXPECT_EQ(out.values(Side::kGpu), parts_out.values(Side::kGpu));
    }
  }
}

TEST_F(TwinBackends, LayernormBackwardAccumulatesLikeCpu) {
  for (const RowShape& s : kLayernormShapes) {
    SCOPED_TRACE(s.name);
    const std::vector<float> inp_host = uniform(count_of(s.N, s.C), -2.0f, 3.0f);
    auto inp = twin(inp_host);
    auto weight = twin(uniform(count_of(s.C, 1), 0.5f, 1.5f));
    auto bias = twin(uniform(count_of(s.C, 1), -0.5f, 0.5f));
    // The saved statistics both twins use: the CPU forward's.
    std::vector<float> mean_host(count_of(s.N, 1));
    std::vector<float> rstd_host(count_of(s.N, 1));
    {
      auto out = twin(std::vector<float>(count_of(s.N, s.C)));
      auto mean = twin(mean_host);
      auto rstd = twin(rstd_host);
      cpu_->layernorm_forward(out.on(Side::kCpu), mean.on(Side::kCpu), rstd.on(Side::kCpu),
                              inp.on(Side::kCpu), weight.on(Side::kCpu), bias.on(Side::kCpu), s.N,
                              s.C);
      mean_host = mean.values(Side::kCpu);
      rstd_host = rstd.values(Side::kCpu);
    }
    auto mean = twin(mean_host);
    auto rstd = twin(rstd_host);
    auto dout = twin(uniform(count_of(s.N, s.C), -1.0f, 1.0f));
    auto dinp = twin(uniform(count_of(s.N, s.C), -1.0f, 1.0f));
    auto dweight = twin(uniform(count_of(s.C, 1), -1.0f, 1.0f));
    auto dbias = twin(uniform(count_of(s.C, 1), -1.0f, 1.0f));
    run_on_both([&](Backend& b, Side side) {
      b.layernorm_backward(dinp.on(side), dweight.on(side), dbias.on(side), dout.on(side),
                           inp.on(side), weight.on(side), mean.on(side), rstd.on(side), s.N, s.C);
    });
    expect_twins_agree(dinp, kReductionTolerance, "dinp");
    expect_twins_agree(dweight, kReductionTolerance, "dweight");
    expect_twins_agree(dbias, kReductionTolerance, "dbias");
  }
}

// --- GELU --------------------------------------------------------------------------------------

TEST_F(TwinBackends, GeluForwardMatchesCpu) {
  for (const std::size_t n : {kSmallLength, kLargeLength}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    auto inp = twin(uniform(n, -6.0f, 6.0f));  // both tails and the curved middle
    auto out = twin(uniform(n, 5.0f, 9.0f));   // garbage: overwritten
    run_on_both([&](Backend& b, Side side) { b.gelu_forward(out.on(side), inp.on(side), n); });
    expect_twins_agree(out, kElementwiseTolerance, "out");
  }
}

// dinp overwritten (garbage start), and in place (dinp = dout), as the model's MLP runs it.
TEST_F(TwinBackends, GeluBackwardMatchesCpu) {
  for (const std::size_t n : {kSmallLength, kLargeLength}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    auto inp = twin(uniform(n, -6.0f, 6.0f));
    auto dout = twin(uniform(n, -1.0f, 1.0f));
    auto dinp = twin(uniform(n, 5.0f, 9.0f));  // garbage: overwritten
    auto in_place = twin(dout.values(Side::kCpu));
    run_on_both([&](Backend& b, Side side) {
      b.gelu_backward(dinp.on(side), inp.on(side), dout.on(side), n);
      b.gelu_backward(in_place.on(side), inp.on(side), in_place.on(side), n);
    });
    expect_twins_agree(dinp, kGeluBackwardTolerance, "dinp");
    expect_twins_agree(in_place, kGeluBackwardTolerance, "dinp in place");
  }
}

// --- attention ---------------------------------------------------------------------------------

TEST_F(TwinBackends, AttentionForwardMatchesCpu) {
  for (const AttentionShape& s : kAttentionShapes) {
    SCOPED_TRACE(s.name);
    auto qkv = twin(uniform(count_of(s.B * s.T, 3 * s.C), -1.0f, 1.0f));
    auto out = twin(uniform(count_of(s.B * s.T, s.C), 5.0f, 9.0f));  // garbage: overwritten
    auto lse = twin(uniform(count_of(s.B * s.NH, s.T), 5.0f, 9.0f));
    // Each backend gets the scratch it asks for, full of garbage (undefined between calls).
    BackendFloats cpu_scratch(*cpu_,
                              uniform(cpu_->attention_scratch_size(s.B, s.T, s.NH), 5.0f, 9.0f));
    BackendFloats gpu_scratch(*gpu_,
                              uniform(gpu_->attention_scratch_size(s.B, s.T, s.NH), 5.0f, 9.0f));
    run_on_both([&](Backend& b, Side side) {
      float* scratch = side == Side::kCpu ? cpu_scratch.get() : gpu_scratch.get();
      b.attention_forward(out.on(side), lse.on(side), scratch, qkv.on(side), s.B, s.T, s.C, s.NH);
    });
    expect_twins_agree(out, kReductionTolerance, "out");
    // lse = max + log(sum): the max is one score (a 16- to 24-term dot product here), the sum
    // a row reduction in another order; values O(1), so the reductions' few ulps.
    expect_twins_agree(lse, kReductionTolerance, "lse");
  }
}

// dqkv overwritten from a garbage start, as the CPU twin overwrites it.
TEST_F(TwinBackends, AttentionBackwardMatchesCpu) {
  for (const AttentionShape& s : kAttentionShapes) {
    SCOPED_TRACE(s.name);
    auto qkv = twin(uniform(count_of(s.B * s.T, 3 * s.C), -1.0f, 1.0f));
    // The forward state both twins use: the CPU forward's out and lse.
    std::vector<float> out_host(count_of(s.B * s.T, s.C));
    std::vector<float> lse_host(count_of(s.B * s.NH, s.T));
    {
      auto out = twin(out_host);
      auto lse = twin(lse_host);
      BackendFloats scratch(*cpu_, std::vector<float>(cpu_->attention_scratch_size(s.B, s.T, s.NH)));
      cpu_->attention_forward(out.on(Side::kCpu), lse.on(Side::kCpu), scratch.get(), qkv.on(Side::kCpu), s.B,
                              s.T, s.C, s.NH);
      out_host = out.values(Side::kCpu);
      lse_host = lse.values(Side::kCpu);
    }
    auto out = twin(out_host);
    auto lse = twin(lse_host);
    auto dout = twin(uniform(count_of(s.B * s.T, s.C), -1.0f, 1.0f));
    auto dqkv = twin(uniform(count_of(s.B * s.T, 3 * s.C), 5.0f, 9.0f));  // garbage: overwritten
    // Each backend gets the scratch it asks for, full of garbage (undefined between calls).
    BackendFloats cpu_scratch(*cpu_,
                              uniform(cpu_->attention_scratch_size(s.B, s.T, s.NH), 5.0f, 9.0f));
    BackendFloats gpu_scratch(*gpu_,
                              uniform(gpu_->attention_scratch_size(s.B, s.T, s.NH), 5.0f, 9.0f));
    run_on_both([&](Backend& b, Side side) {
      float* scratch = side == Side::kCpu ? cpu_scratch.get() : gpu_scratch.get();
      b.attention_backward(dqkv.on(side), scratch, dout.on(side), qkv.on(side), out.on(side), lse.on(side), s.B,
                           s.T, s.C, s.NH);
    });
    // Both recompute P = exp(S - lse) from the same lse (expf against exp_approx, 2 ulp each),
    // then the same reductions as before in other orders.
    expect_twins_agree(dqkv, kReductionTolerance, "dqkv");
  }
}

// Attention on another CUDA backend than the fixture's (other options) against the CPU twin.
class AttentionTwins : public TwinBackends {
 protected:
  // Forward of `gpu` from the CPU's qkv (uniform in [-qkv_bound, qkv_bound]); then backward from
  // the CPU forward's out and lse, so that the backward's own error is measured alone. Each
  // backend's scratch starts full of garbage, and so do out, lse and dqkv (overwritten). With
  // `same_bits_again`, a second backward from a NaN start must give the first's bits (every
  // element written, none read; no atomics).
  void expect_attention_agrees(Backend& gpu, const AttentionShape& s, float qkv_bound, bool same_bits_again) {
    auto qkv = twin(uniform(count_of(s.B * s.T, 3 * s.C), -qkv_bound, qkv_bound));
    auto out = twin(uniform(count_of(s.B * s.T, s.C), 5.0f, 9.0f));
    auto lse = twin(uniform(count_of(s.B * s.NH, s.T), 5.0f, 9.0f));
    BackendFloats cpu_scratch(*cpu_, uniform(cpu_->attention_scratch_size(s.B, s.T, s.NH), 5.0f, 9.0f));
    BackendFloats gpu_scratch(*gpu_, uniform(gpu.attention_scratch_size(s.B, s.T, s.NH), 5.0f, 9.0f));
    cpu_->attention_forward(out.on(Side::kCpu), lse.on(Side::kCpu), cpu_scratch.get(), qkv.on(Side::kCpu), s.B, s.T,
                            s.C, s.NH);
    gpu.attention_forward(out.on(Side::kGpu), lse.on(Side::kGpu), gpu_scratch.get(), qkv.on(Side::kGpu), s.B, s.T,
                          s.C, s.NH);
    gpu.synchronize();
    expect_twins_agree(out, kReductionTolerance, "out");
    expect_twins_agree(lse, kReductionTolerance, "lse");

    auto cpu_out = twin(out.values(Side::kCpu)), cpu_lse = twin(lse.values(Side::kCpu));
    auto dout = twin(uniform(count_of(s.B * s.T, s.C), -1.0f, 1.0f));
    auto dqkv = twin(uniform(count_of(s.B * s.T, 3 * s.C), 5.0f, 9.0f));
    cpu_->attention_backward(dqkv.on(Side::kCpu), cpu_scratch.get(), dout.on(Side::kCpu), qkv.on(Side::kCpu),
                             cpu_out.on(Side::kCpu), cpu_lse.on(Side::kCpu), s.B, s.T, s.C, s.NH);
    gpu.attention_backward(dqkv.on(Side::kGpu), gpu_scratch.get(), dout.on(Side::kGpu), qkv.on(Side::kGpu),
                           cpu_out.on(Side::kGpu), cpu_lse.on(Side::kGpu), s.B, s.T, s.C, s.NH);
    gpu.synchronize();
    expect_twins_agree(dqkv, kReductionTolerance, "dqkv");
    if (!same_bits_again) return;
    auto repeat = twin(std::vector<float>(count_of(s.B * s.T, 3 * s.C), std::numeric_limits<float>::quiet_NaN()));
    gpu.attention_backward(repeat.on(Side::kGpu), gpu_scratch.get(), dout.on(Side::kGpu), qkv.on(Side::kGpu),
                           cpu_out.on(Side::kGpu), cpu_lse.on(Side::kGpu), s.B, s.T, s.C, s.NH);
    gpu.synchronize();
    EXPECT_EQ(repeat.values(Side::kGpu), dqkv.values(Side::kGpu));
  }
};

// The GEMM attention's other schedules (run.attention_blocks, run.attention_batching) through
// the backend: causal row blocks and pointer-array products, the arrays in the backend's
// workspace, at the tolerances of the defaults (only the batching of the products and the
// columns past each block's end differ). cuda_bf16_storage_test.cpp compares the same options
// against the defaults in 16 bits, at the launcher.
TEST_F(AttentionTwins, AttentionSchedulesMatchCpu) {
  struct Schedule {
    const char* name;
    int blocks;
    AttentionBatching batching;
  };
  const Schedule schedules[] = {{"2 blocks", 2, AttentionBatching::kStrided},
                                {"pointer arrays", 1, AttentionBatching::kPointers},
                                {"4 blocks, pointer arrays", 4, AttentionBatching::kPointers},
                                {"more blocks than groups of 8 rows", 1000, AttentionBatching::kStrided}};
  for (std::size_t k = 0; k < std::size(schedules); ++k) {
    const Schedule& schedule = schedules[k];
    BackendOptions options;
    options.attention_blocks = schedule.blocks;
    options.attention_batching = schedule.batching;
    auto gpu = make_backend(Device::kCuda, kCpuThreads, 0, options);
    // The twin shapes, and one whose fp32 slots and corners all start on 16 bytes with B > 1, so
    // that the pointer arrays step along the batch stride too (T = 64: 16-row blocks at k = 4).
    std::vector<AttentionShape> shapes(std::begin(kAttentionShapes), std::end(kAttentionShapes));
    shapes.push_back({"B=4 T=64 C=128 NH=2 (every matrix on 16 bytes)", 4, 64, 128, 2});
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      // Under the race checker, 8 of the 20 cases: each schedule on one twin shape and on the
      // aligned one (kRaceChecker).
      if (kRaceChecker && i != k && i + 1 != shapes.size()) continue;
      const AttentionShape& s = shapes[i];
      SCOPED_TRACE(std::string(schedule.name) + ", " + s.name);
      expect_attention_agrees(*gpu, s, 1.0f, false);
    }
  }
  BackendOptions none;
  none.attention_blocks = 0;
  EXPECT_THROW(make_backend(Device::kCuda, kCpuThreads, 0, none), std::invalid_argument);
  // The flash options the deck refuses (io/run_config.cpp) are refused here too, for callers that
  // build them in code: a warpgroup count other than 1 or 2, and two warpgroups in the wgmma
  // backward with dQ in the key walk.
  BackendOptions three;
  three.flash_warpgroups = 3;
  EXPECT_THROW(make_backend(Device::kCuda, kCpuThreads, 0, three), std::invalid_argument);
  const BackendOptions two_in_key_walk{.attention = AttentionKernel::kFlash, .flash_dq = FlashDq::kInKeyWalk,
                                 .flash_backward_products = FlashProducts::kWarpgroup, .flash_warpgroups = 2};
  EXPECT_THROW(make_backend(Device::kCuda, kCpuThreads, 0, two_in_key_walk), std::invalid_argument);
}

// Flash attention (run.attention = flash): the same contract, another algorithm (online
// softmax, P rebuilt tile by tile, D = dout . out), against the CPU twin at head size 64; the
// ragged lengths end mid-tile. tests/unit/kernels/flash_attention_replay_test.cpp replays the
// same per-thread code on the host at 1e-5; here the device's FMA contraction and expf add their
// few ulps. No atomics: a second backward gives the same bits.
TEST_F(AttentionTwins, FlashAttentionMatchesCpu) {
  auto flash = make_backend(Device::kCuda, kCpuThreads, 0, {.attention = AttentionKernel::kFlash});
  const AttentionShape shapes[] = {{"B=2 T=129 C=128 NH=2", 2, 129, 128, 2},
                                   {"B=1 T=300 C=192 NH=3", 1, 300, 192, 3},
                                   {"B=1 T=64 C=64 NH=1 (one tile)", 1, 64, 64, 1}};
  for (const AttentionShape& s : shapes) {
    SCOPED_TRACE(s.name);
    EXPECT_EQ(flash->attention_scratch_size(s.B, s.T, s.NH), count_of(s.B * s.NH, s.T));
    expect_attention_agrees(*flash, s, 2.0f, true);
  }
  // Head sizes other than 64 are refused, not computed wrongly.
  BackendFloats scratch(*gpu_, std::vector<float>(count_of(2 * 3, 37)));
  auto qkv = twin(uniform(count_of(2 * 37, 3 * 48), -1.0f, 1.0f));
  auto out = twin(uniform(count_of(2 * 37, 48), -1.0f, 1.0f));
  auto lse = twin(uniform(count_of(2 * 3, 37), -1.0f, 1.0f));
  EXPECT_THROW(flash->attention_forward(out.on(Side::kGpu), lse.on(Side::kGpu), scratch.get(), qkv.on(Side::kGpu), 2,
                                        37, 48, 3),
               std::logic_error);
}

// --- elementwise -------------------------------------------------------------------------------

TEST_F(TwinBackends, AddAccumulateAndScaleMatchCpu) {
  for (const std::size_t n : {kSmallLength, kLargeLength}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    auto a = twin(uniform(n, -1.0f, 1.0f));
    auto b = twin(uniform(n, -1.0f, 1.0f));
    auto out = twin(uniform(n, 5.0f, 9.0f));  // garbage: overwritten
    run_on_both([&](Backend& be, Side side) { be.add(out.on(side), a.on(side), b.on(side), n); });
    expect_twins_agree(out, kElementwiseTolerance, "add");
    // out aliasing an input, as the residual stream does.
    run_on_both([&](Backend& be, Side side) { be.add(a.on(side), a.on(side), b.on(side), n); });
    expect_twins_agree(a, kElementwiseTolerance, "add in place");
    run_on_both([&](Backend& be, Side side) { be.accumulate(out.on(side), b.on(side), n); });
    expect_twins_agree(out, kElementwiseTolerance, "accumulate");
    run_on_both([&](Backend& be, Side side) { be.scale(out.on(side), -0.37f, n); });
    expect_twins_agree(out, kElementwiseTolerance, "scale");
  }
}

// The device's own conversions (__float2bfloat16_rn, __float2half_rn) against the CPU's bit
// arithmetic (kernels/precision.h): both round to nearest, ties to even, so every bit agrees,
// over values that reach fp16's overflow and subnormal range.
TEST_F(TwinBackends, RoundToPrecisionIsBitIdenticalToCpu) {
  for (const Precision p : {Precision::kBf16, Precision::kFp16, Precision::kFp32}) {
    SCOPED_TRACE(precision_name(p));
    std::vector<float> values = uniform(kLargeLength, -70000.0f, 70000.0f);
    const std::vector<float> small = uniform(kSmallLength, -1e-6f, 1e-6f);
    values.insert(values.end(), small.begin(), small.end());
    auto x = twin(values);
    auto out = twin(uniform(values.size(), 5.0f, 9.0f));  // overwritten
    run_on_both([&](Backend& be, Side side) { be.round_to_precision(out.on(side), x.on(side), values.size(), p); });
    expect_twins_agree(out, 0.0, "round_to_precision");
    run_on_both([&](Backend& be, Side side) { be.round_to_precision(x.on(side), x.on(side), values.size(), p); });
    expect_twins_agree(x, 0.0, "round_to_precision in place");
  }
}

TEST_F(TwinBackends, SumSquaresMatchesCpuInDouble) {
  EXPECT_EQ(gpu_->sum_squares(nullptr, 0), 0.0);
  for (const std::size_t n : {std::size_t{1}, kSmallLength, kLargeLength}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    auto x = twin(uniform(n, -1.0f, 1.0f));
    const double want = cpu_->sum_squares(x.on(Side::kCpu), n);
    const double got = gpu_->sum_squares(x.on(Side::kGpu), n);
    EXPECT_LE(std::abs(got - want), kDoubleSumTolerance * want)
        << "gpu " << got << ", cpu " << want;
  }
}

// Every element counted once, whatever the start's alignment (the kernel reads 16 bytes at a time
// from the first 16-byte boundary, the up to 3 floats around that apart): values k / 8 have
// squares that are multiples of 2^-6, so every sum here is exact in double in any order, and
// one element dropped or counted twice shows as an inequality.
TEST_F(TwinBackends, SumSquaresCountsEveryElementOnceAtAnyAlignment) {
  // 2.2M floats: more than two passes of the grid (1024 x 256 threads x 4 floats), so threads
  // take both the two-load loop and the one-load remainder; once, misaligned (slow emulated).
  constexpr std::size_t kPasses = 2200003;
  const std::size_t n = kPasses + 8;
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<float>(static_cast<int>(i * 7919 % 17) - 8) / 8.0f;
  BackendFloats x(*gpu_, values);
  const auto check = [&](std::size_t offset, std::size_t count) {
    double want = 0.0;
    for (std::size_t i = offset; i < offset + count; ++i) want += static_cast<double>(values[i]) * values[i];
    EXPECT_EQ(gpu_->sum_squares(x.get() + offset, count), want) << "offset " << offset << ", count " << count;
  };
  for (const std::size_t offset : {0, 1, 2, 3, 5}) {
    for (const std::size_t count : {1, 2, 3, 4, 5, 7, 8, 9, 4099}) check(offset, count);
  }
  check(3, kPasses);
}

// One wait for all ranges: each range's total is sum_squares' (same kernels, same bits), added
// in order from 0 on the host; an empty range adds 0 (its total is cleared, not left stale).
TEST_F(TwinBackends, SumSquaresOfRangesMatchesOneCallPerRange) {
  const std::size_t n = kLargeLength;
  auto x = twin(uniform(n, -1.0f, 1.0f));
  const ElementRange ranges[] = {{0, 1}, {10, 0}, {17, kSmallLength}, {kSmallLength + 100, n - kSmallLength - 200}};
  double want = 0.0;
  for (const ElementRange& r : ranges) want += gpu_->sum_squares(x.on(Side::kGpu) + r.offset, r.count);
  EXPECT_EQ(gpu_->sum_squares_of_ranges(x.on(Side::kGpu), ranges, 4), want);
  const double cpu = cpu_->sum_squares_of_ranges(x.on(Side::kCpu), ranges, 4);
  EXPECT_LE(std::abs(want - cpu), kDoubleSumTolerance * cpu) << "gpu " << want << ", cpu " << cpu;
  EXPECT_EQ(gpu_->sum_squares_of_ranges(x.on(Side::kGpu), ranges, 0), 0.0);
  // The empty range's slot after a range with a large total: it must add 0.
  const ElementRange after[] = {{0, n}, {0, 0}};
  EXPECT_EQ(gpu_->sum_squares_of_ranges(x.on(Side::kGpu), after, 2), gpu_->sum_squares(x.on(Side::kGpu), n));
}

// The trainer's divergence check (src/train/trainer.cpp) reads an inf or NaN gradient from the
// norm's sum of squares: one such element, in the misaligned head, the 16-byte loads or the
// remainder, must make the device's sum non-finite too (a max or a fast-math reduction could
// drop a NaN).
TEST_F(TwinBackends, SumSquaresOfANonFiniteElementIsNotFinite) {
  const std::size_t n = kSmallLength + 7;
  std::vector<float> values(n, 0.5f);
  BackendFloats x(*gpu_, values);
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()}) {
    for (const std::size_t at : {std::size_t{1}, std::size_t{6}, n / 2, n - 2}) {
      SCOPED_TRACE("value " + std::to_string(bad) + " at " + std::to_string(at));
      gpu_->copy_to_device(x.get() + at, &bad, 1);
      EXPECT_FALSE(std::isfinite(gpu_->sum_squares(x.get() + 1, n - 1)));  // from a misaligned start
      const ElementRange ranges[] = {{0, at}, {at, n - at}};
      EXPECT_FALSE(std::isfinite(gpu_->sum_squares_of_ranges(x.get(), ranges, 2)));
      const float fine = 0.5f;
      gpu_->copy_to_device(x.get() + at, &fine, 1);
      EXPECT_TRUE(std::isfinite(gpu_->sum_squares(x.get(), n)));
    }
  }
}

// --- optimiser ---------------------------------------------------------------------------------

TEST_F(TwinBackends, AdamwUpdateMatchesCpu) {
  // grad_scale (the trainer's unscaling and clipping, read with the gradients): 1 and not.
  for (const auto& [step, grad_scale] : {std::pair{1, 1.0f}, std::pair{1000, 0.37f}}) {
    SCOPED_TRACE("step " + std::to_string(step) + ", grad_scale " + std::to_string(grad_scale));
    const std::size_t n = kSmallLength;
    auto param = twin(uniform(n, -1.0f, 1.0f));
    auto grad = twin(uniform(n, -1.0f, 1.0f));
    auto m = twin(uniform(n, -0.1f, 0.1f));
    auto v = twin(uniform(n, 0.0f, 0.01f));
    AdamWArgs args;
    args.lr = 3e-3f;
    args.beta1 = 0.9f;
    args.beta2 = 0.95f;
    args.eps = 1e-8f;
    args.weight_decay = 0.1f;
    args.step = step;
    args.grad_scale = grad_scale;
    run_on_both([&](Backend& b, Side side) {
      b.adamw_update(param.on(side), grad.on(side), m.on(side), v.on(side), n, args);
    });
    expect_twins_agree(param, kElementwiseTolerance, "param");
    expect_twins_agree(m, kElementwiseTolerance, "m");
    expect_twins_agree(v, kElementwiseTolerance, "v");
  }
}

// The master-weight update: master, m and v as adamw_update; the compute copy is the master
// rounded on each side. Where the twins' masters differ by an ulp next to a rounding boundary
// the copies differ by one unit of the 16-bit format. Relative to max |x| (~1, but a unit of
// values in [1, 2) is twice that of [0.5, 1)) the bound is 2^-7 for bf16 and 2^-10 for fp16.
TEST_F(TwinBackends, AdamwUpdateMasterMatchesCpu) {
  for (const Precision p : {Precision::kBf16, Precision::kFp16}) {
    SCOPED_TRACE(precision_name(p));
    const std::size_t n = kLargeLength;
    const auto master_start = uniform(n, -1.0f, 1.0f), m_start = uniform(n, -0.1f, 0.1f);
    const auto v_start = uniform(n, 0.0f, 0.01f);
    auto master = twin(master_start);
    auto compute = twin(uniform(n, 5.0f, 9.0f));  // overwritten
    auto grad = twin(uniform(n, -1.0f, 1.0f));
    auto m = twin(m_start);
    auto v = twin(v_start);
    AdamWArgs args;
    args.lr = 3e-3f;
    args.weight_decay = 0.1f;
    args.step = 7;
    args.grad_scale = 0.37f;
    run_on_both([&](Backend& b, Side side) {
      b.adamw_update_master(master.on(side), compute.on(side), grad.on(side), m.on(side), v.on(side), n, args, p);
    });
    expect_twins_agree(master, kElementwiseTolerance, "master");
    expect_twins_agree(m, kElementwiseTolerance, "m");
    expect_twins_agree(v, kElementwiseTolerance, "v");
    expect_twins_agree(compute, p == Precision::kBf16 ? 0.0079 : 0.00098, "compute copy");
    // A 16-bit compute copy (the model's arena under mixed precision), from the same state: on
    // each side the same masters and, as bit patterns, exactly the values of the fp32 copy.
    auto master16 = twin(master_start), m16 = twin(m_start), v16 = twin(v_start);
    auto compute16 = twin(std::vector<float>((n + 1) / 2, 0.0f));  // two 16-bit values per float
    run_on_both([&](Backend& b, Side side) {
      b.adamw_update_master(master16.on(side), ActPtr(reinterpret_cast<uint16_t*>(compute16.on(side)), p),
                            grad.on(side), m16.on(side), v16.on(side), n, args, p);
    });
    for (const Side side : {Side::kCpu, Side::kGpu}) {
      EXPECT_EQ(master16.values(side), master.values(side));
      const std::vector<float> packed = compute16.values(side), copy = compute.values(side);
      std::vector<uint16_t> bits(2 * packed.size());
      std::memcpy(bits.data(), packed.data(), packed.size() * sizeof(float));
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(decode_16bit(bits[i], p), copy[i]) << (side == Side::kGpu ? "gpu" : "cpu") << " at " << i;
      }
    }
  }
}

// One launch over tensors with and without decay (AdamWArgs::decay_mask, as src/train/adamw.cpp
// builds it): the device reads the same bits of the mask as the CPU twin. Runs cross words and
// the range ends mid-word; the plain and the master-weight kernel both read it.
TEST_F(TwinBackends, AdamwDecayMaskMatchesCpu) {
  const std::size_t n = kLargeLength + 13;
  std::vector<int32_t> words(adamw_decay_mask_words(n), 0);
  for (std::size_t i = 0; i < n; ++i) {
    if ((i / 45) % 2 == 1) words[i / 32] = static_cast<int32_t>(static_cast<uint32_t>(words[i / 32]) | (1u << (i % 32)));
  }
  auto mask = twin_tokens(words);
  auto param = twin(uniform(n, -1.0f, 1.0f));
  auto master = twin(uniform(n, -1.0f, 1.0f));
  auto compute = twin(uniform(n, 5.0f, 9.0f));  // overwritten
  auto grad = twin(uniform(n, -1.0f, 1.0f));
  auto m = twin(uniform(n, -0.1f, 0.1f));
  auto v = twin(uniform(n, 0.0f, 0.01f));
  AdamWArgs args;
  args.lr = 0.05f;  // large, so that the decay term (0.05 * 0.5 * |p|) is far above the tolerance
  args.weight_decay = 0.5f;
  args.step = 3;
  run_on_both([&](Backend& b, Side side) {
    AdamWArgs masked = args;
    masked.decay_mask = mask.on(side);
    b.adamw_update(param.on(side), grad.on(side), m.on(side), v.on(side), n, masked);
    b.adamw_update_master(master.on(side), compute.on(side), grad.on(side), m.on(side), v.on(side), n, masked,
                          Precision::kBf16);
  });
  expect_twins_agree(param, kElementwiseTolerance, "param");
  expect_twins_agree(master, kElementwiseTolerance, "master");
  expect_twins_agree(m, kElementwiseTolerance, "m");
  expect_twins_agree(v, kElementwiseTolerance, "v");
  expect_twins_agree(compute, 0.0079, "compute copy");
}

}  // namespace
}  // namespace trident::kernels::gpu_test
