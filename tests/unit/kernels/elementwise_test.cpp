// fill_zero, add, accumulate, scale, sum_squares against double references.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"              // CpuBackend
#include "tests/unit/kernels/kernel_test_util.h"  // random_floats, expect_close

namespace trident::kernels::test {
namespace {

constexpr std::size_t kN = 1001;  // odd: not a multiple of any vector width or thread count

TEST(CpuElementwise, AddMatchesReferenceAndMayAliasAnInput) {
  std::mt19937 rng(61);
  cpu::CpuBackend backend(kTestThreads);
  const auto a = random_floats(kN, rng), b = random_floats(kN, rng);
  std::vector<double> want(kN);
  for (std::size_t i = 0; i < kN; i++) want[i] = double(a[i]) + double(b[i]);
  std::vector<float> out(kN);
  backend.add(out.data(), a.data(), b.data(), kN);
  expect_close(out, want, 0.0, 1.2e-7, "a + b");  // one correctly rounded addition
  auto in_place = a;
  backend.add(in_place.data(), in_place.data(), b.data(), kN);
  expect_close(in_place, want, 0.0, 1.2e-7, "a += b via add");
}

TEST(CpuElementwise, AccumulateAddsIntoDestination) {
  std::mt19937 rng(62);
  cpu::CpuBackend backend(kTestThreads);
  auto dst = random_floats(kN, rng);
  const auto src = random_floats(kN, rng);
  std::vector<double> want(kN);
  for (std::size_t i = 0; i < kN; i++) want[i] = double(dst[i]) + double(src[i]);
  backend.accumulate(dst.data(), src.data(), kN);
  expect_close(dst, want, 0.0, 1.2e-7, "dst += src");  // one correctly rounded addition
}

TEST(CpuElementwise, ScaleMultipliesInPlace) {
  std::mt19937 rng(63);
  cpu::CpuBackend backend(kTestThreads);
  auto x = random_floats(kN, rng);
  std::vector<double> want(kN);
  for (std::size_t i = 0; i < kN; i++) want[i] = double(x[i]) * double(0.3f);
  backend.scale(x.data(), 0.3f, kN);
  expect_close(x, want, 0.0, 1.2e-7, "x * 0.3");  // one correctly rounded product
}

TEST(CpuElementwise, SumSquaresIsAccumulatedInDouble) {
  cpu::CpuBackend backend(kTestThreads);
  // One big element then a million small ones: 1e8 + 1e6 * 1e-4 = 1e8 + 100. A float
  // accumulator (ulp 8 at 1e8) drops every small term and would be off by 100.
  std::vector<float> x(1'000'001, 1e-2f);
  x[0] = 1e4f;
  const double small = double(1e-2f) * double(1e-2f);
  const double want = 1e8 + 1e6 * small;
  // Double accumulation of 1e6 terms: relative error ~1e-16 * 1e6 = 1e-10, i.e. 1e-2 absolute.
  EXPECT_NEAR(backend.sum_squares(x.data(), x.size()), want, 1e-2);

  std::mt19937 rng(64);
  const auto y = random_floats(kN, rng);
  double want_y = 0.0;
  for (const float v : y) want_y += double(v) * double(v);
  EXPECT_NEAR(backend.sum_squares(y.data(), kN), want_y, 1e-12 * want_y);
  EXPECT_EQ(backend.sum_squares(y.data(), 0), 0.0);
}

// The ranges' sums (Backend's default: sum_squares per range), added in order from 0: the bits
// of the loop the trainer ran before, gaps and empty ranges included.
TEST(CpuElementwise, SumSquaresOfRangesAddsEachRangeInOrder) {
  cpu::CpuBackend backend(kTestThreads);
  std::mt19937 rng(65);
  const auto x = random_floats(kN, rng);
  const ElementRange ranges[] = {{0, 100}, {150, 0}, {300, kN - 700}, {kN - 5, 5}};
  double want = 0.0;
  for (const ElementRange& r : ranges) want += backend.sum_squares(x.data() + r.offset, r.count);
  EXPECT_EQ(backend.sum_squares_of_ranges(x.data(), ranges, 4), want);
  double skipped = 0.0;  // the gaps are left out
  for (const ElementRange& r : {ElementRange{100, 50}, ElementRange{150, 150}}) {
    skipped += backend.sum_squares(x.data() + r.offset, r.count);
  }
  EXPECT_GT(skipped, 0.0);
  EXPECT_LT(backend.sum_squares_of_ranges(x.data(), ranges, 4), backend.sum_squares(x.data(), kN));
  EXPECT_EQ(backend.sum_squares_of_ranges(x.data(), ranges, 0), 0.0);
}

// The trainer's divergence check (src/train/trainer.cpp) reads an inf or NaN gradient from the
// norm's sum of squares: one such element anywhere must make the sum non-finite, in the
// threads' parts and in the ranges.
TEST(CpuElementwise, SumSquaresOfANonFiniteElementIsNotFinite) {
  cpu::CpuBackend backend(kTestThreads);
  constexpr std::size_t kLong = std::size_t{1} << 20;  // past the parallel threshold: every thread's part
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()}) {
    for (const std::size_t at : {std::size_t{0}, std::size_t{12345}, kLong / 2 + 3, kLong - 1}) {
      SCOPED_TRACE("value " + std::to_string(bad) + " at " + std::to_string(at));
      std::vector<float> x(kLong, 0.5f);
      x[at] = bad;
      EXPECT_FALSE(std::isfinite(backend.sum_squares(x.data(), kLong)));
      const ElementRange ranges[] = {{0, at}, {at, kLong - at}};
      EXPECT_FALSE(std::isfinite(backend.sum_squares_of_ranges(x.data(), ranges, 2)));
    }
  }
}

TEST(CpuElementwise, FillZeroClearsExactlyTheRangeOnEveryThreadSplit) {
  cpu::CpuBackend backend(kTestThreads);
  // Sizes around the parallel threshold (2^18 floats) and odd ones, so that the per-thread
  // chunks do not divide evenly; one guard value either side must survive.
  for (const std::size_t n : {std::size_t{1}, std::size_t{1001}, (std::size_t{1} << 18) - 1,
                              std::size_t{1} << 18, (std::size_t{1} << 18) + 17,
                              std::size_t{1'000'003}}) {
    std::vector<float> x(n + 2, 7.0f);
    backend.fill_zero(x.data() + 1, n);
    EXPECT_EQ(x.front(), 7.0f) << n;
    EXPECT_EQ(x.back(), 7.0f) << n;
    std::size_t nonzero = 0;
    for (std::size_t i = 1; i <= n; i++) nonzero += x[i] != 0.0f;
    EXPECT_EQ(nonzero, 0u) << n;
  }
}

}  // namespace
}  // namespace trident::kernels::test
