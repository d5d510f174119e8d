// layernorm_forward / layernorm_backward against a double reference and finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"              // CpuBackend
#include "tests/unit/kernels/kernel_test_util.h"  // random_floats, expect_close, numerical_gradient

namespace trident::kernels::test {
namespace {

constexpr double kEps = 1e-5;

struct LayerNormReference {
  std::vector<double> out, mean, rstd;
};

LayerNormReference layernorm_reference(const std::vector<double>& x, const std::vector<double>& w,
                                       const std::vector<double>& b, int N, int C) {
  LayerNormReference r{std::vector<double>(x.size()), std::vector<double>(N),
                       std::vector<double>(N)};
  for (int n = 0; n < N; n++) {
    double mu = 0.0;
    for (int c = 0; c < C; c++) mu += x[n * C + c];
    mu /= C;
    double var = 0.0;
    for (int c = 0; c < C; c++) var += (x[n * C + c] - mu) * (x[n * C + c] - mu);
    var /= C;
    const double s = 1.0 / std::sqrt(var + kEps);
    for (int c = 0; c < C; c++) r.out[n * C + c] = (x[n * C + c] - mu) * s * w[c] + b[c];
    r.mean[n] = mu;
    r.rstd[n] = s;
  }
  return r;
}

// Rows with an offset of a few units, so that the mean subtraction matters.
std::vector<float> shifted_rows(int N, int C, std::mt19937& rng) {
  auto x = random_floats(static_cast<std::size_t>(N) * C, rng);
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++) x[n * C + c] += static_cast<float>(n) - 3.0f;
  return x;
}

TEST(CpuLayerNorm, ForwardMatchesDoubleReference) {
  for (const int C : {20, 150}) {  // 150: several channel blocks
    const int N = 7;
    std::mt19937 rng(11);
    cpu::CpuBackend backend(kTestThreads);
    auto x = shifted_rows(N, C, rng);
    auto w = random_floats(C, rng, 0.5f, 1.5f);
    auto b = random_floats(C, rng);
    std::vector<float> out(N * C), mean(N), rstd(N);
    backend.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(),
                              N, C);
    const auto ref = layernorm_reference(to_double(x), to_double(w), to_double(b), N, C);
    // Normalised values are O(1) (rstd ~ 1.7 for uniform rows); float sums over C <= 150 terms
    // keep the relative error near 1e-6.
    expect_close(out, ref.out, 1e-5, 1e-5, "out");
    expect_close(mean, ref.mean, 1e-6, 1e-6, "mean");
    expect_close(rstd, ref.rstd, 1e-6, 1e-5, "rstd");
  }
}

// The fused residual add + LayerNorm is exactly the add followed by the LayerNorm (which the
// test above checks against double), also when the residual overwrites one of its inputs, as the
// model's residual stream does.
TEST(CpuLayerNorm, FusedResidualIsBitIdenticalToAddThenLayerNorm) {
  for (const int C : {20, 150}) {
    const int N = 7;
    std::mt19937 rng(12);
    cpu::CpuBackend backend(kTestThreads);
    const auto a = shifted_rows(N, C, rng), b = random_floats(static_cast<std::size_t>(N) * C, rng);
    const auto w = random_floats(C, rng, 0.5f, 1.5f), bias = random_floats(C, rng);
    std::vector<float> sum(N * C), out(N * C), mean(N), rstd(N);
    backend.add(sum.data(), a.data(), b.data(), sum.size());
    backend.layernorm_forward(out.data(), mean.data(), rstd.data(), sum.data(), w.data(), bias.data(), N, C);

    std::vector<float> residual(N * C, 9.0f), fused_out(N * C, 9.0f), fused_mean(N, 9.0f), fused_rstd(N, 9.0f);
    backend.residual_layernorm_forward(residual.data(), fused_out.data(), fused_mean.data(), fused_rstd.data(),
                                       a.data(), b.data(), w.data(), bias.data(), N, C);
    EXPECT_EQ(residual, sum);
    EXPECT_EQ(fused_out, out);
    EXPECT_EQ(fused_mean, mean);
    EXPECT_EQ(fused_rstd, rstd);

    std::vector<float> in_place = a;  // residual aliasing a
    backend.residual_layernorm_forward(in_place.data(), fused_out.data(), fused_mean.data(), fused_rstd.data(),
                                       in_place.data(), b.data(), w.data(), bias.data(), N, C);
    EXPECT_EQ(in_place, sum);
    EXPECT_EQ(fused_out, out);
  }
}

