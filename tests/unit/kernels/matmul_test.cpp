// matmul_forward / matmul_backward against a double-precision reference and finite differences.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"         // CpuBackend
#include "kernels/cpu/elementwise.h"         // sum_squares
#include "kernels/cpu/matmul.h"              // matmul_forward, matmul_backward
#include "tests/unit/kernels/kernel_test_util.h"  // random_floats, expect_close, numerical_gradient

namespace trident::kernels::test {
namespace {

// out[n,o] = sum_c inp[n,c] w[o,c] + b[o], in double.
std::vector<double> matmul_reference(const std::vector<double>& inp, const std::vector<double>& w,
                                     const std::vector<double>* bias, int N, int C, int OC) {
  std::vector<double> out(static_cast<std::size_t>(N) * OC);
  for (int n = 0; n < N; n++) {
    for (int o = 0; o < OC; o++) {
      double s = bias ? (*bias)[o] : 0.0;
      for (int c = 0; c < C; c++) s += inp[n * C + c] * w[o * C + c];
      out[n * OC + o] = s;
    }
  }
  return out;
}

struct MatmulCase {
  int N, C, OC;
};

void check_forward(const MatmulCase& s, bool with_bias, double atol, double rtol) {
  std::mt19937 rng(1234);
  cpu::CpuBackend backend(kTestThreads);
  auto inp = random_floats(static_cast<std::size_t>(s.N) * s.C, rng);
  auto w = random_floats(static_cast<std::size_t>(s.OC) * s.C, rng);
  auto b = random_floats(s.OC, rng);
  std::vector<float> out(static_cast<std::size_t>(s.N) * s.OC, 123.0f);  // must be overwritten
  backend.matmul_forward(out.data(), inp.data(), w.data(), with_bias ? b.data() : nullptr, s.N,
                         s.C, s.OC);
  const auto bd = to_double(b);
  const auto want =
      matmul_reference(to_double(inp), to_double(w), with_bias ? &bd : nullptr, s.N, s.C, s.OC);
  expect_close(out, want, atol, rtol, "matmul out");
}

TEST(CpuMatmul, ForwardWithBiasMatchesDoubleReference) {
  // Products of [-1,1] inputs summed over C=20 terms: float rounding is ~C * 6e-8 < 2e-6.
  check_forward({7, 20, 13}, true, 1e-5, 1e-5);
}

TEST(CpuMatmul, ForwardWithoutBiasMatchesDoubleReference) {
  check_forward({7, 20, 13}, false, 1e-5, 1e-5);  // as above
}

TEST(CpuMatmul, ForwardAtShapesThatCrossBlasBlockingMatchesReference) {
  // C=300 terms of size <= 1: accumulated rounding is bounded by ~300 * 6e-8 = 2e-5.
  check_forward({65, 300, 67}, true, 5e-5, 1e-5);
}

// L = sum(out * w_out): the kernel's backward with dout = w_out must equal dL/d(inp, w, b)
// computed by finite differences of the double reference forward.
TEST(CpuMatmul, BackwardMatchesFiniteDifferences) {
  const int N = 7, C = 20, OC = 13;
  std::mt19937 rng(42);
  cpu::CpuBackend backend(kTestThreads);
  auto inp = random_floats(N * C, rng);
  auto w = random_floats(OC * C, rng);
  auto b = random_floats(OC, rng);
  auto dout = random_floats(N * OC, rng);

  std::vector<float> dinp(N * C, 0.0f), dw(OC * C, 0.0f), db(OC, 0.0f);
  backend.matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N,
                          C, OC);

