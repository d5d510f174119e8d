// The cross-entropy row statistics of kernels/cuda/cross_entropy.cu (the fused forward and the
// vocabulary shard's statistics, one read of each row) replayed on the host: every thread of a
// row's block runs the same function (kernels/cuda/cross_entropy_math.h: thread_running), then
// the block's merge is emulated step by step (each warp's butterfly, lane l merging with lane
// l ^ offset for offsets 16 down to 1; then warp 0 over the warps' results), against the CPU
// twin's two-pass statistics. This checks the index arithmetic (16-byte chunks, tails, rows that
// are not aligned, threads with no values, shards with no real column) and the online math on
// every build; tests/gpu checks that the device runs the same thing (shuffles, shared memory).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cross_entropy.h"       // cpu::cross_entropy_forward, cross_entropy_shard_statistics
#include "kernels/cuda/cross_entropy_math.h"  // softmax::thread_running, merged, loss_of, shard_target_logit
#include "kernels/stored_element.h"           // stored::Fp32, Bf16
#include "tests/unit/kernels/kernel_test_util.h"  // random_floats, encoded, decoded

namespace trident::kernels::test {
namespace {

namespace sm = cuda::softmax;

constexpr int kThreads = 1024;  // kLossRowThreads (launch_shape.cuh): the statistics kernels' block
constexpr int kWarp = 32;

// One block's pair for a row: every thread, then the butterflies.
template <class S, class E = typename S::Element>
sm::Running replay_row(const E* row, int V, bool vectorized) {
  auto butterfly = [](std::vector<sm::Running> lanes) {
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      std::vector<sm::Running> next(lanes.size());
      for (int l = 0; l < kWarp; l++) next[l] = sm::merged(lanes[l], lanes[l ^ offset]);
      lanes = next;
    }
    return lanes[0];
  };
  std::vector<sm::Running> warp_results(kWarp, sm::empty_running());
  for (int w = 0; w < kThreads / kWarp; w++) {
    std::vector<sm::Running> lanes(kWarp);
    for (int l = 0; l < kWarp; l++) lanes[l] = sm::thread_running<S>(row, V, vectorized, w * kWarp + l, kThreads);
    warp_results[w] = butterfly(lanes);
  }
  return butterfly(warp_results);
}

// logits[N, Vp]: uniform in [-6, 6); the padding NaN (a kernel that reads it fails); row 0 an
// increasing ramp (each thread's max grows with every value: the most rescaling), row 1 a
// decreasing one.
std::vector<float> ramped_logits(int N, int V, int Vp, std::mt19937& rng) {
  std::vector<float> logits = random_floats(static_cast<std::size_t>(N) * Vp, rng, -6.0f, 6.0f);
  for (int n = 0; n < N; n++) {
    float* row = logits.data() + static_cast<std::size_t>(n) * Vp;
    std::fill(row + V, row + Vp, NAN);
    for (int v = 0; n < 2 && v < V; v++) {
      row[v] = (n == 0 ? 1.0f : -1.0f) * (-6.0f + 12.0f * static_cast<float>(v) / static_cast<float>(V));
    }
  }
  return logits;
}

std::vector<int32_t> targets_in(int N, int V, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> pick(0, V - 1);
  std::vector<int32_t> targets(static_cast<std::size_t>(N));
  for (int32_t& t : targets) t = pick(rng);
  return targets;
}

// max |got - want| / max |want|, with equal infinities allowed (an all-padding shard's max).
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < want.size(); i++) {
    if (std::isinf(want[i]) && got[i] == want[i]) continue;
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
    worst = std::max(worst, std::isfinite(got[i]) ? std::fabs(static_cast<double>(got[i]) - want[i]) : INFINITY);
  }
  return scale > 0.0 ? worst / scale : worst;
}

// The sums differ from the twin's by the order of the double additions, expf against the twin's
// exp_approx (2 ulp each) and the float rescale factors (up to once per value of a thread on the
// increasing row): measured below 4e-7; 1e-5 leaves a margin while a missing rescale, a skipped
// or doubled chunk gives 1e-3 or more. The max and the target logit are the same values: exact.
constexpr double kSumTolerance = 1e-5;

struct RowShape {
  int N, V, Vp;
  const char* what;
};
const RowShape kRowShapes[] = {
    {3, 1000, 1024, "aligned rows"},
    {3, 100, 128, "fewer values than threads"},
    {3, 9000, 9216, "several 16-byte loads a thread"},
    {3, 1001, 1003, "odd Vp: rows not 16-byte aligned, tails"},
    {2, 50257, 50304, "GPT-2 rows"},
};

