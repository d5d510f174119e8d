// RoundedStorageBackend: activation outputs are the inner backend's fp32 results rounded to the
// storage precision; the fp32 side (statistics, weight and bias gradients, losses) is the inner
// backend's result bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/rounded_storage_backend.h"
#include "tests/support/native_16bit_kernels.h"  // Native16BitKernelsStandIn
#include "tests/unit/kernels/kernel_test_util.h"  // random_floats, kTestThreads

namespace trident::kernels::test {
namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<float> rounded(std::vector<float> v, Precision p) {
  for (float& x : v) x = round_to_precision(x, p);
  return v;
}

// A value that bf16 and fp16 cannot hold, so that an unwanted rounding of a buffer shows.
bool holds_unrepresentable(const std::vector<float>& v, Precision p) {
  for (float x : v) {
    if (round_to_precision(x, p) != x) return true;
  }
  return false;
}

class RoundedStorage : public ::testing::TestWithParam<Precision> {};

TEST_P(RoundedStorage, MatmulRoundsActivationsButNotWeightGradients) {
  const Precision p = GetParam();
  std::mt19937 rng(501);
  cpu::CpuBackend plain(kTestThreads);
  RoundedStorageBackend storage(plain, p);
  const int N = 6, C = 5, OC = 7;
  const auto inp = random_floats(N * C, rng), w = random_floats(OC * C, rng), b = random_floats(OC, rng);
  const auto dout = random_floats(N * OC, rng);
  std::vector<float> out_plain(N * OC), out(N * OC);
  plain.matmul_forward(out_plain.data(), inp.data(), w.data(), b.data(), N, C, OC);
  storage.matmul_forward(out.data(), inp.data(), w.data(), b.data(), N, C, OC);
  EXPECT_TRUE(holds_unrepresentable(out_plain, p));
  EXPECT_TRUE(same_bits(out, rounded(out_plain, p)));

  std::vector<float> dinp_plain(N * C, 0.0f), dw_plain(OC * C, 0.0f), db_plain(OC, 0.0f);
  std::vector<float> dinp = dinp_plain, dw = dw_plain, db = db_plain;
  plain.matmul_backward(dinp_plain.data(), dw_plain.data(), db_plain.data(), dout.data(), inp.data(), w.data(), N, C, OC);
  storage.matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, C, OC);
  EXPECT_TRUE(same_bits(dinp, rounded(dinp_plain, p)));
  EXPECT_TRUE(holds_unrepresentable(dw_plain, p));
  EXPECT_TRUE(same_bits(dw, dw_plain));  // fp32 gradients
  EXPECT_TRUE(same_bits(db, db_plain));
}

TEST_P(RoundedStorage, LayerNormKeepsFp32StatisticsAndParameterGradients) {
  const Precision p = GetParam();
  std::mt19937 rng(502);
  cpu::CpuBackend plain(kTestThreads);
  RoundedStorageBackend storage(plain, p);
  const int N = 4, C = 9;
  const auto inp = random_floats(N * C, rng), w = random_floats(C, rng), b = random_floats(C, rng);
  const auto dout = random_floats(N * C, rng);
  std::vector<float> out_plain(N * C), mean_plain(N), rstd_plain(N), out(N * C), mean(N), rstd(N);
  plain.layernorm_forward(out_plain.data(), mean_plain.data(), rstd_plain.data(), inp.data(), w.data(), b.data(), N, C);
  storage.layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C);
  EXPECT_TRUE(same_bits(out, rounded(out_plain, p)));
  EXPECT_TRUE(same_bits(mean, mean_plain));
  EXPECT_TRUE(same_bits(rstd, rstd_plain));
  std::vector<float> dinp_plain(N * C, 0.0f), dw_plain(C, 0.0f), db_plain(C, 0.0f);
  std::vector<float> dinp = dinp_plain, dw = dw_plain, db = db_plain;
  plain.layernorm_backward(dinp_plain.data(), dw_plain.data(), db_plain.data(), dout.data(), inp.data(), w.data(),
                           mean_plain.data(), rstd_plain.data(), N, C);
  storage.layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), mean.data(),
                             rstd.data(), N, C);
  EXPECT_TRUE(same_bits(dinp, rounded(dinp_plain, p)));
  EXPECT_TRUE(same_bits(dw, dw_plain));
  EXPECT_TRUE(same_bits(db, db_plain));
}

