// cross_entropy_forward / cross_entropy_backward over a padded vocabulary (V=11, Vp=16).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"              // CpuBackend
#include "tests/unit/kernels/kernel_test_util.h"  // random_floats, expect_close, numerical_gradient

namespace trident::kernels::test {
namespace {

constexpr int kN = 7, kV = 11, kVp = 16;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// losses[n] = log(sum_{v<V} exp(l_v)) - l_target, in double (shifted by the max for range).
std::vector<double> cross_entropy_reference(const std::vector<double>& logits,
                                            const std::vector<int32_t>& targets) {
  std::vector<double> losses(kN);
  for (int n = 0; n < kN; n++) {
    const double* row = &logits[static_cast<std::size_t>(n) * kVp];
    double mx = row[0];
    for (int v = 1; v < kV; v++) mx = std::max(mx, row[v]);
    double sum = 0.0;
    for (int v = 0; v < kV; v++) sum += std::exp(row[v] - mx);
    losses[n] = std::log(sum) + mx - row[targets[n]];
  }
  return losses;
}

// Logits in [-3,3], padded columns NaN (any use of them would poison the row), one row shifted
// by +1000 (a naive exp would overflow) and targets covering the first and last real column.
struct Problem {
  std::vector<float> logits;
  std::vector<int32_t> targets;
};

Problem make_problem(unsigned seed) {
  std::mt19937 rng(seed);
  Problem p{random_floats(static_cast<std::size_t>(kN) * kVp, rng, -3.0f, 3.0f),
            std::vector<int32_t>(kN)};
  for (int n = 0; n < kN; n++)
    for (int v = kV; v < kVp; v++) p.logits[static_cast<std::size_t>(n) * kVp + v] = kNaN;
  for (int v = 0; v < kV; v++) p.logits[2 * kVp + v] += 1000.0f;
  std::uniform_int_distribution<int32_t> target(0, kV - 1);
  for (auto& t : p.targets) t = target(rng);
  p.targets[0] = 0;
  p.targets[1] = kV - 1;
  return p;
}

TEST(CpuCrossEntropy, ForwardMatchesDoubleReferenceAndIgnoresPadding) {
  const auto p = make_problem(41);
  cpu::CpuBackend backend(kTestThreads);
  std::vector<float> losses(kN, kNaN);
  backend.cross_entropy_forward(losses.data(), p.logits.data(), p.targets.data(), kN, kV, kVp);
  // Losses are O(1-10); the row at +1000 loses absolute precision in its float logits only at
  // the 6e-5 level (ulp of 1000), so its loss is checked to 1e-4.
  expect_close(losses, cross_entropy_reference(to_double(p.logits), p.targets), 1e-4, 1e-5,
               "losses");
}

TEST(CpuCrossEntropy, BackwardMatchesFiniteDifferencesAndZeroesPadding) {
  const auto p = make_problem(42);
  const float dloss = 0.37f;
  cpu::CpuBackend backend(kTestThreads);
  std::vector<float> dlogits(p.logits.size(), kNaN);  // overwritten, never accumulated into
  backend.cross_entropy_backward(dlogits.data(), p.logits.data(), p.targets.data(), dloss, kN, kV,
                                 kVp);
  // L = dloss * sum_n losses[n]; the padded columns are not inputs of L: gradient exactly 0.
  auto logits_d = to_double(p.logits);
  for (int n = 0; n < kN; n++)
    for (int v = kV; v < kVp; v++) logits_d[static_cast<std::size_t>(n) * kVp + v] = 0.0;
  auto loss = [&](const std::vector<double>& x) {
    double total = 0.0;
    for (const double l : cross_entropy_reference(x, p.targets)) total += l;
    return static_cast<double>(dloss) * total;
  };
  const auto numeric = numerical_gradient(loss, logits_d);
  // Probabilities times 0.37 from float exp: ~1e-7 absolute.
  expect_close(dlogits, numeric, 1e-6, 1e-5, "dlogits");
  for (int n = 0; n < kN; n++)
    for (int v = kV; v < kVp; v++)
      EXPECT_EQ(dlogits[static_cast<std::size_t>(n) * kVp + v], 0.0f)
          << "padded column " << v << " of row " << n;
}

TEST(CpuCrossEntropy, BackwardInPlaceEqualsOutOfPlace) {
  const auto p = make_problem(43);
  const float dloss = 1.0f / kN;
  cpu::CpuBackend backend(kTestThreads);
  std::vector<float> separate(p.logits.size(), kNaN);
  backend.cross_entropy_backward(separate.data(), p.logits.data(), p.targets.data(), dloss, kN,
                                 kV, kVp);
  auto in_place = p.logits;
  backend.cross_entropy_backward(in_place.data(), in_place.data(), p.targets.data(), dloss, kN, kV,
                                 kVp);
  // Bitwise: the same arithmetic, and every logit is read before its slot is overwritten.
  for (std::size_t i = 0; i < separate.size(); i++)
    ASSERT_EQ(in_place[i], separate[i]) << "element " << i << " differs when dlogits == logits";
}

}  // namespace
}  // namespace trident::kernels::test
