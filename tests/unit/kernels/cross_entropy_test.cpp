// cross_entropy_forward / cross_entropy_backward over a padded vocabulary (V=11, Vp=16), and the
// vocabulary-parallel pieces (shard statistics, their combination, sharded backward) with
// tp = 1..4 shards simulated in-process, the all-gather done by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
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
  backend.cross_entropy_forward(losses.data(), nullptr, nullptr, p.logits.data(), p.targets.data(), kN, kV, kVp);
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

// A NaN or +inf logit anywhere in a row (not only its first column, whatever its sign) makes
// that row's loss and gradient non-finite, as the GPU's expf does: the CPU twin once gave a
// finite loss for a NaN logit (its exponential clamped the NaN into range), hiding a diverged
// step from the loss and from the comparison with the GPU.
TEST(CpuCrossEntropy, NonFiniteLogitMakesItsRowNonFinite) {
  const float inf = std::numeric_limits<float>::infinity();
  cpu::CpuBackend backend(kTestThreads);
  for (const float bad : {kNaN, -kNaN, inf}) {
    auto p = make_problem(44);
    const int row = 3, column = (p.targets[row] + 5) % kV;  // not the target column
    p.logits[row * kVp + column] = bad;
    std::vector<float> losses(kN, 0.0f), dlogits(p.logits.size(), 0.0f);
    backend.cross_entropy_forward(losses.data(), nullptr, nullptr, p.logits.data(), p.targets.data(), kN, kV, kVp);
    backend.cross_entropy_backward(dlogits.data(), p.logits.data(), p.targets.data(), 1.0f, kN, kV, kVp);
    for (int n = 0; n < kN; n++) EXPECT_EQ(std::isfinite(losses[n]), n != row) << "row " << n << ", logit " << bad;
    bool row_finite = true;
    for (int v = 0; v < kV; v++) row_finite = row_finite && std::isfinite(dlogits[row * kVp + v]);
    EXPECT_FALSE(row_finite) << "gradient of the row with logit " << bad;
  }
}

// --- vocabulary-parallel (sharded) cross-entropy ------------------------------------------------

// A [kN, Vp] problem, Vp = tp * Vp_local: logits in [-3,3], padded columns V..Vp NaN, row 2
// shifted by +1000, targets covering the first and last real column and both sides of every
// shard boundary.
Problem make_sharded_problem(unsigned seed, int V, int Vp, int Vp_local) {
  std::mt19937 rng(seed);
  const std::size_t width = static_cast<std::size_t>(Vp);
  Problem p{random_floats(kN * width, rng, -3.0f, 3.0f), std::vector<int32_t>(kN)};
  for (std::size_t n = 0; n < kN; n++)
    for (int v = V; v < Vp; v++) p.logits[n * width + static_cast<std::size_t>(v)] = kNaN;
  for (int v = 0; v < V; v++) p.logits[2 * width + static_cast<std::size_t>(v)] += 1000.0f;
  std::uniform_int_distribution<int32_t> target(0, V - 1);
  for (auto& t : p.targets) t = target(rng);
  p.targets[0] = 0;
  p.targets[1] = V - 1;
  if (Vp_local < V) {
    p.targets[3] = Vp_local - 1;  // last column of shard 0
    p.targets[4] = Vp_local;      // first column of shard 1
  }
  p.targets[2] = std::min(2 * Vp_local, V - 1);  // the +1000 row: a later shard where there is one
  return p;
}

// Double-precision loss and gradient of dloss * sum_n loss_n over the real columns; the
// gradient is 0 on the padding.
struct Reference {
  std::vector<double> losses, dlogits;
};
Reference sharded_reference(const Problem& p, int V, int Vp, float dloss) {
  Reference ref{std::vector<double>(kN), std::vector<double>(p.logits.size(), 0.0)};
  for (std::size_t n = 0; n < kN; n++) {
    const float* row = &p.logits[n * static_cast<std::size_t>(Vp)];
    double mx = row[0];
    for (int v = 1; v < V; v++) mx = std::max(mx, static_cast<double>(row[v]));
    double sum = 0.0;
    for (int v = 0; v < V; v++) sum += std::exp(static_cast<double>(row[v]) - mx);
    ref.losses[n] = std::log(sum) + mx - static_cast<double>(row[p.targets[n]]);
    double* grad = &ref.dlogits[n * static_cast<std::size_t>(Vp)];
    for (int v = 0; v < V; v++) {
      const double prob = std::exp(static_cast<double>(row[v]) - mx) / sum;
      grad[v] = (prob - (v == p.targets[n] ? 1.0 : 0.0)) * static_cast<double>(dloss);
    }
  }
  return ref;
}