TEST_P(RoundedStorage, AttentionRoundsOutputAndInputGradientButNotLogSumExp) {
  const Precision p = GetParam();
  std::mt19937 rng(503);
  cpu::CpuBackend plain(kTestThreads);
  RoundedStorageBackend storage(plain, p);
  const int B = 2, T = 5, C = 8, NH = 2;
  const auto qkv = random_floats(B * T * 3 * C, rng), dout = random_floats(B * T * C, rng);
  std::vector<float> out_plain(B * T * C), lse_plain(B * NH * T), out(B * T * C), lse(B * NH * T);
  std::vector<float> scratch(plain.attention_scratch_size(B, T, NH));
  plain.attention_forward(out_plain.data(), lse_plain.data(), scratch.data(), qkv.data(), B, T, C, NH);
  storage.attention_forward(out.data(), lse.data(), scratch.data(), qkv.data(), B, T, C, NH);
  EXPECT_TRUE(same_bits(out, rounded(out_plain, p)));
  EXPECT_TRUE(holds_unrepresentable(lse_plain, p));
  EXPECT_TRUE(same_bits(lse, lse_plain));  // an fp32 statistic, like the LayerNorm mean and rstd
  std::vector<float> dqkv_plain(B * T * 3 * C, 0.0f), dqkv = dqkv_plain;
  plain.attention_backward(dqkv_plain.data(), scratch.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T,
                           C, NH);
  storage.attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, C,
                             NH);
  EXPECT_TRUE(same_bits(dqkv, rounded(dqkv_plain, p)));
}

TEST_P(RoundedStorage, CrossEntropyKeepsFp32LossesAndRoundsLogitGradients) {
  const Precision p = GetParam();
  std::mt19937 rng(504);
  cpu::CpuBackend plain(kTestThreads);
  RoundedStorageBackend storage(plain, p);
  const int N = 5, V = 7, Vp = 8;
  const auto logits = random_floats(N * Vp, rng, -3.0f, 3.0f);
  std::vector<int32_t> targets = {0, 6, 3, 2, 1};
  std::vector<float> losses_plain(N), losses(N);
  plain.cross_entropy_forward(losses_plain.data(), nullptr, nullptr, logits.data(), targets.data(), N, V, Vp);
  storage.cross_entropy_forward(losses.data(), nullptr, nullptr, logits.data(), targets.data(), N, V, Vp);
  EXPECT_TRUE(holds_unrepresentable(losses_plain, p));
  EXPECT_TRUE(same_bits(losses, losses_plain));
  std::vector<float> d_plain(N * Vp), d(N * Vp);
  plain.cross_entropy_backward(d_plain.data(), logits.data(), targets.data(), 0.37f, N, V, Vp);
  storage.cross_entropy_backward(d.data(), logits.data(), targets.data(), 0.37f, N, V, Vp);
  EXPECT_TRUE(same_bits(d, rounded(d_plain, p)));
}

TEST_P(RoundedStorage, ResidualAddRoundsButGradientScalingDoesNot) {
  const Precision p = GetParam();
  std::mt19937 rng(505);
  cpu::CpuBackend plain(kTestThreads);
  RoundedStorageBackend storage(plain, p);
  const auto a = random_floats(33, rng), b = random_floats(33, rng);
  std::vector<float> sum_plain(33), sum(33);
  plain.add(sum_plain.data(), a.data(), b.data(), 33);
  storage.add(sum.data(), a.data(), b.data(), 33);
  EXPECT_TRUE(same_bits(sum, rounded(sum_plain, p)));
  std::vector<float> scaled = a, scaled_plain = a;
  plain.scale(scaled_plain.data(), 0.3f, 33);
  storage.scale(scaled.data(), 0.3f, 33);
  EXPECT_TRUE(holds_unrepresentable(scaled_plain, p));
  EXPECT_TRUE(same_bits(scaled, scaled_plain));
}

