// attention_forward / attention_backward: out and the row log-sum-exp against a double
// reference, the gradient against the reference and finite differences, causality,
// accumulation, sharp softmaxes (large |lse|), and sizes that cross the kernel's 64-row causal
// blocks. Every run gets a NaN-filled scratch: its contents are undefined between calls, so the
// backward must rebuild the probabilities from qkv and lse alone.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"              // CpuBackend
#include "tests/unit/kernels/kernel_test_util.h"  // random_floats, expect_close, numerical_gradient

namespace trident::kernels::test {
namespace {

struct Shape {
  int B, T, C, NH;
  std::size_t qkv() const { return static_cast<std::size_t>(B) * T * 3 * C; }
  std::size_t out() const { return static_cast<std::size_t>(B) * T * C; }
  std::size_t rows() const { return static_cast<std::size_t>(B) * NH * T; }  // lse [B,NH,T]
  std::size_t probabilities() const { return rows() * T; }
};

struct AttentionReference {
  std::vector<double> out, lse;
  std::vector<double> probabilities;  // [B,NH,T,T], for the backward reference
};

// Plain causal attention in double, straight from the definition.
AttentionReference attention_reference(const std::vector<double>& qkv, const Shape& s) {
  const int hs = s.C / s.NH;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  AttentionReference r{std::vector<double>(s.out(), 0.0), std::vector<double>(s.rows(), 0.0),
                       std::vector<double>(s.probabilities(), 0.0)};
  for (int b = 0; b < s.B; b++)
    for (int h = 0; h < s.NH; h++)
      for (int t = 0; t < s.T; t++) {
        const double* q = &qkv[(static_cast<std::size_t>(b) * s.T + t) * 3 * s.C + h * hs];
        const std::size_t row = (static_cast<std::size_t>(b) * s.NH + h) * s.T + t;
        double* p = &r.probabilities[row * s.T];
        double mx = -std::numeric_limits<double>::infinity();
        for (int t2 = 0; t2 <= t; t2++) {
          const double* k = &qkv[(static_cast<std::size_t>(b) * s.T + t2) * 3 * s.C + s.C + h * hs];
          double dot = 0.0;
          for (int i = 0; i < hs; i++) dot += q[i] * k[i];
          p[t2] = dot * scale;
          mx = std::max(mx, p[t2]);
        }
        double sum = 0.0;
        for (int t2 = 0; t2 <= t; t2++) sum += (p[t2] = std::exp(p[t2] - mx));
        for (int t2 = 0; t2 <= t; t2++) p[t2] /= sum;
        r.lse[row] = mx + std::log(sum);
        double* o = &r.out[(static_cast<std::size_t>(b) * s.T + t) * s.C + h * hs];
        for (int t2 = 0; t2 <= t; t2++) {
          const double* v =
              &qkv[(static_cast<std::size_t>(b) * s.T + t2) * 3 * s.C + 2 * s.C + h * hs];
          for (int i = 0; i < hs; i++) o[i] += p[t2] * v[i];
        }
      }
  return r;
}

// Gradient of sum(out * dout) w.r.t. qkv, in double, by the chain rule written out loop by loop
// (itself checked against finite differences below).
std::vector<double> attention_backward_reference(const std::vector<double>& qkv,
                                                 const std::vector<float>& dout, const Shape& s) {
  const int hs = s.C / s.NH;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  const auto fwd = attention_reference(qkv, s);
  std::vector<double> dqkv(s.qkv(), 0.0);
  auto at = [&](int b, int t, int part, int h) {
    return (static_cast<std::size_t>(b) * s.T + t) * 3 * s.C + part * s.C + h * hs;
  };
  for (int b = 0; b < s.B; b++)
    for (int h = 0; h < s.NH; h++)
      for (int t = 0; t < s.T; t++) {
        const double* p =
            &fwd.probabilities[((static_cast<std::size_t>(b) * s.NH + h) * s.T + t) * s.T];
        const float* dy = &dout[(static_cast<std::size_t>(b) * s.T + t) * s.C + h * hs];
        std::vector<double> dp(t + 1);
        double dot = 0.0;
        for (int t2 = 0; t2 <= t; t2++) {
          double d = 0.0;
          for (int i = 0; i < hs; i++) {
            d += dy[i] * qkv[at(b, t2, 2, h) + i];
            dqkv[at(b, t2, 2, h) + i] += p[t2] * dy[i];
          }
          dp[t2] = d;
          dot += p[t2] * d;
        }
        for (int t2 = 0; t2 <= t; t2++) {
          const double ds = p[t2] * (dp[t2] - dot) * scale;
          for (int i = 0; i < hs; i++) {
            dqkv[at(b, t, 0, h) + i] += ds * qkv[at(b, t2, 1, h) + i];
            dqkv[at(b, t2, 1, h) + i] += ds * qkv[at(b, t, 0, h) + i];
          }
        }
      }
  return dqkv;
}

struct KernelResult {
  std::vector<float> out, lse;
};

// A scratch of the size the backend asks for, NaN-filled: no result may depend on its contents.
std::vector<float> nan_scratch(const cpu::CpuBackend& backend, const Shape& s) {
  return std::vector<float>(backend.attention_scratch_size(s.B, s.T, s.NH),
                            std::numeric_limits<float>::quiet_NaN());
}

KernelResult run_forward(cpu::CpuBackend& backend, const std::vector<float>& qkv, const Shape& s) {
  // NaN prefill: every element of out and lse must be written.
  KernelResult r{std::vector<float>(s.out(), std::numeric_limits<float>::quiet_NaN()),
                 std::vector<float>(s.rows(), std::numeric_limits<float>::quiet_NaN())};
  auto scratch = nan_scratch(backend, s);
  backend.attention_forward(r.out.data(), r.lse.data(), scratch.data(), qkv.data(), s.B, s.T, s.C,
                            s.NH);
  return r;
}

std::vector<float> run_backward(cpu::CpuBackend& backend, const std::vector<float>& qkv,
                                const KernelResult& fwd, const std::vector<float>& dout,
                                std::vector<float> dqkv, const Shape& s) {
  // A fresh scratch, not the forward's: backward recomputes P instead of finding it there.
  auto scratch = nan_scratch(backend, s);
  backend.attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), fwd.out.data(),
                             fwd.lse.data(), s.B, s.T, s.C, s.NH);
  return dqkv;
}