struct ShardedResult {
  std::vector<float> losses;   // [kN]
  std::vector<float> dlogits;  // [kN, tp * Vp_local], the shards' gradients side by side
  std::vector<int> v_local;    // real columns per shard
  std::vector<float> row_max, row_sumexp, target_logit;  // [kN] each, combined over the shards
};

// What tp ranks do: each holds columns [r*Vp_local, (r+1)*Vp_local) of the logits and hands out
// its row statistics; the blocks are gathered in rank order and combined, the loss is formed by
// the caller, and the backward runs per shard (in place if asked). Outputs start as NaN, so a
// value that is not written shows.
ShardedResult run_sharded(cpu::CpuBackend& backend, const Problem& p, int V, int tp, int Vp_local,
                          float dloss, bool in_place) {
  const int Vp = tp * Vp_local;
  const std::size_t local_width = static_cast<std::size_t>(Vp_local);
  std::vector<std::vector<float>> shards(static_cast<std::size_t>(tp));
  ShardedResult result{std::vector<float>(kN), std::vector<float>(p.logits.size(), kNaN),
                       std::vector<int>(static_cast<std::size_t>(tp)), {}, {}, {}};
  for (int r = 0; r < tp; r++) {
    auto& shard = shards[static_cast<std::size_t>(r)];
    shard.resize(kN * local_width);
    for (std::size_t n = 0; n < kN; n++)
      std::copy_n(&p.logits[n * static_cast<std::size_t>(Vp) + static_cast<std::size_t>(r) * local_width],
                  local_width, &shard[n * local_width]);
    result.v_local[static_cast<std::size_t>(r)] = std::clamp(V - r * Vp_local, 0, Vp_local);
  }
  // Each rank's statistics block, side by side as the all-gather leaves them; then the combine.
  std::vector<float> gathered(static_cast<std::size_t>(tp) * 3 * kN, kNaN);
  for (int r = 0; r < tp; r++) {
    backend.cross_entropy_shard_statistics(&gathered[static_cast<std::size_t>(r) * 3 * kN],
                                           shards[static_cast<std::size_t>(r)].data(), p.targets.data(), kN,
                                           result.v_local[static_cast<std::size_t>(r)], Vp_local, r * Vp_local);
  }
  std::vector<float> global_max(kN, kNaN), global_sum(kN, kNaN), global_target(kN, kNaN);
  backend.cross_entropy_combine_shards(global_max.data(), global_sum.data(), global_target.data(), gathered.data(),
                                       kN, tp);
  result.row_max = global_max;
  result.row_sumexp = global_sum;
  result.target_logit = global_target;
  for (std::size_t n = 0; n < kN; n++)
    result.losses[n] = static_cast<float>(std::log(static_cast<double>(global_sum[n])) +
                                          static_cast<double>(global_max[n]) -
                                          static_cast<double>(global_target[n]));
  for (int r = 0; r < tp; r++) {
    auto& shard = shards[static_cast<std::size_t>(r)];
    std::vector<float> separate(shard.size(), kNaN);
    float* dlogits = in_place ? shard.data() : separate.data();
    backend.cross_entropy_backward_sharded(dlogits, shard.data(), p.targets.data(),
                                           global_max.data(), global_sum.data(), dloss, kN,
                                           result.v_local[static_cast<std::size_t>(r)], Vp_local,
                                           r * Vp_local);
    for (std::size_t n = 0; n < kN; n++)
      std::copy_n(dlogits + n * local_width, local_width,
                  &result.dlogits[n * static_cast<std::size_t>(Vp) +
                                  static_cast<std::size_t>(r) * local_width]);
  }
  return result;
}

// tp shards of Vp_local columns over V = 11 real tokens: the padding is in the last shard only.
struct Sharding {
  int tp, Vp_local;
};
constexpr Sharding kShardings[] = {{1, 16}, {2, 8}, {3, 4}};

TEST(CpuCrossEntropySharded, LossesMatchDoubleReference) {
  cpu::CpuBackend backend(kTestThreads);
  for (const Sharding& s : kShardings) {
    const int Vp = s.tp * s.Vp_local;
    const auto p = make_sharded_problem(61, kV, Vp, s.Vp_local);
    const auto result = run_sharded(backend, p, kV, s.tp, s.Vp_local, 1.0f, false);
    // As the fused kernel: O(1-10) losses to 1e-5 relative, the +1000 row to 1e-4 absolute.
    // The shards' float sums, combined in double, add < 3 ulp (2e-7 relative), i.e. 2e-7 in
    // the loss.
    expect_close(result.losses, sharded_reference(p, kV, Vp, 1.0f).losses, 1e-4, 1e-5,
                 "losses, tp = " + std::to_string(s.tp));
  }
}

