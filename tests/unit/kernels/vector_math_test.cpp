// exp_approx (the vectorisable exponential behind GELU and the softmaxes) against std::exp.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/vector_math.h"  // exp_approx

namespace trident::kernels::test {
namespace {

using cpu::exp_approx;

TEST(CpuVectorMath, ExpApproxIsWithinFewUlpOverItsRange) {
  // A dense sweep of [-87, 88]: relative error of a Cephes-style expf is <= 2 ulp (2.4e-7);
  // 3e-7 leaves room for the double reference's own rounding to float.
  double worst = 0.0;
  float worst_x = 0.0f;
  for (int i = 0; i <= 175'000; i++) {
    const float x = -87.0f + 0.001f * static_cast<float>(i);
    const double want = std::exp(static_cast<double>(x));
    const double rel = std::abs(static_cast<double>(exp_approx(x)) - want) / want;
    if (rel > worst) {
      worst = rel;
      worst_x = x;
    }
  }
  EXPECT_LT(worst, 3e-7) << "at x = " << worst_x;
  EXPECT_EQ(exp_approx(0.0f), 1.0f);
}

TEST(CpuVectorMath, ExpApproxClampsOutOfRangeInputsToFiniteValues) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const float x : {-88.0f, -1000.0f, -1e30f, -inf}) {
    const float y = exp_approx(x);
    EXPECT_GT(y, 0.0f) << x;
    EXPECT_LT(y, 2e-38f) << x;  // exp(-87.3) ~ 1.2e-38: negligible next to any softmax sum
  }
  for (const float x : {89.0f, 1000.0f, 1e30f, inf}) {
    const float y = exp_approx(x);
    EXPECT_TRUE(std::isfinite(y)) << x;
    EXPECT_GT(y, 1e38f) << x;
  }
}

TEST(CpuVectorMath, ExpApproxGivesNanForNanAsExpfDoes) {
  // Both signs and a signalling pattern: the clamp once took these for -87.3 or 88.3.
  for (const std::uint32_t bits : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFBFFFFFu}) {
    const float x = std::bit_cast<float>(bits);
    EXPECT_TRUE(std::isnan(exp_approx(x))) << std::hex << bits;
  }
}

}  // namespace
}  // namespace trident::kernels::test

namespace trident::kernels::test {
namespace {

TEST(CpuVectorMath, MaxOfFindsTheMaximumAtAnyPositionAndLength) {
  // Every length 1..40 (below, at and past the 16 lanes) and every position of the maximum.
  for (int n = 1; n <= 40; n++)
    for (int at = 0; at < n; at++) {
      std::vector<float> x(n);
      for (int i = 0; i < n; i++) x[i] = -static_cast<float>((i * 7) % 13) - 1.0f;
      x[at] = 0.5f;
      ASSERT_EQ(cpu::max_of(x.data(), n), 0.5f) << "n=" << n << " at=" << at;
    }
}

}  // namespace
}  // namespace trident::kernels::test