std::vector<float> fresh_gradient(cpu::CpuBackend& backend, const std::vector<float>& qkv,
                                  const std::vector<float>& dout, const Shape& s) {
  return run_backward(backend, qkv, run_forward(backend, qkv, s), dout,
                      std::vector<float>(s.qkv(), 0.0f), s);
}

// Seeded inputs of one test: qkv uniform in [-qkv_range, qkv_range), dout in [-1, 1).
struct Inputs {
  std::mt19937 rng;  // continues after qkv and dout, for a test's further draws
  std::vector<float> qkv, dout;
};

Inputs random_inputs(const Shape& s, unsigned seed, float qkv_range = 1.5f) {
  Inputs in{std::mt19937(seed), {}, {}};
  in.qkv = random_floats(s.qkv(), in.rng, -qkv_range, qkv_range);
  in.dout = random_floats(s.out(), in.rng);
  return in;
}

void check_forward(const Shape& s, unsigned seed) {
  std::mt19937 rng(seed);
  cpu::CpuBackend backend(kTestThreads);
  auto qkv = random_floats(s.qkv(), rng, -1.5f, 1.5f);
  const auto got = run_forward(backend, qkv, s);
  const auto want = attention_reference(to_double(qkv), s);
  // out averages O(1) values with float probabilities (relative error ~1e-6).
  expect_close(got.out, want.out, 2e-6, 1e-5, "out");
  // lse = max + log(sum): the max carries the score GEMM's rounding (hs products of O(1)
  // values, ~1e-7 each) and the float log and sum a few ulps of |lse| < 10 here: ~1e-6
  // (measured: 4.6e-7 at lse = 5.2).
  expect_close(got.lse, want.lse, 2e-6, 2e-6, "lse");
}