// The combined statistics are the whole row's: the same max (bit for bit), the same target
// logit, and the sum within rounding. Row 5 has its last shard's logits raised by 5, so that the
// shards' maxima differ and every other shard's sum is rescaled to a larger max.
TEST(CpuCrossEntropySharded, CombinedStatisticsAreTheWholeRows) {
  cpu::CpuBackend backend(kTestThreads);
  for (const Sharding& s : kShardings) {
    const int Vp = s.tp * s.Vp_local;
    auto p = make_sharded_problem(66, kV, Vp, s.Vp_local);
    for (int v = (s.tp - 1) * s.Vp_local; v < kV; v++) p.logits[5 * static_cast<std::size_t>(Vp) + v] += 5.0f;
    std::vector<float> whole(3 * kN, kNaN);
    backend.cross_entropy_shard_statistics(whole.data(), p.logits.data(), p.targets.data(), kN, kV, Vp, 0);
    const auto result = run_sharded(backend, p, kV, s.tp, s.Vp_local, 1.0f, false);
    const std::string where = ", tp = " + std::to_string(s.tp);
    for (std::size_t n = 0; n < kN; n++) {
      EXPECT_EQ(result.row_max[n], whole[n]) << "row max, row " << n << where;
      // Each shard's sum rounded to float (6e-8 relative), rescaled and summed in double, and
      // rounded once more; the whole row's sum rounded once: a few 1e-8 apart.
      EXPECT_NEAR(result.row_sumexp[n], whole[kN + n], 3e-7 * whole[kN + n]) << "row sum, row " << n << where;
      EXPECT_EQ(result.target_logit[n], whole[2 * kN + n]) << "target logit, row " << n << where;
    }
  }
}

TEST(CpuCrossEntropySharded, OneShardAgreesWithFusedKernels) {
  // kVp = 16 columns, one shard: the fused kernels' problem, same exp_approx and max.
  const auto p = make_problem(62);
  const float dloss = 0.37f;
  cpu::CpuBackend backend(kTestThreads);
  std::vector<float> fused_losses(kN), fused_dlogits(p.logits.size());
  backend.cross_entropy_forward(fused_losses.data(), nullptr, nullptr, p.logits.data(), p.targets.data(), kN, kV,
                                kVp);
  backend.cross_entropy_backward(fused_dlogits.data(), p.logits.data(), p.targets.data(), dloss,
                                 kN, kV, kVp);
  const auto result = run_sharded(backend, p, kV, 1, kVp, dloss, false);
  // The only differences: the sum handed over as a float (6e-8 relative) and the loss formed
  // in double from float pieces; and the gradient scaled in one pass rather than two.
  expect_close(result.losses, to_double(fused_losses), 1e-6, 1e-6, "losses vs fused");
  expect_close(result.dlogits, to_double(fused_dlogits), 1e-7, 1e-6, "dlogits vs fused");
}

// The forward's row statistics are the shard statistics over the whole vocabulary (bit for bit:
// the same max and the same double sum rounded to float), and the backward the model runs on
// them (cross_entropy_backward_sharded, vocab_begin 0) gives the fused backward's gradients.
TEST(CpuCrossEntropy, ForwardRowStatisticsDriveTheBackward) {
  const auto p = make_problem(64);
  const float dloss = 0.37f;
  cpu::CpuBackend backend(kTestThreads);
  std::vector<float> losses(kN, kNaN), row_max(kN, kNaN), row_sumexp(kN, kNaN), plain_losses(kN, kNaN);
  backend.cross_entropy_forward(losses.data(), row_max.data(), row_sumexp.data(), p.logits.data(), p.targets.data(),
                                kN, kV, kVp);
  backend.cross_entropy_forward(plain_losses.data(), nullptr, nullptr, p.logits.data(), p.targets.data(), kN, kV,
                                kVp);
  EXPECT_EQ(losses, plain_losses) << "asking for the statistics changes no loss";
  std::vector<float> piece(3 * kN, kNaN);
  backend.cross_entropy_shard_statistics(piece.data(), p.logits.data(), p.targets.data(), kN, kV, kVp, 0);
  EXPECT_EQ(row_max, std::vector<float>(piece.begin(), piece.begin() + kN));
  EXPECT_EQ(row_sumexp, std::vector<float>(piece.begin() + kN, piece.begin() + 2 * kN));
  for (std::size_t n = 0; n < kN; n++) {
    EXPECT_EQ(piece[2 * kN + n], p.logits[n * kVp + static_cast<std::size_t>(p.targets[n])]) << "target logit, row " << n;
  }

  std::vector<float> fused(p.logits.size(), kNaN);
  backend.cross_entropy_backward(fused.data(), p.logits.data(), p.targets.data(), dloss, kN, kV, kVp);
  std::vector<float> from_stats = p.logits;  // in place, as Gpt::head_backward runs it
  backend.cross_entropy_backward_sharded(from_stats.data(), from_stats.data(), p.targets.data(), row_max.data(),
                                         row_sumexp.data(), dloss, kN, kV, kVp, 0);
  // The sum as a float (6e-8 relative) and one scaling pass instead of two: ~1e-7 of 0.37.
  expect_close(from_stats, to_double(fused), 1e-7, 1e-6, "dlogits from the forward's statistics");
}

