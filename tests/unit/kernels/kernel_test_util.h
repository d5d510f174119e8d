// Helpers shared by the CPU kernel tests: seeded random data, element-wise comparison against a
// double-precision reference with a stated tolerance, and central finite differences.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/precision.h"  // Precision, encode_16bit, decode_16bit

namespace trident::kernels::test {

inline constexpr int kTestThreads = 2;  // two threads, so the parallel paths really split work

inline std::vector<float> random_floats(std::size_t n, std::mt19937& rng, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Asserts |actual - expected| <= atol + rtol * |expected| for every element, and reports the
// number of violations and the worst one (index, values) so a failure says where.
inline void expect_close(const std::vector<float>& actual, const std::vector<double>& expected,
                         double atol, double rtol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  std::size_t bad = 0;
  std::size_t worst = 0;
  double worst_excess = -std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < actual.size(); i++) {
    const double a = static_cast<double>(actual[i]);
    const double limit = atol + rtol * std::abs(expected[i]);
    const double err = std::abs(a - expected[i]);
    const double excess = std::isnan(err) ? std::numeric_limits<double>::infinity() : err - limit;
    if (!(err <= limit)) bad++;
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << actual.size()
                     << " elements out of tolerance; worst at [" << worst
                     << "]: got " << actual[worst] << ", want " << expected[worst]
                     << " (atol " << atol << ", rtol " << rtol << ")";
}

// d f / d x[i] by central differences on a double-precision function. h = 1e-6 keeps the
// truncation error (~h^2 f''') and the rounding error (~1e-16 |f| / h) both below 1e-9 for the
// O(1) functions the tests build, far below the float tolerances they check against.
inline double central_difference(const std::function<double(const std::vector<double>&)>& f,
                                 std::vector<double>& x, std::size_t i, double h = 1e-6) {
  const double saved = x[i];
  x[i] = saved + h;
  const double up = f(x);
  x[i] = saved - h;
  const double down = f(x);
  x[i] = saved;
  return (up - down) / (2.0 * h);
}

// The full gradient of f at x by central differences.
inline std::vector<double> numerical_gradient(
    const std::function<double(const std::vector<double>&)>& f, std::vector<double> x) {
  std::vector<double> grad(x.size());
  for (std::size_t i = 0; i < x.size(); i++) grad[i] = central_difference(f, x, i);
  return grad;
}

// sum_i a[i] * w[i]: the scalar loss L = sum(out * w) whose gradient w.r.t. out is w.
inline double weighted_sum(const std::vector<double>& a, const std::vector<float>& w) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); i++) s += a[i] * static_cast<double>(w[i]);
  return s;
}

// The 16-bit patterns of v in p (bf16 or fp16, rounded to nearest even), and back exactly.
inline std::vector<uint16_t> encoded(const std::vector<float>& v, Precision p) {
  std::vector<uint16_t> bits(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) bits[i] = encode_16bit(v[i], p);
  return bits;
}

inline std::vector<float> decoded(const std::vector<uint16_t>& bits, Precision p) {
  std::vector<float> v(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) v[i] = decode_16bit(bits[i], p);
  return v;
}

}  // namespace trident::kernels::test