TEST(CpuAttention, ForwardMatchesDoubleReference) { check_forward({2, 5, 20, 2}, 31); }

TEST(CpuAttention, ForwardAcrossCausalBlocksMatchesDoubleReference) {
  check_forward({2, 150, 32, 2}, 32);  // T=150: blocks of 64, 64 and a partial 22
}

TEST(CpuAttention, BackwardMatchesFiniteDifferences) {
  const Shape s{2, 5, 20, 2};
  const auto [rng, qkv, dout] = random_inputs(s, 33);
  cpu::CpuBackend backend(kTestThreads);
  const auto got = fresh_gradient(backend, qkv, dout, s);
  const auto qkv_d = to_double(qkv);
  auto loss = [&](const std::vector<double>& x) {
    return weighted_sum(attention_reference(x, s).out, dout);
  };
  const auto numeric = numerical_gradient(loss, qkv_d);
  // Gradients are sums of <= T*hs O(1) float products through a softmax: ~1e-6 rounding.
  expect_close(got, numeric, 1e-5, 1e-4, "dqkv vs finite differences");
  // The reference backward used at larger sizes below must agree too (double vs FD: ~1e-9).
  const auto reference = attention_backward_reference(qkv_d, dout, s);
  std::vector<float> reference_f(reference.begin(), reference.end());
  expect_close(reference_f, numeric, 1e-6, 1e-6, "reference dqkv vs finite differences");
}

TEST(CpuAttention, BackwardAcrossCausalBlocksMatchesReference) {
  const Shape s{2, 150, 32, 2};
  const auto [rng, qkv, dout] = random_inputs(s, 34);
  cpu::CpuBackend backend(kTestThreads);
  const auto got = fresh_gradient(backend, qkv, dout, s);
  // Sums over up to T=150 keys of O(1) terms: float rounding ~150 * 6e-8 * O(1) < 2e-5.
  expect_close(got, attention_backward_reference(to_double(qkv), dout, s), 3e-5, 1e-4, "dqkv");
}

// Scores up to ~25 in magnitude (qkv in [-4, 4], hs = 16): nearly one-hot rows and |lse| up to
// ~25, where the float rounding of lse (half an ulp of |lse|, ~1e-6) moves every recomputed
// probability of the row by that much relative. Forward and backward must still match the
// double reference.
TEST(CpuAttention, SharpSoftmaxMatchesReference) {
  const Shape s{1, 150, 32, 2};
  const auto [rng, qkv, dout] = random_inputs(s, 38, 4.0f);
  cpu::CpuBackend backend(kTestThreads);
  const auto fwd = run_forward(backend, qkv, s);
  const auto want = attention_reference(to_double(qkv), s);
  // out: convex combinations of |v| < 4; lse: the GEMM's rounding of scores ~25 (16 products
  // up to 16 each, a few 1e-6 absolute) dominates. Measured: 3.6e-6 (out), 2.7e-6 (lse at 16.8).
  expect_close(fwd.out, want.out, 1e-5, 1e-5, "out");
  expect_close(fwd.lse, want.lse, 1e-5, 2e-6, "lse");
  const auto got = run_backward(backend, qkv, fwd, dout, std::vector<float>(s.qkv(), 0.0f), s);
  // Gradient terms of size |q||k| up to 16 times probabilities off by ~1e-6 relative, over up to
  // 150 keys: a few 1e-6 to 1e-5 (measured: 7.5e-6), so 1e-4 keeps a margin of ten while a
  // wrong lse row or a missing rescale moves whole terms.
  expect_close(got, attention_backward_reference(to_double(qkv), dout, s), 1e-4, 1e-4, "dqkv");
}