TEST(CpuLayerNorm, BackwardMatchesFiniteDifferences) {
  const int N = 7, C = 20;
  std::mt19937 rng(12);
  cpu::CpuBackend backend(kTestThreads);
  auto x = shifted_rows(N, C, rng);
  auto w = random_floats(C, rng, 0.5f, 1.5f);
  auto b = random_floats(C, rng);
  auto dout = random_floats(N * C, rng);
  std::vector<float> out(N * C), mean(N), rstd(N);
  backend.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N,
                            C);
  std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
  backend.layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                             mean.data(), rstd.data(), N, C);

  const auto xd = to_double(x), wd = to_double(w), bd = to_double(b);
  auto loss_x = [&](const std::vector<double>& v) {
    return weighted_sum(layernorm_reference(v, wd, bd, N, C).out, dout);
  };
  auto loss_w = [&](const std::vector<double>& v) {
    return weighted_sum(layernorm_reference(xd, v, bd, N, C).out, dout);
  };
  auto loss_b = [&](const std::vector<double>& v) {
    return weighted_sum(layernorm_reference(xd, wd, v, N, C).out, dout);
  };
  // dx is a difference of O(1) terms times rstd ~ 1.7: float cancellation leaves ~1e-6
  // absolute error; dw, db are sums over 7 rows of O(1) products.
  expect_close(dx, numerical_gradient(loss_x, xd), 2e-5, 1e-4, "dinp");
  expect_close(dw, numerical_gradient(loss_w, wd), 1e-5, 1e-5, "dweight");
  expect_close(db, numerical_gradient(loss_b, bd), 1e-5, 1e-5, "dbias");
}

TEST(CpuLayerNorm, BackwardAccumulatesIntoGradients) {
  const int N = 7, C = 150;  // several channel blocks for dweight/dbias
  std::mt19937 rng(13);
  cpu::CpuBackend backend(kTestThreads);
  auto x = shifted_rows(N, C, rng);
  auto w = random_floats(C, rng, 0.5f, 1.5f);
  auto b = random_floats(C, rng);
  auto dout = random_floats(N * C, rng);
  std::vector<float> out(N * C), mean(N), rstd(N);
  backend.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N,
                            C);
  std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
  backend.layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                             mean.data(), rstd.data(), N, C);
  auto dx0 = random_floats(N * C, rng), dw0 = random_floats(C, rng), db0 = random_floats(C, rng);
  auto dx1 = dx0, dw1 = dw0, db1 = db0;
  backend.layernorm_backward(dx1.data(), dw1.data(), db1.data(), dout.data(), x.data(), w.data(),
                             mean.data(), rstd.data(), N, C);
  auto sum = [](const std::vector<float>& a, const std::vector<float>& c) {
    std::vector<double> s(a.size());
    for (std::size_t i = 0; i < a.size(); i++) s[i] = double(a[i]) + double(c[i]);
    return s;
  };
  // One extra float rounding of an O(1) sum.
  expect_close(dx1, sum(dx0, dx), 1e-6, 1e-6, "dinp accumulates");
  expect_close(dw1, sum(dw0, dw), 1e-6, 1e-6, "dweight accumulates");
  expect_close(db1, sum(db0, db), 1e-6, 1e-6, "dbias accumulates");
}

}  // namespace
}  // namespace trident::kernels::test