TEST(CrossEntropyReplay, ForwardMatchesTheCpuTwin) {
  std::mt19937 rng(41);
  for (const RowShape& sh : kRowShapes) {
    const std::vector<float> logits = ramped_logits(sh.N, sh.V, sh.Vp, rng);
    const std::vector<int32_t> targets = targets_in(sh.N, sh.V, rng);
    for (const bool bf16 : {false, true}) {
      const std::vector<float> values = bf16 ? decoded(encoded(logits, Precision::kBf16), Precision::kBf16) : logits;
      const std::vector<uint16_t> bits = encoded(logits, Precision::kBf16);
      const auto rows = static_cast<std::size_t>(sh.N);
      std::vector<float> want_loss(rows), want_max(rows), want_sum(rows);
      cpu::cross_entropy_forward(want_loss.data(), want_max.data(), want_sum.data(), values.data(), targets.data(),
                                 sh.N, sh.V, sh.Vp);
      for (const bool vectorized : {false, true}) {
        SCOPED_TRACE(std::string(sh.what) + (bf16 ? ", bf16" : ", fp32") + (vectorized ? ", 16-byte loads" : ""));
        std::vector<float> loss(rows), max(rows), sum(rows);
        for (std::size_t n = 0; n < rows; n++) {
          const std::size_t at = n * static_cast<std::size_t>(sh.Vp);
          const sm::Running r = bf16 ? replay_row<stored::Bf16>(bits.data() + at, sh.V, vectorized)
                                     : replay_row<stored::Fp32>(logits.data() + at, sh.V, vectorized);
          loss[n] = sm::loss_of(r, values[at + static_cast<std::size_t>(targets[n])]);
          max[n] = r.max;
          sum[n] = static_cast<float>(r.sum);
        }
        EXPECT_EQ(max, want_max) << "the max of the same values";
        EXPECT_LE(relative_error(sum, want_sum), kSumTolerance);
        EXPECT_LE(relative_error(loss, want_loss), kSumTolerance);
      }
    }
  }
}

// -inf logits (an overflowed 16-bit logit) add exp(-inf) = 0, as in the twin's sum pass, also
// when a thread meets them before any finite value; and the merge is symmetric bit for bit.
TEST(CrossEntropyReplay, NegativeInfinityAddsNothing) {
  const int V = 1000, Vp = 1024;
  std::mt19937 rng(43);
  std::vector<float> logits = random_floats(static_cast<std::size_t>(Vp), rng, -6.0f, 6.0f);
  std::fill(logits.begin() + V, logits.end(), NAN);
  for (int v = 0; v < 300; v++) logits[static_cast<std::size_t>(v)] = -INFINITY;  // every thread's first values
  const int32_t target = 500;
  float want_loss = 0.0f, want_max = 0.0f, want_sum = 0.0f;
  cpu::cross_entropy_forward(&want_loss, &want_max, &want_sum, logits.data(), &target, 1, V, Vp);
  ASSERT_TRUE(std::isfinite(want_sum));
  for (const bool vectorized : {false, true}) {
    const sm::Running r = replay_row<stored::Fp32>(logits.data(), V, vectorized);
    EXPECT_EQ(r.max, want_max);
    EXPECT_TRUE(std::isfinite(r.sum)) << "vectorized " << vectorized;
    EXPECT_LE(std::fabs(static_cast<float>(r.sum) - want_sum), kSumTolerance * want_sum);
    EXPECT_LE(std::fabs(sm::loss_of(r, logits[target]) - want_loss), kSumTolerance * std::fabs(want_loss));
  }
  const sm::Running a{1.5f, 3.25}, b{-0.75f, 7.125};
  const sm::Running ab = sm::merged(a, b), ba = sm::merged(b, a);
  EXPECT_EQ(ab.max, ba.max);
  EXPECT_EQ(ab.sum, ba.sum);
}