// dqkv is overwritten, on one causal block and across blocks with a partial last one (T = 150):
// from a random start and from NaN (a GEMM with beta = 0 must not read it) the result is the
// gradient computed into zeros, bit for bit.
void check_overwrites(const Shape& s, unsigned seed) {
  auto [rng, qkv, dout] = random_inputs(s, seed);
  cpu::CpuBackend backend(kTestThreads);
  const auto fwd = run_forward(backend, qkv, s);
  const auto fresh = run_backward(backend, qkv, fwd, dout, std::vector<float>(s.qkv(), 0.0f), s);
  const auto stale = run_backward(backend, qkv, fwd, dout, random_floats(s.qkv(), rng), s);
  const auto from_nan =
      run_backward(backend, qkv, fwd, dout, std::vector<float>(s.qkv(), std::numeric_limits<float>::quiet_NaN()), s);
  EXPECT_EQ(stale, fresh) << "old dqkv values leaked into the gradient";
  EXPECT_EQ(from_nan, fresh) << "a dqkv element was read or left unwritten";
}

TEST(CpuAttention, BackwardOverwritesDqkv) { check_overwrites({2, 5, 20, 2}, 35); }

TEST(CpuAttention, BackwardAcrossCausalBlocksOverwritesDqkv) { check_overwrites({2, 150, 32, 2}, 39); }

TEST(CpuAttention, FutureTokensDoNotAffectEarlierOutputs) {
  const Shape s{1, 150, 32, 2};
  const int last_kept = 70;  // inside the second causal block
  std::mt19937 rng(36);
  cpu::CpuBackend backend(kTestThreads);
  auto qkv = random_floats(s.qkv(), rng, -1.5f, 1.5f);
  auto changed = qkv;
  for (int t = last_kept + 1; t < s.T; t++)
    for (int j = 0; j < 3 * s.C; j++) changed[static_cast<std::size_t>(t) * 3 * s.C + j] += 5.0f;
  const auto a = run_forward(backend, qkv, s);
  const auto b = run_forward(backend, changed, s);
  // Exact: future q/k/v only ever meet an exact zero probability, and each GEMM element's sum
  // over the head dimension does not depend on the other columns.
  for (int t = 0; t <= last_kept; t++)
    for (int c = 0; c < s.C; c++)
      ASSERT_EQ(a.out[static_cast<std::size_t>(t) * s.C + c],
                b.out[static_cast<std::size_t>(t) * s.C + c])
          << "out at t=" << t << " c=" << c << " changed when only later tokens changed";
  for (int h = 0; h < s.NH; h++)
    for (int t = 0; t <= last_kept; t++)
      ASSERT_EQ(a.lse[static_cast<std::size_t>(h) * s.T + t], b.lse[static_cast<std::size_t>(h) * s.T + t])
          << "lse at h=" << h << " t=" << t << " changed when only later tokens changed";
  // And the change is visible later, so the comparison above is not vacuous.
  EXPECT_NE(a.out[static_cast<std::size_t>(s.T - 1) * s.C], b.out[static_cast<std::size_t>(s.T - 1) * s.C]);
}

TEST(CpuAttention, GradientOfEarlyOutputsDoesNotReachFutureTokens) {
  const Shape s{1, 150, 32, 2};
  const int last_with_grad = 70;
  auto [rng, qkv, dout] = random_inputs(s, 37);
  cpu::CpuBackend backend(kTestThreads);
  for (std::size_t i = static_cast<std::size_t>(last_with_grad + 1) * s.C; i < dout.size(); i++)
    dout[i] = 0.0f;
  const auto dqkv = fresh_gradient(backend, qkv, dout, s);
  // Exact zero: outputs at t <= 70 depend on no q, k or v of a later token.
  for (int t = last_with_grad + 1; t < s.T; t++)
    for (int j = 0; j < 3 * s.C; j++)
      ASSERT_EQ(dqkv[static_cast<std::size_t>(t) * 3 * s.C + j], 0.0f)
          << "gradient reached future token t=" << t << " channel " << j;
  double earlier = 0.0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(last_with_grad + 1) * 3 * s.C; i++)
    earlier += std::abs(dqkv[i]);
  EXPECT_GT(earlier, 1.0);  // while earlier tokens do get gradient
}

}  // namespace
}  // namespace trident::kernels::test