TEST(CpuCrossEntropySharded, GradientsMatchReferenceAndZeroPadding) {
  const float dloss = 0.37f;
  cpu::CpuBackend backend(kTestThreads);
  for (const Sharding& s : kShardings) {
    const int Vp = s.tp * s.Vp_local;
    const auto p = make_sharded_problem(63, kV, Vp, s.Vp_local);
    const auto result = run_sharded(backend, p, kV, s.tp, s.Vp_local, dloss, false);
    // Probabilities times 0.37 from float exp: ~1e-7 absolute (as the fused test).
    expect_close(result.dlogits, sharded_reference(p, kV, Vp, dloss).dlogits, 1e-6, 1e-5,
                 "dlogits, tp = " + std::to_string(s.tp));
    for (std::size_t n = 0; n < kN; n++)
      for (int v = kV; v < Vp; v++)
        EXPECT_EQ(result.dlogits[n * static_cast<std::size_t>(Vp) + static_cast<std::size_t>(v)],
                  0.0f)
            << "padded column " << v << " of row " << n << ", tp = " << s.tp;
  }
}

TEST(CpuCrossEntropySharded, BackwardInPlaceEqualsOutOfPlace) {
  const float dloss = 1.0f / kN;
  cpu::CpuBackend backend(kTestThreads);
  for (const Sharding& s : kShardings) {
    const auto p = make_sharded_problem(64, kV, s.tp * s.Vp_local, s.Vp_local);
    const auto separate = run_sharded(backend, p, kV, s.tp, s.Vp_local, dloss, false);
    const auto in_place = run_sharded(backend, p, kV, s.tp, s.Vp_local, dloss, true);
    for (std::size_t i = 0; i < separate.dlogits.size(); i++)
      ASSERT_EQ(in_place.dlogits[i], separate.dlogits[i])
          << "element " << i << " differs when dlogits == logits, tp = " << s.tp;
  }
}

TEST(CpuCrossEntropySharded, AllPaddingShard) {
  // V = 12 over 4 shards of 4 columns: the last shard has V_local = 0.
  constexpr int V = 12, tp = 4, Vp_local = 4, Vp = tp * Vp_local;
  const float dloss = 0.37f;
  cpu::CpuBackend backend(kTestThreads);
  const auto p = make_sharded_problem(65, V, Vp, Vp_local);
  for (const bool in_place : {false, true}) {
    const auto result = run_sharded(backend, p, V, tp, Vp_local, dloss, in_place);
    ASSERT_EQ(result.v_local.back(), 0);
    const auto ref = sharded_reference(p, V, Vp, dloss);
    expect_close(result.losses, ref.losses, 1e-4, 1e-5, "losses");
    expect_close(result.dlogits, ref.dlogits, 1e-6, 1e-5, "dlogits");  // 0 on the last shard
  }
  // The empty shard alone: max -infinity, sum and target logit 0, a zero gradient; its NaN
  // logits are never read.
  std::vector<float> logits(kN * Vp_local, kNaN), stats(3 * kN, kNaN);
  backend.cross_entropy_shard_statistics(stats.data(), logits.data(), p.targets.data(), kN, 0, Vp_local,
                                         (tp - 1) * Vp_local);
  for (std::size_t n = 0; n < kN; n++) {
    EXPECT_EQ(stats[n], -std::numeric_limits<float>::infinity()) << "row " << n;
    EXPECT_EQ(stats[kN + n], 0.0f) << "row " << n;
    EXPECT_EQ(stats[2 * kN + n], 0.0f) << "row " << n;
  }
  const std::vector<float> global_max(kN, 1.0f), global_sum(kN, 2.0f);
  backend.cross_entropy_backward_sharded(logits.data(), logits.data(), p.targets.data(),
                                         global_max.data(), global_sum.data(), dloss, kN, 0,
                                         Vp_local, (tp - 1) * Vp_local);
  for (const float d : logits) EXPECT_EQ(d, 0.0f);
}

}  // namespace
}  // namespace trident::kernels::test