// The fused residual + LayerNorm stores a rounded residual and normalises that rounded value:
// exactly the decorator's add followed by its LayerNorm.
TEST_P(RoundedStorage, FusedResidualLayerNormNormalisesTheRoundedResidual) {
  const Precision p = GetParam();
  std::mt19937 rng(506);
  cpu::CpuBackend plain(kTestThreads);
  RoundedStorageBackend storage(plain, p);
  const int N = 5, C = 11;
  const auto a = random_floats(N * C, rng), b = random_floats(N * C, rng);
  const auto w = random_floats(C, rng), bias = random_floats(C, rng);
  std::vector<float> sum(N * C), out(N * C), mean(N), rstd(N);
  storage.add(sum.data(), a.data(), b.data(), sum.size());
  storage.layernorm_forward(out.data(), mean.data(), rstd.data(), sum.data(), w.data(), bias.data(), N, C);
  std::vector<float> residual(N * C), fused(N * C), fused_mean(N), fused_rstd(N);
  storage.residual_layernorm_forward(residual.data(), fused.data(), fused_mean.data(), fused_rstd.data(), a.data(),
                                     b.data(), w.data(), bias.data(), N, C);
  EXPECT_TRUE(same_bits(residual, sum));
  EXPECT_TRUE(same_bits(residual, rounded(residual, p)));
  EXPECT_TRUE(same_bits(fused, out));
  EXPECT_TRUE(same_bits(fused_mean, mean));
  EXPECT_TRUE(same_bits(fused_rstd, rstd));
  // The plain fused kernel normalises the unrounded sum: a different result, so the order matters.
  std::vector<float> plain_residual(N * C), plain_out(N * C);
  plain.residual_layernorm_forward(plain_residual.data(), plain_out.data(), fused_mean.data(), fused_rstd.data(),
                                   a.data(), b.data(), w.data(), bias.data(), N, C);
  EXPECT_FALSE(same_bits(rounded(plain_out, p), fused));
}

// --- 16-bit buffers: the same bits as fp32 buffers holding rounded values ----------------------

