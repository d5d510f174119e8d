// gelu_forward / gelu_backward against the double tanh-GELU and finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"              // CpuBackend
#include "tests/unit/kernels/kernel_test_util.h"  // random_floats, expect_close, central_difference

namespace trident::kernels::test {
namespace {

double gelu_reference(double x) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

TEST(CpuGelu, ForwardMatchesDoubleReference) {
  std::mt19937 rng(21);
  cpu::CpuBackend backend(kTestThreads);
  const std::size_t n = 1001;
  auto x = random_floats(n, rng, -6.0f, 6.0f);  // both saturated tails and the curved middle
  std::vector<float> out(n);
  backend.gelu_forward(out.data(), x.data(), n);
  std::vector<double> want(n);
  for (std::size_t i = 0; i < n; i++) want[i] = gelu_reference(x[i]);
  // A handful of float operations on values <= 6: a few ulps, ~1e-6 absolute.
  expect_close(out, want, 2e-6, 1e-6, "gelu");
}

TEST(CpuGelu, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(22);
  cpu::CpuBackend backend(kTestThreads);
  const std::size_t n = 1001;
  auto x = random_floats(n, rng, -6.0f, 6.0f);
  auto dout = random_floats(n, rng);
  std::vector<float> dx(n, 0.0f);
  backend.gelu_backward(dx.data(), x.data(), dout.data(), n);
  // Elementwise, so dL/dx_i = gelu'(x_i) dout_i with gelu' by central differences in double.
  std::vector<double> want(n);
  for (std::size_t i = 0; i < n; i++) {
    std::vector<double> xi{x[i]};
    auto f = [](const std::vector<double>& v) { return gelu_reference(v[0]); };
    want[i] = central_difference(f, xi, 0) * dout[i];
  }
  // gelu' is O(1) with float rounding of a few ulps in its ~10 operations.
  expect_close(dx, want, 2e-6, 1e-5, "dinp");
}

// dinp is overwritten whatever it held, and may be dout itself (the model runs it in place).
TEST(CpuGelu, BackwardOverwritesAndRunsInPlace) {
  std::mt19937 rng(23);
  cpu::CpuBackend backend(kTestThreads);
  const std::size_t n = 257;
  auto x = random_floats(n, rng, -4.0f, 4.0f);
  auto dout = random_floats(n, rng);
  std::vector<float> fresh(n, 0.0f);
  backend.gelu_backward(fresh.data(), x.data(), dout.data(), n);
  std::vector<float> stale(n, std::numeric_limits<float>::quiet_NaN());
  backend.gelu_backward(stale.data(), x.data(), dout.data(), n);
  EXPECT_EQ(stale, fresh);
  auto in_place = dout;
  backend.gelu_backward(in_place.data(), x.data(), in_place.data(), n);
  EXPECT_EQ(in_place, fresh);
}

}  // namespace
}  // namespace trident::kernels::test