// A NaN logit survives the merge in either order, also when the threads that met it saw no
// finite value (their pair {-inf, NaN}) and others saw only -inf ({-inf, 0}): the row's sum and
// loss are NaN, as the twin's are.
TEST(CrossEntropyReplay, NaNLogitIsKept) {
  const sm::Running empty = sm::empty_running(), nan{-INFINITY, NAN};
  EXPECT_TRUE(std::isnan(sm::merged(empty, nan).sum));
  EXPECT_TRUE(std::isnan(sm::merged(nan, empty).sum));
  EXPECT_EQ(sm::merged(empty, empty).sum, 0.0);
  const int V = 1000, Vp = 1024;
  std::mt19937 rng(44);
  std::vector<float> logits = random_floats(static_cast<std::size_t>(Vp), rng, -6.0f, 6.0f);
  // Threads 0 and 1 read columns 0, kThreads, 2 kThreads, ... and 1, kThreads + 1, ... one value
  // at a time (with V = 1000, columns 0 and 1 only): thread 1 meets only NaN, thread 0 only -inf.
  for (int v = 0; v < V; v += kThreads) {
    logits[static_cast<std::size_t>(v)] = -INFINITY;
    logits[static_cast<std::size_t>(v + 1)] = NAN;
  }
  const sm::Running r = replay_row<stored::Fp32>(logits.data(), V, false);
  EXPECT_TRUE(std::isnan(r.sum)) << r.sum;
}

struct ShardCase {
  int N, V, Vp, tp, rank;
  const char* what;
};
const ShardCase kShardCases[] = {
    {3, 2000, 2048, 2, 0, "first shard, no padding"},
    {3, 2000, 2048, 2, 1, "last shard, padding"},
    {3, 3000, 3072, 3, 1, "middle shard"},
    {3, 2000, 2688, 4, 3, "all padding"},
    {3, 2000, 2006, 2, 1, "Vp_local 1003: rows not aligned"},
    {2, 50257, 50304, 2, 1, "GPT-2, the last of two shards"},
};

TEST(CrossEntropyReplay, ShardStatisticsMatchTheCpuTwin) {
  std::mt19937 rng(61);
  for (const ShardCase& c : kShardCases) {
    const int Vp_local = c.Vp / c.tp, vocab_begin = c.rank * Vp_local;
    const int V_local = std::clamp(c.V - vocab_begin, 0, Vp_local);
    const std::vector<float> logits = ramped_logits(c.N, V_local, Vp_local, rng);
    std::vector<int32_t> targets = targets_in(c.N, c.V, rng);
    if (V_local > 0) targets[0] = vocab_begin + V_local - 1;  // one target surely in the shard
    for (const bool bf16 : {false, true}) {
      SCOPED_TRACE(std::string(c.what) + (bf16 ? ", bf16" : ", fp32"));
      const std::vector<float> values = bf16 ? decoded(encoded(logits, Precision::kBf16), Precision::kBf16) : logits;
      const std::vector<uint16_t> bits = encoded(logits, Precision::kBf16);
      const auto rows = static_cast<std::size_t>(c.N);
      std::vector<float> want(3 * rows);
      cpu::cross_entropy_shard_statistics(want.data(), values.data(), targets.data(), c.N, V_local, Vp_local,
                                          vocab_begin);
      for (const bool vectorized : {false, true}) {
        std::vector<float> got(3 * rows);
        for (std::size_t n = 0; n < rows; n++) {
          const std::size_t at = n * static_cast<std::size_t>(Vp_local);
          const sm::Running r = bf16 ? replay_row<stored::Bf16>(bits.data() + at, V_local, vectorized)
                                     : replay_row<stored::Fp32>(logits.data() + at, V_local, vectorized);
          got[n] = r.max;
          got[rows + n] = static_cast<float>(r.sum);
          got[2 * rows + n] = bf16 ? sm::shard_target_logit<stored::Bf16>(bits.data() + at, targets[n], vocab_begin,
                                                                          V_local)
                                   : sm::shard_target_logit<stored::Fp32>(logits.data() + at, targets[n],
                                                                          vocab_begin, V_local);
        }
        auto block = [rows](const std::vector<float>& v, std::size_t b) {
          return std::vector<float>(v.begin() + static_cast<std::ptrdiff_t>(b * rows),
                                    v.begin() + static_cast<std::ptrdiff_t>((b + 1) * rows));
        };
        EXPECT_EQ(block(got, 0), block(want, 0)) << "shard max" << (vectorized ? ", 16-byte loads" : "");
        EXPECT_LE(relative_error(block(got, 1), block(want, 1)), kSumTolerance) << "shard sum";
        EXPECT_EQ(block(got, 2), block(want, 2)) << "target logit";
      }
    }
  }
}

}  // namespace
}  // namespace trident::kernels::test