TEST_P(RoundedStorage, SixteenBitBuffersMatchRoundedFp32BuffersWithAccumulationAndAliasing) {
  const Precision p = GetParam();
  std::mt19937 rng(503);
  cpu::CpuBackend plain(kTestThreads);
  RoundedStorageBackend storage(plain, p);
  const int N = 6, C = 5, OC = 7;
  // Inputs as stored activations: already rounded (fp32 buffers) or encoded (16-bit buffers).
  const auto inp = rounded(random_floats(N * C, rng), p), dout = rounded(random_floats(N * OC, rng), p);
  const auto w = rounded(random_floats(OC * C, rng), p);
  auto inp16 = encoded(inp, p), dout16 = encoded(dout, p);

  // matmul backward overwrites a non-zero input gradient: its old values never leak in.
  auto dinp = rounded(random_floats(N * C, rng), p);
  auto dinp16 = encoded(dinp, p);
  std::vector<float> dw(OC * C, 0.0f), dw16 = dw;
  storage.matmul_backward(dinp.data(), dw.data(), nullptr, dout.data(), inp.data(), w.data(), N, C, OC);
  storage.matmul_backward(ActPtr(dinp16.data(), p), dw16.data(), nullptr, ConstActPtr(dout16.data(), p),
                          ConstActPtr(inp16.data(), p), w.data(), N, C, OC);
  EXPECT_TRUE(same_bits(decoded(dinp16, p), dinp));
  EXPECT_TRUE(same_bits(dw16, dw));

  // add with the output aliasing an input (the residual stream), and a mixed call: one operand
  // a 16-bit buffer, the other an fp32 buffer holding rounded values.
  auto a = rounded(random_floats(N * C, rng), p);
  auto a16 = encoded(a, p);
  storage.add(a.data(), a.data(), inp.data(), a.size());
  storage.add(ActPtr(a16.data(), p), ConstActPtr(a16.data(), p), inp.data(), a16.size());
  EXPECT_TRUE(same_bits(decoded(a16, p), a));

  // Cross-entropy backward in place over the logits.
  const int V = 6, Vp = 8;
  auto logits = rounded(random_floats(N * Vp, rng), p);
  auto logits16 = encoded(logits, p);
  const std::vector<int32_t> targets = {0, 5, 2, 3, 1, 4};
  storage.cross_entropy_backward(logits.data(), logits.data(), targets.data(), 0.25f, N, V, Vp);
  storage.cross_entropy_backward(ActPtr(logits16.data(), p), ConstActPtr(logits16.data(), p), targets.data(), 0.25f,
                                 N, V, Vp);
  EXPECT_TRUE(same_bits(decoded(logits16, p), logits));

  // Fused residual + LayerNorm with the residual written over its input a.
  auto res = rounded(random_floats(N * C, rng), p);
  auto res16 = encoded(res, p);
  std::vector<float> out(N * C), mean(N), rstd(N), mean16(N), rstd16(N);
  std::vector<uint16_t> out16(N * C);
  const auto lw = random_floats(C, rng), lb = random_floats(C, rng);
  storage.residual_layernorm_forward(res.data(), out.data(), mean.data(), rstd.data(), res.data(), inp.data(),
                                     lw.data(), lb.data(), N, C);
  storage.residual_layernorm_forward(ActPtr(res16.data(), p), ActPtr(out16.data(), p), mean16.data(), rstd16.data(),
                                     ConstActPtr(res16.data(), p), ConstActPtr(inp16.data(), p), lw.data(), lb.data(),
                                     N, C);
  EXPECT_TRUE(same_bits(decoded(res16, p), res));
  EXPECT_TRUE(same_bits(decoded(out16, p), out));
  EXPECT_TRUE(same_bits(mean16, mean));
  EXPECT_TRUE(same_bits(rstd16, rstd));

  // The workspace is the largest call's 16-bit operands: matmul backward's dinp, dout, inp.
  EXPECT_EQ(storage.staging_floats(), static_cast<std::size_t>(N * C + N * OC + N * C));
}