  const auto inp_d = to_double(inp), w_d = to_double(w), b_d = to_double(b);
  auto loss_of_inp = [&](const std::vector<double>& x) {
    return weighted_sum(matmul_reference(x, w_d, &b_d, N, C, OC), dout);
  };
  auto loss_of_w = [&](const std::vector<double>& x) {
    return weighted_sum(matmul_reference(inp_d, x, &b_d, N, C, OC), dout);
  };
  auto loss_of_b = [&](const std::vector<double>& x) {
    return weighted_sum(matmul_reference(inp_d, w_d, &x, N, C, OC), dout);
  };
  // Each gradient is a sum of <= 13 (dinp, dbias) or 7 (dweight) float products of size <= 1;
  // float rounding stays below 1e-6, the finite differences are exact to ~1e-9 (L is linear).
  expect_close(dinp, numerical_gradient(loss_of_inp, inp_d), 1e-5, 1e-5, "dinp");
  expect_close(dw, numerical_gradient(loss_of_w, w_d), 1e-5, 1e-5, "dweight");
  expect_close(db, numerical_gradient(loss_of_b, b_d), 1e-5, 1e-5, "dbias");
}

// The parameter gradients accumulate (micro-batches add up); dinp is overwritten, whatever it
// held (NaN included: a GEMM with beta = 0 must not read it).
TEST(CpuMatmul, BackwardAccumulatesParameterGradientsAndOverwritesDinp) {
  const int N = 7, C = 20, OC = 13;
  std::mt19937 rng(7);
  cpu::CpuBackend backend(kTestThreads);
  auto inp = random_floats(N * C, rng);
  auto w = random_floats(OC * C, rng);
  auto dout = random_floats(N * OC, rng);
  auto dw0 = random_floats(OC * C, rng), db0 = random_floats(OC, rng);

  std::vector<float> dinp(N * C, 0.0f), dw(OC * C, 0.0f), db(OC, 0.0f);
  backend.matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N,
                          C, OC);
  std::vector<float> dinp_stale(N * C, std::numeric_limits<float>::quiet_NaN());
  auto dw_acc = dw0, db_acc = db0;
  backend.matmul_backward(dinp_stale.data(), dw_acc.data(), db_acc.data(), dout.data(), inp.data(),
                          w.data(), N, C, OC);
  auto sum = [](const std::vector<float>& a, const std::vector<float>& b) {
    std::vector<double> s(a.size());
    for (std::size_t i = 0; i < a.size(); i++) s[i] = double(a[i]) + double(b[i]);
    return s;
  };
  // prefill + gradient, with one extra float rounding of an O(1) value.
  expect_close(dw_acc, sum(dw0, dw), 1e-6, 1e-6, "dweight accumulates");
  expect_close(db_acc, sum(db0, db), 1e-6, 1e-6, "dbias accumulates");
  EXPECT_EQ(dinp_stale, dinp) << "dinp is overwritten, bit for bit";
}

TEST(CpuMatmul, BackwardWithNullDinpAndDbiasStillComputesDweight) {
  const int N = 7, C = 20, OC = 13;
  std::mt19937 rng(9);
  cpu::CpuBackend backend(kTestThreads);
  auto inp = random_floats(N * C, rng);
  auto w = random_floats(OC * C, rng);
  auto dout = random_floats(N * OC, rng);
  std::vector<float> dw(OC * C, 0.0f);
  backend.matmul_backward(nullptr, dw.data(), nullptr, dout.data(), inp.data(), w.data(), N, C,
                          OC);
  std::vector<double> want(OC * C, 0.0);
  for (int o = 0; o < OC; o++)
    for (int c = 0; c < C; c++)
      for (int n = 0; n < N; n++) want[o * C + c] += double(dout[n * OC + o]) * inp[n * C + c];
  expect_close(dw, want, 1e-5, 1e-5, "dweight");  // 7 products of size <= 1
}

// The products and the gradient norm's sum have the same bits with 1 thread and with 2 (a
// threaded OpenBLAS sgemm gave 6 to 9% of its outputs other last bits): shapes across the fixed
// tiles' edges (256), with a short last tile in each direction, and the GPT-2 MLP's 768 x 3072.
TEST(CpuMatmul, BitsDoNotDependOnTheThreadCount) {
  struct Run {
    std::vector<float> out, dinp, dw, db;
    double squares = 0.0;
  };
  for (const MatmulCase s : {MatmulCase{300, 70, 530}, MatmulCase{256, 768, 3072}, MatmulCase{513, 257, 255}}) {
    std::mt19937 rng(77);
    const auto inp = random_floats(static_cast<std::size_t>(s.N) * s.C, rng);
    const auto w = random_floats(static_cast<std::size_t>(s.OC) * s.C, rng);
    const auto b = random_floats(s.OC, rng);
    const auto dout = random_floats(static_cast<std::size_t>(s.N) * s.OC, rng);
    auto run = [&](int threads) {
      const cpu::CpuBackend backend(threads);  // sets OpenMP's and OpenBLAS's thread counts
      Run r;
      r.out.assign(static_cast<std::size_t>(s.N) * s.OC, 0.0f);
      r.dinp.assign(inp.size(), 0.0f);
      r.dw.assign(w.size(), 0.5f);  // accumulated into
      r.db.assign(b.size(), 0.5f);
      cpu::matmul_forward(r.out.data(), inp.data(), w.data(), b.data(), s.N, s.C, s.OC);
      cpu::matmul_backward(r.dinp.data(), r.dw.data(), r.db.data(), dout.data(), inp.data(), w.data(), s.N, s.C,
                           s.OC);
      r.squares = cpu::sum_squares(r.out.data(), r.out.size());
      return r;
    };
    const Run one = run(1), two = run(2);
    EXPECT_EQ(one.out, two.out) << s.N << " x " << s.C << " x " << s.OC;
    EXPECT_EQ(one.dinp, two.dinp) << s.N << " x " << s.C << " x " << s.OC;
    EXPECT_EQ(one.dw, two.dw) << s.N << " x " << s.C << " x " << s.OC;
    EXPECT_EQ(one.db, two.db) << s.N << " x " << s.C << " x " << s.OC;
    EXPECT_EQ(one.squares, two.squares) << s.N << " x " << s.C << " x " << s.OC;
  }
  const cpu::CpuBackend restore(kTestThreads);
}

}  // namespace
}  // namespace trident::kernels::test