TEST_P(RoundedStorage, AllSixteenBitMatmulsGoStraightToABackendThatReadsThem) {
  const Precision p = GetParam();
  std::mt19937 rng(505);
  cpu::CpuBackend plain(kTestThreads);
  test_support::Native16BitKernelsStandIn native(plain, p, {.matmul = true});
  RoundedStorageBackend widening(plain, p), passing(native, p);
  EXPECT_FALSE(widening.native_16bit().any());
  EXPECT_TRUE(passing.native_16bit().matmul);
  const std::string name = precision_name(p);
  EXPECT_NE(passing.name().find(name + " storage: " + name + " kernels (matmul); layernorm, gelu, add, attention, "
                                "embedding, cross_entropy on fp32 (rounded outputs)"),
            std::string::npos)
      << passing.name();
  const int N = 6, C = 5, OC = 7;
  const auto inp = encoded(rounded(random_floats(N * C, rng), p), p);
  const auto w = encoded(rounded(random_floats(OC * C, rng), p), p), b = encoded(rounded(random_floats(OC, rng), p), p);
  const auto dout = encoded(rounded(random_floats(N * OC, rng), p), p);
  const ConstActPtr inp16(inp.data(), p), w16(w.data(), p), b16(b.data(), p), dout16(dout.data(), p);
  // Forward and backward on each: the same widen, fp32 kernel, narrow, so the same bits; the
  // passing one stages nothing.
  std::vector<uint16_t> out_a(N * OC), out_b(N * OC), dinp_a(N * C, 0), dinp_b(N * C, 0);
  std::vector<float> dw_a(OC * C, 0.0f), dw_b = dw_a, db_a(OC, 0.0f), db_b = db_a;
  widening.matmul_forward(ActPtr(out_a.data(), p), inp16, w16, b16, N, C, OC);
  passing.matmul_forward(ActPtr(out_b.data(), p), inp16, w16, b16, N, C, OC);
  widening.matmul_backward(ActPtr(dinp_a.data(), p), dw_a.data(), db_a.data(), dout16, inp16, w16, N, C, OC);
  passing.matmul_backward(ActPtr(dinp_b.data(), p), dw_b.data(), db_b.data(), dout16, inp16, w16, N, C, OC);
  EXPECT_EQ(out_a, out_b);
  EXPECT_EQ(dinp_a, dinp_b);
  EXPECT_TRUE(same_bits(dw_a, dw_b));
  EXPECT_TRUE(same_bits(db_a, db_b));
  EXPECT_EQ(native.calls.matmul, 2);
  EXPECT_EQ(passing.staging_floats(), 0u);
  EXPECT_GT(widening.staging_floats(), 0u);
  // An fp32 out with 16-bit inputs (the LM head's logits) passes through too, rounded after.
  std::vector<float> logits_a(N * OC), logits_b(N * OC);
  widening.matmul_forward(logits_a.data(), inp16, w16, nullptr, N, C, OC);
  passing.matmul_forward(logits_b.data(), inp16, w16, nullptr, N, C, OC);
  EXPECT_TRUE(same_bits(logits_a, logits_b));
  EXPECT_FALSE(holds_unrepresentable(logits_b, p));
  EXPECT_EQ(native.calls.matmul, 3);
  EXPECT_EQ(passing.staging_floats(), 0u);
  // A call with an fp32 input (here the weight) is widened as before.
  const auto w32 = decoded(w, p);
  passing.matmul_forward(ActPtr(out_b.data(), p), inp16, w32.data(), nullptr, N, C, OC);
  EXPECT_EQ(native.calls.matmul, 3);
  EXPECT_EQ(passing.staging_floats(), static_cast<std::size_t>(N * OC + N * C));
}

// Every other family a backend may read natively: a call whose operands are all 16-bit goes
// through to it (counted by the stand-in), with the bits of the widening path and no staging; a
// call with an fp32 operand is widened as before.
TEST_P(RoundedStorage, EveryNativeFamilyPassesAllSixteenBitCallsThrough) {
  const Precision p = GetParam();
  std::mt19937 rng(507);
  cpu::CpuBackend plain(kTestThreads);
  test_support::Native16BitKernelsStandIn native(plain, p, Native16BitKernels::all());
  RoundedStorageBackend widening(plain, p), passing(native, p);
  const std::string name = precision_name(p);
  EXPECT_NE(passing.name().find(name + " kernels (matmul, layernorm, gelu, add, attention, embedding, cross_entropy)"),
            std::string::npos)
      << passing.name();
  EXPECT_EQ(passing.name().find("on fp32"), std::string::npos) << passing.name();
  auto values16 = [&](int n) { return encoded(rounded(random_floats(n, rng), p), p); };
  auto in16 = [p](const std::vector<uint16_t>& v) { return ConstActPtr(v.data(), p); };
  auto out16 = [p](std::vector<uint16_t>& v) { return ActPtr(v.data(), p); };
  // Runs `call` on both backends with copies of the written buffers; they must agree bit for bit.
  auto both = [&](std::vector<std::vector<uint16_t>*> written16, std::vector<std::vector<float>*> written32,
                  const auto& call, const char* what) {
    std::vector<std::vector<uint16_t>> start16;
    std::vector<std::vector<float>> start32;
    for (auto* w : written16) start16.push_back(*w);
    for (auto* w : written32) start32.push_back(*w);
    call(widening);
    std::vector<std::vector<uint16_t>> after16;
    std::vector<std::vector<float>> after32;
    for (std::size_t i = 0; i < written16.size(); ++i) {
      after16.push_back(*written16[i]);
      *written16[i] = start16[i];
    }
    for (std::size_t i = 0; i < written32.size(); ++i) {
      after32.push_back(*written32[i]);
      *written32[i] = start32[i];
    }
    call(passing);
    for (std::size_t i = 0; i < written16.size(); ++i) EXPECT_EQ(*written16[i], after16[i]) << what << " 16-bit #" << i;
    for (std::size_t i = 0; i < written32.size(); ++i) {
      EXPECT_TRUE(same_bits(*written32[i], after32[i])) << what << " fp32 #" << i;
    }
  };
  const int N = 6, C = 8, B = 2, T = 3, NH = 2, V = 5;
  // LayerNorm forward, fused residual forward (the residual in place of a), backward.
  const auto x = values16(N * C), w = values16(C), b = values16(C), dy = values16(N * C);
  auto res = values16(N * C), dx = values16(N * C);
  std::vector<uint16_t> y(x.size(), 0);
  std::vector<float> mean(N), rstd(N), dw(C, 0.5f), db(C, -0.5f);
  both({&y}, {&mean, &rstd}, [&](Backend& k) {
    k.layernorm_forward(out16(y), mean.data(), rstd.data(), in16(x), in16(w), in16(b), N, C);
  }, "layernorm_forward");
  both({&res, &y}, {&mean, &rstd}, [&](Backend& k) {
    k.residual_layernorm_forward(out16(res), out16(y), mean.data(), rstd.data(), in16(res), in16(x), in16(w), in16(b),
                                 N, C);
  }, "residual_layernorm_forward");
  both({&dx}, {&dw, &db}, [&](Backend& k) {
    k.layernorm_backward(out16(dx), dw.data(), db.data(), in16(dy), in16(x), in16(w), mean.data(), rstd.data(), N, C);
  }, "layernorm_backward");
  // GELU and the residual add.
  both({&y}, {}, [&](Backend& k) { k.gelu_forward(out16(y), in16(x), x.size()); }, "gelu_forward");
  both({&dx}, {}, [&](Backend& k) { k.gelu_backward(out16(dx), in16(x), in16(dy), x.size()); }, "gelu_backward");
  // In place (the model's MLP backward): the same bits as into a separate buffer, on both.
  auto dy_in_place = dy;
  both({&dy_in_place}, {}, [&](Backend& k) {
    k.gelu_backward(out16(dy_in_place), in16(x), in16(dy_in_place), x.size());
  }, "gelu_backward in place");
  std::vector<uint16_t> dx_apart(dy.size(), 0);
  widening.gelu_backward(out16(dx_apart), in16(x), in16(dy), x.size());
  auto in_place = dy;
  widening.gelu_backward(out16(in_place), in16(x), in16(in_place), x.size());
  EXPECT_EQ(in_place, dx_apart);
  both({&res}, {}, [&](Backend& k) { k.add(out16(res), in16(res), in16(x), x.size()); }, "add");
  // Attention.
  const auto qkv = values16(B * T * 3 * C), dout = values16(B * T * C);
  auto out = values16(B * T * C), dqkv = values16(B * T * 3 * C);
  std::vector<float> lse(B * NH * T), scratch(plain.attention_scratch_size(B, T, NH));
  both({&out}, {&lse}, [&](Backend& k) {
    k.attention_forward(out16(out), lse.data(), scratch.data(), in16(qkv), B, T, C, NH);
  }, "attention_forward");
  both({&dqkv}, {}, [&](Backend& k) {
    k.attention_backward(out16(dqkv), scratch.data(), in16(dout), in16(qkv), in16(out), lse.data(), B, T, C, NH);
  }, "attention_backward");
  // Embedding, with and without the position table.
  const auto wte = values16(V * C), wpe = values16(T * C);
  const std::vector<int32_t> tokens = {0, 4, 2, 2, 1, 3};
  auto emb = values16(B * T * C);
  std::vector<float> dwte(V * C, 0.25f), dwpe(T * C, 0.0f);
  both({&emb}, {}, [&](Backend& k) {
    k.embedding_forward(out16(emb), tokens.data(), in16(wte), in16(wpe), B, T, C, 0, V);
  }, "embedding_forward");
  both({&emb}, {}, [&](Backend& k) {
    k.embedding_forward(out16(emb), tokens.data(), in16(wte), nullptr, B, T, C, 1, 4);
  }, "embedding_forward without wpe");
  both({}, {&dwte, &dwpe}, [&](Backend& k) {
    k.embedding_backward(dwte.data(), dwpe.data(), in16(dout), tokens.data(), B, T, C, 0, V);
  }, "embedding_backward");
  // Cross-entropy on 16-bit logits, whole and sharded (the gradient over the logits, as Gpt does).
  const int NV = 4, Vr = 7, Vp = 8;
  auto logits = values16(NV * Vp), dlogits = logits;
  const std::vector<int32_t> targets = {0, 6, 3, 5};
  std::vector<float> losses(NV), stats(3 * NV);
  both({}, {&losses}, [&](Backend& k) {
    k.cross_entropy_forward(losses.data(), nullptr, nullptr, in16(logits), targets.data(), NV, Vr, Vp);
  }, "cross_entropy_forward");
  both({&dlogits}, {}, [&](Backend& k) {
    k.cross_entropy_backward(out16(dlogits), in16(dlogits), targets.data(), 0.25f, NV, Vr, Vp);
  }, "cross_entropy_backward");
  dlogits = logits;
  both({}, {&stats}, [&](Backend& k) {
    k.cross_entropy_shard_statistics(stats.data(), in16(logits), targets.data(), NV, Vr, Vp, 0);
  }, "cross_entropy_shard_statistics");
  both({&dlogits}, {}, [&](Backend& k) {
    k.cross_entropy_backward_sharded(out16(dlogits), in16(dlogits), targets.data(), stats.data(), stats.data() + NV,
                                     0.25f, NV, Vr, Vp, 0);
  }, "cross_entropy_backward_sharded");
  EXPECT_EQ(native.calls.cross_entropy, 4);
  EXPECT_EQ(native.calls.layernorm, 3);
  EXPECT_EQ(native.calls.gelu, 3);  // forward, backward, backward in place
  EXPECT_EQ(native.calls.add, 1);
  EXPECT_EQ(native.calls.attention, 2);
  EXPECT_EQ(native.calls.embedding, 3);
  EXPECT_EQ(native.calls.matmul, 0);
  EXPECT_EQ(passing.staging_floats(), 0u);
  EXPECT_GT(widening.staging_floats(), 0u);
  // An fp32 operand (here LayerNorm's weight) sends the call down the widening path.
  const auto w32 = decoded(w, p);
  passing.layernorm_forward(out16(y), mean.data(), rstd.data(), in16(x), w32.data(), in16(b), N, C);
  EXPECT_EQ(native.calls.layernorm, 3);
  EXPECT_EQ(passing.staging_floats(), static_cast<std::size_t>(2 * N * C + C));
}

TEST_P(RoundedStorage, AttentionOn16BitBuffersMatchesRoundedFp32Buffers) {
  const Precision p = GetParam();
  std::mt19937 rng(509);
  cpu::CpuBackend plain(kTestThreads);
  RoundedStorageBackend storage(plain, p);
  const int B = 2, T = 5, C = 4, NH = 2;
  const auto qkv = rounded(random_floats(B * T * 3 * C, rng), p), dout = rounded(random_floats(B * T * C, rng), p);
  const auto qkv16 = encoded(qkv, p), dout16 = encoded(dout, p);
  std::vector<float> scratch(plain.attention_scratch_size(B, T, NH));
  std::vector<float> out(B * T * C), lse(B * NH * T), lse16(lse.size());
  std::vector<uint16_t> out16(out.size());
  storage.attention_forward(out.data(), lse.data(), scratch.data(), qkv.data(), B, T, C, NH);
  storage.attention_forward(ActPtr(out16.data(), p), lse16.data(), scratch.data(), ConstActPtr(qkv16.data(), p), B, T,
                            C, NH);
  EXPECT_TRUE(same_bits(decoded(out16, p), out));
  EXPECT_TRUE(same_bits(lse16, lse));
  auto dqkv = rounded(random_floats(qkv.size(), rng), p);  // stale values: overwritten
  auto dqkv16 = encoded(dqkv, p);
  storage.attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH);
  storage.attention_backward(ActPtr(dqkv16.data(), p), scratch.data(), ConstActPtr(dout16.data(), p),
                             ConstActPtr(qkv16.data(), p), ConstActPtr(out16.data(), p), lse16.data(), B, T, C, NH);
  EXPECT_TRUE(same_bits(decoded(dqkv16, p), dqkv));
  // Staged as an output, not widened and added to: the stale values never reach the result.
  std::vector<uint16_t> dqkv16_fresh(dqkv16.size(), 0);
  storage.attention_backward(ActPtr(dqkv16_fresh.data(), p), scratch.data(), ConstActPtr(dout16.data(), p),
                             ConstActPtr(qkv16.data(), p), ConstActPtr(out16.data(), p), lse16.data(), B, T, C, NH);
  EXPECT_EQ(dqkv16, dqkv16_fresh);
}

TEST_P(RoundedStorage, RefusesActivationsOfTheOtherSixteenBitFormat) {
  const Precision p = GetParam();
  const Precision other = p == Precision::kBf16 ? Precision::kFp16 : Precision::kBf16;
  cpu::CpuBackend plain(kTestThreads);
  RoundedStorageBackend storage(plain, p);
  std::vector<uint16_t> x(4), y(4);
  EXPECT_THROW(storage.gelu_forward(ActPtr(y.data(), p), ConstActPtr(x.data(), other), 4), std::logic_error);
  // The fp32 kernels themselves never take 16-bit buffers.
  EXPECT_THROW(plain.gelu_forward(ActPtr(y.data(), p), ConstActPtr(x.data(), p), 4), std::logic_error);
}

TEST_P(RoundedStorage, CpuNarrowWidenAndZeroOf16BitBuffers) {
  const Precision p = GetParam();
  std::mt19937 rng(521);
  cpu::CpuBackend plain(kTestThreads);
  const auto x = random_floats(1000, rng);
  std::vector<uint16_t> bits(x.size(), 0xffffu);
  plain.narrow(ActPtr(bits.data(), p), x.data(), x.size());
  std::vector<float> back(x.size());
  plain.widen(back.data(), ConstActPtr(bits.data(), p), back.size());
  EXPECT_TRUE(same_bits(back, rounded(x, p)));
  EXPECT_EQ(bits, encoded(x, p));
  plain.fill_zero(ActPtr(bits.data(), p) + 10, 20);  // element offsets count 16-bit elements
  for (std::size_t i = 0; i < bits.size(); ++i) {
    if (i >= 10 && i < 30) {
      EXPECT_EQ(bits[i], 0u) << i;
    } else {
      EXPECT_EQ(bits[i], encode_16bit(x[i], p)) << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Bf16AndFp16, RoundedStorage, ::testing::Values(Precision::kBf16, Precision::kFp16),
                         [](const auto& param_info) { return std::string(precision_name(param_info.param)); });

TEST(RoundedStorageBackendSetup, RefusesFp32AndNamesItself) {
  cpu::CpuBackend plain(kTestThreads);
  EXPECT_THROW(RoundedStorageBackend(plain, Precision::kFp32), std::logic_error);
  RoundedStorageBackend bf16(plain, Precision::kBf16);
  EXPECT_NE(bf16.name().find("bf16 storage on fp32 kernels"), std::string::npos);
}

}  // namespace
}  // namespace trident::kernels::test
