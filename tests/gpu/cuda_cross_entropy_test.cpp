// The CUDA backend's softmax + cross-entropy against its CPU twin: the fused kernels over a
// padded vocabulary and the three vocabulary-parallel pieces (kernels/backend.h), on seeded
// random inputs (twin_test_support.h: the measure and the tolerances).
//
// - Padding columns hold a huge sentinel that would change any result that read it, and the
//   gradients there must come back exactly 0.
// - Backwards overwrite: their outputs are pre-filled with garbage, and they also run in place
//   (dlogits aliasing logits), as the model calls them.
// - The sharded pieces run on a shard in the middle of the vocabulary (targets inside and
//   outside it), on the last shard (with padding) and on an all-padding shard; and all shards
//   combined as the callers' reductions would must give the fused kernels' results.
// - The training step's loss and gradient in one kernel (cross_entropy_forward_backward) gives
//   the bits of the two kernels it stands for, and agrees with the CPU's two calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>  // std::size
#include <string>
#include <vector>

#include "kernels/backend.h"              // Backend
#include "kernels/cuda/cross_entropy.cuh"   // cuda::cross_entropy_backward_sharded, CrossEntropyLoads
#include "kernels/precision.h"            // encode_16bit, precision_name
#include "tests/gpu/twin_test_support.h"  // TwinBackends, expect_twins_agree, tolerances

namespace trident::kernels::gpu_test {
namespace {

// Padding logits: a value that changes the row max (and sends exp() to 0 or infinity) if a
// kernel ever reads it.
constexpr float kPaddingSentinel = 1e30f;

struct VocabShape {
  const char* name;
  int N, V, Vp;
};
constexpr VocabShape kVocabShapes[] = {
    {"N=74 V=61 Vp=64", 74, 61, 64},
    {"N=5 V=5001 Vp=5056 (rows longer than a block)", 5, 5001, 5056},
};

// Logits [N, Vp] with the padding columns V..Vp set to the sentinel.
std::vector<float> padded_logits(std::vector<float> logits, int N, int V, int Vp) {
  for (int n = 0; n < N; n++) {
    for (int v = V; v < Vp; v++) logits[count_of(n, Vp) + v] = kPaddingSentinel;
  }
  return logits;
}

// Counts the entries of columns [V, Vp) of a [N, Vp] matrix that are not exactly 0.
std::size_t nonzero_padding(const std::vector<float>& m, int N, int V, int Vp) {
  std::size_t bad = 0;
  for (int n = 0; n < N; n++) {
    for (int v = V; v < Vp; v++) bad += m[count_of(n, Vp) + v] != 0.0f ? 1 : 0;
  }
  return bad;
}

// --- fused cross-entropy -------------------------------------------------------------------------

TEST_F(TwinBackends, CrossEntropyForwardMatchesCpuWithoutReadingPadding) {
  for (const VocabShape& s : kVocabShapes) {
    SCOPED_TRACE(s.name);
    auto logits = twin(padded_logits(uniform(count_of(s.N, s.Vp), -4.0f, 4.0f), s.N, s.V, s.Vp));
    auto targets = twin_tokens(uniform_ids(count_of(s.N, 1), 0, s.V));
    auto losses = twin(uniform(count_of(s.N, 1), 5.0f, 9.0f));  // garbage: overwritten
    auto stats_losses = twin(uniform(count_of(s.N, 1), 5.0f, 9.0f));
    auto row_max = twin(uniform(count_of(s.N, 1), 5.0f, 9.0f));
    auto row_sumexp = twin(uniform(count_of(s.N, 1), 5.0f, 9.0f));
    run_on_both([&](Backend& b, Side side) {
      b.cross_entropy_forward(losses.on(side), nullptr, nullptr, logits.on(side), targets.on(side), s.N, s.V, s.Vp);
      b.cross_entropy_forward(stats_losses.on(side), row_max.on(side), row_sumexp.on(side), logits.on(side),
                              targets.on(side), s.N, s.V, s.Vp);
    });
    expect_twins_agree(losses, kReductionTolerance, "losses");
    expect_twins_agree(stats_losses, kReductionTolerance, "losses (with the row statistics)");
    expect_twins_agree(row_max, 0.0, "row max");  // the max of the same floats: exact
    expect_twins_agree(row_sumexp, kReductionTolerance, "row sum of exp");
  }
}

TEST_F(TwinBackends, CrossEntropyBackwardOverwritesAndZeroesPadding) {
  for (const VocabShape& s : kVocabShapes) {
    for (const bool in_place : {false, true}) {
      SCOPED_TRACE(std::string(s.name) + (in_place ? ", dlogits aliasing logits" : ""));
      auto logits = twin(padded_logits(uniform(count_of(s.N, s.Vp), -4.0f, 4.0f), s.N, s.V, s.Vp));
      auto targets = twin_tokens(uniform_ids(count_of(s.N, 1), 0, s.V));
      auto separate = twin(uniform(count_of(s.N, s.Vp), 5.0f, 9.0f));  // garbage: overwritten
      TwinFloats& dlogits = in_place ? logits : separate;
      const float dloss = 1.0f / static_cast<float>(s.N);
      run_on_both([&](Backend& b, Side side) {
        b.cross_entropy_backward(dlogits.on(side), logits.on(side), targets.on(side), dloss, s.N,
                                 s.V, s.Vp);
      });
      expect_twins_agree(dlogits, kReductionTolerance, "dlogits");
      EXPECT_EQ(nonzero_padding(dlogits.values(Side::kGpu), s.N, s.V, s.Vp), 0u);
    }
  }
}

// The loss and the gradient in one call (Backend::cross_entropy_forward_backward, a training
// step's): the CPU's two calls against the GPU's one kernel, in place as the model runs it.
TEST_F(TwinBackends, CrossEntropyForwardBackwardMatchesCpu) {
  for (const VocabShape& s : kVocabShapes) {
    SCOPED_TRACE(s.name);
    auto logits = twin(padded_logits(uniform(count_of(s.N, s.Vp), -4.0f, 4.0f), s.N, s.V, s.Vp));
    auto targets = twin_tokens(uniform_ids(count_of(s.N, 1), 0, s.V));
    auto losses = twin(uniform(count_of(s.N, 1), 5.0f, 9.0f));  // garbage: overwritten
    auto row_max = twin(uniform(count_of(s.N, 1), 5.0f, 9.0f));
    auto row_sumexp = twin(uniform(count_of(s.N, 1), 5.0f, 9.0f));
    const float dloss = 1.0f / static_cast<float>(s.N);
    run_on_both([&](Backend& b, Side side) {
      b.cross_entropy_forward_backward(losses.on(side), row_max.on(side), row_sumexp.on(side), logits.on(side),
                                       logits.on(side), targets.on(side), dloss, s.N, s.V, s.Vp);
    });
    expect_twins_agree(losses, kReductionTolerance, "losses");
    expect_twins_agree(row_max, 0.0, "row max");
    expect_twins_agree(row_sumexp, kReductionTolerance, "row sum of exp");
    expect_twins_agree(logits, kReductionTolerance, "dlogits (over the logits)");
    EXPECT_EQ(nonzero_padding(logits.values(Side::kGpu), s.N, s.V, s.Vp), 0u);
  }
}

// --- vocabulary-parallel cross-entropy ---------------------------------------------------------

// V = 61 real ids padded to Vp = 64, split over 4 ranks of 16 columns: shard 1 holds ids
// [16, 32) (the middle: targets fall inside and outside it), shard 3 holds [48, 64), of which
// 13 are real and 3 padding.
constexpr int kShardN = 74, kShardV = 61, kShardVp = 64, kShards = 4;
constexpr int kShardWidth = kShardVp / kShards;

struct Shard {
  const char* name;
  int index;
  int vocab_begin() const { return index * kShardWidth; }
  int real() const { return std::clamp(kShardV - vocab_begin(), 0, kShardWidth); }
};
constexpr Shard kShardCases[] = {{"middle shard [16, 32)", 1},
                                 {"last shard [48, 64), 3 padding", 3}};

// Columns [vocab_begin, vocab_begin + width) of a [N, Vp] matrix, with the shard's padding set
// to the sentinel.
std::vector<float> shard_columns(const std::vector<float>& full, const Shard& shard) {
  std::vector<float> out(count_of(kShardN, kShardWidth));
  for (int n = 0; n < kShardN; n++) {
    for (int j = 0; j < kShardWidth; j++) {
      out[count_of(n, kShardWidth) + j] =
          j < shard.real() ? full[count_of(n, kShardVp) + shard.vocab_begin() + j]
                           : kPaddingSentinel;
    }
  }
  return out;
}

// The global row max and sum of exp(l - max) over the real ids, as the callers' all-reduces
// would deliver them.
void global_row_stats(const std::vector<float>& full, std::vector<float>& row_max,
                      std::vector<float>& row_sumexp) {
  row_max.assign(count_of(kShardN, 1), 0.0f);
  row_sumexp.assign(count_of(kShardN, 1), 0.0f);
  for (int n = 0; n < kShardN; n++) {
    const float* row = full.data() + count_of(n, kShardVp);
    const float m = *std::max_element(row, row + kShardV);
    double sum = 0.0;
    for (int v = 0; v < kShardV; v++) sum += std::exp(static_cast<double>(row[v] - m));
    row_max[count_of(n, 1)] = m;
    row_sumexp[count_of(n, 1)] = static_cast<float>(sum);
  }
}

TEST_F(TwinBackends, ShardedCrossEntropyPiecesMatchCpu) {
  const std::vector<float> full = uniform(count_of(kShardN, kShardVp), -4.0f, 4.0f);
  std::vector<float> max_host, sumexp_host;
  global_row_stats(full, max_host, sumexp_host);
  auto targets = twin_tokens(uniform_ids(count_of(kShardN, 1), 0, kShardV));
  auto global_max = twin(max_host);
  auto global_sumexp = twin(sumexp_host);
  for (const Shard& shard : kShardCases) {
    SCOPED_TRACE(shard.name);
    auto logits = twin(shard_columns(full, shard));
    auto stats = twin(uniform(count_of(3 * kShardN, 1), 5.0f, 9.0f));  // garbage: overwritten
    run_on_both([&](Backend& b, Side side) {
      b.cross_entropy_shard_statistics(stats.on(side), logits.on(side), targets.on(side), kShardN, shard.real(),
                                       kShardWidth, shard.vocab_begin());
    });
    // max, sum of exp(l - that max), target logit: one block each, each to its own scale.
    const std::vector<float> gpu_stats = stats.values(Side::kGpu), cpu_stats = stats.values(Side::kCpu);
    const auto block = [&](const std::vector<float>& all, int b) {
      return std::vector<float>(all.begin() + b * kShardN, all.begin() + (b + 1) * kShardN);
    };
    expect_twins_agree(block(gpu_stats, 0), block(cpu_stats, 0), 0.0, "row max (a max of the same values)");
    expect_twins_agree(block(gpu_stats, 1), block(cpu_stats, 1), kReductionTolerance, "row sum");
    expect_twins_agree(block(gpu_stats, 2), block(cpu_stats, 2), 0.0, "target logit (a copy)");

    for (const bool in_place : {false, true}) {
      SCOPED_TRACE(in_place ? "backward, dlogits aliasing logits" : "backward");
      auto shard_logits = twin(shard_columns(full, shard));
      auto separate = twin(uniform(count_of(kShardN, kShardWidth), 5.0f, 9.0f));
      TwinFloats& dlogits = in_place ? shard_logits : separate;
      const float dloss = 1.0f / static_cast<float>(kShardN);
      run_on_both([&](Backend& b, Side side) {
        b.cross_entropy_backward_sharded(dlogits.on(side), shard_logits.on(side), targets.on(side),
                                         global_max.on(side), global_sumexp.on(side), dloss,
                                         kShardN, shard.real(), kShardWidth, shard.vocab_begin());
      });
      expect_twins_agree(dlogits, kReductionTolerance, "dlogits");
      EXPECT_EQ(nonzero_padding(dlogits.values(Side::kGpu), kShardN, shard.real(), kShardWidth),
                0u);
    }
  }
}

// The combination of four shards' statistics: maxima spread over [-4, 4] (so sums are rescaled
// both ways), shard 3 all padding on every other row (max -infinity, sum 0), each row's target
// logit in one shard.
TEST_F(TwinBackends, CombineShardsMatchesCpu) {
  const auto rows = count_of(kShardN, 1);
  std::vector<float> gathered = uniform(count_of(kShards, 3 * kShardN), 1.0f, 20.0f);
  const std::vector<float> maxima = uniform(count_of(kShards, kShardN), -4.0f, 4.0f);
  const std::vector<float> target_values = uniform(rows, -4.0f, 4.0f);
  for (int r = 0; r < kShards; r++) {
    float* block = gathered.data() + count_of(r, 3 * kShardN);
    for (std::size_t n = 0; n < rows; n++) {
      const bool empty = r == kShards - 1 && n % 2 == 0;
      block[n] = empty ? -INFINITY : maxima[count_of(r, kShardN) + n];
      if (empty) block[rows + n] = 0.0f;
      block[2 * rows + n] = static_cast<int>(n % kShards) == r ? target_values[n] : 0.0f;
    }
  }
  auto all = twin(gathered);
  auto row_max = twin(uniform(rows, 5.0f, 9.0f));  // garbage: overwritten
  auto row_sumexp = twin(uniform(rows, 5.0f, 9.0f));
  auto target_logit = twin(uniform(rows, 5.0f, 9.0f));
  run_on_both([&](Backend& b, Side side) {
    b.cross_entropy_combine_shards(row_max.on(side), row_sumexp.on(side), target_logit.on(side), all.on(side),
                                   kShardN, kShards);
  });
  expect_twins_agree(row_max, 0.0, "row max");  // a max is exact
  // Double sums of four terms, each with a double exp: the float results differ by an ulp at most.
  expect_twins_agree(row_sumexp, kReductionTolerance, "row sum");
  expect_twins_agree(target_logit, 0.0, "target logit");  // one non-zero term
  EXPECT_EQ(target_logit.values(Side::kGpu), target_values);
}

TEST_F(TwinBackends, AllPaddingShardContributesNothing) {
  // A shard beyond the real vocabulary (V_local = 0): every column is padding.
  const int begin = kShardVp;
  auto logits = twin(std::vector<float>(count_of(kShardN, kShardWidth), kPaddingSentinel));
  auto targets = twin_tokens(uniform_ids(count_of(kShardN, 1), 0, kShardV));
  auto global_max = twin(uniform(count_of(kShardN, 1), 3.0f, 4.0f));
  auto global_sumexp = twin(uniform(count_of(kShardN, 1), 1.0f, 9.0f));
  auto stats = twin(uniform(count_of(3 * kShardN, 1), 5.0f, 9.0f));
  auto dlogits = twin(uniform(count_of(kShardN, kShardWidth), 5.0f, 9.0f));
  run_on_both([&](Backend& b, Side side) {
    b.cross_entropy_shard_statistics(stats.on(side), logits.on(side), targets.on(side), kShardN, 0, kShardWidth,
                                     begin);
    b.cross_entropy_backward_sharded(dlogits.on(side), logits.on(side), targets.on(side),
                                     global_max.on(side), global_sumexp.on(side), 0.5f, kShardN, 0,
                                     kShardWidth, begin);
  });
  const std::vector<float> gpu_stats = stats.values(Side::kGpu);
  const auto rows = count_of(kShardN, 1);
  EXPECT_TRUE(std::all_of(gpu_stats.begin(), gpu_stats.begin() + rows,
                          [](float m) { return std::isinf(m) && m < 0.0f; }));
  EXPECT_TRUE(std::all_of(gpu_stats.begin() + rows, gpu_stats.end(), [](float x) { return x == 0.0f; }))
      << "sums and target logits 0";
  expect_twins_agree(stats, 0.0, "shard statistics");
  EXPECT_EQ(nonzero_padding(dlogits.values(Side::kGpu), kShardN, 0, kShardWidth), 0u);
}

// The pieces over all four shards, gathered and combined as Gpt does, give the fused kernels'
// losses and gradients on the GPU itself.
TEST_F(TwinBackends, GpuShardsCombineToTheFusedCrossEntropy) {
  Backend& gpu = *gpu_;
  const std::vector<float> full = uniform(count_of(kShardN, kShardVp), -4.0f, 4.0f);
  const std::vector<int32_t> targets_host = uniform_ids(count_of(kShardN, 1), 0, kShardV);
  auto targets = twin_tokens(targets_host);
  const float dloss = 1.0f / static_cast<float>(kShardN);

  // Fused, on the whole (padded) vocabulary.
  auto fused_logits = twin(padded_logits(full, kShardN, kShardV, kShardVp));
  auto fused_losses = twin(std::vector<float>(count_of(kShardN, 1)));
  gpu.cross_entropy_forward(fused_losses.on(Side::kGpu), nullptr, nullptr, fused_logits.on(Side::kGpu),
                            targets.on(Side::kGpu), kShardN, kShardV, kShardVp);
  const std::vector<float> want_losses = fused_losses.values(Side::kGpu);
  gpu.cross_entropy_backward(fused_logits.on(Side::kGpu), fused_logits.on(Side::kGpu),
                             targets.on(Side::kGpu), dloss, kShardN, kShardV, kShardVp);
  const std::vector<float> want_dlogits = fused_logits.values(Side::kGpu);

  // Sharded: every shard's statistics side by side (as the all-gather leaves them), combined on
  // the GPU, then the loss (as Gpt forms it) and the gradients.
  const auto rows = count_of(kShardN, 1);
  std::vector<float> gathered;
  for (int r = 0; r < kShards; r++) {
    const Shard shard{"", r};
    auto logits = twin(shard_columns(full, shard));
    auto stats = twin(std::vector<float>(3 * rows));
    gpu.cross_entropy_shard_statistics(stats.on(Side::kGpu), logits.on(Side::kGpu), targets.on(Side::kGpu), kShardN,
                                       shard.real(), kShardWidth, shard.vocab_begin());
    const std::vector<float> block = stats.values(Side::kGpu);
    gathered.insert(gathered.end(), block.begin(), block.end());
  }
  auto gathered_twin = twin(gathered);
  auto global_max = twin(std::vector<float>(rows));
  auto global_sumexp = twin(std::vector<float>(rows));
  auto global_target = twin(std::vector<float>(rows));
  gpu.cross_entropy_combine_shards(global_max.on(Side::kGpu), global_sumexp.on(Side::kGpu),
                                   global_target.on(Side::kGpu), gathered_twin.on(Side::kGpu), kShardN, kShards);
  const std::vector<float> row_max = global_max.values(Side::kGpu);
  const std::vector<float> sumexp = global_sumexp.values(Side::kGpu);
  const std::vector<float> target_logit = global_target.values(Side::kGpu);
  std::vector<float> losses(rows);
  for (std::size_t n = 0; n < rows; n++) {
    losses[n] = static_cast<float>(std::log(static_cast<double>(sumexp[n])) + static_cast<double>(row_max[n]) -
                                   static_cast<double>(target_logit[n]));
  }
  expect_twins_agree(losses, want_losses, kReductionTolerance, "losses from shards");

  std::vector<float> dlogits(count_of(kShardN, kShardVp), 0.0f);
  for (int r = 0; r < kShards; r++) {
    const Shard shard{"", r};
    auto logits = twin(shard_columns(full, shard));
    gpu.cross_entropy_backward_sharded(logits.on(Side::kGpu), logits.on(Side::kGpu),
                                       targets.on(Side::kGpu), global_max.on(Side::kGpu),
                                       global_sumexp.on(Side::kGpu), dloss, kShardN, shard.real(),
                                       kShardWidth, shard.vocab_begin());
    const std::vector<float> part = logits.values(Side::kGpu);
    for (int n = 0; n < kShardN; n++) {
      for (int j = 0; j < kShardWidth; j++) {
        dlogits[count_of(n, kShardVp) + shard.vocab_begin() + j] =
            part[count_of(n, kShardWidth) + j];
      }
    }
  }
  expect_twins_agree(dlogits, want_dlogits, kReductionTolerance, "dlogits from shards");
}

// A shape of the launcher tests: V real columns in rows of Vp, the buffers starting `offset`
// elements past a 16-byte boundary.
struct LauncherCase {
  int V, Vp;
  std::size_t offset;
  std::string name(Precision p) const {
    return std::string(precision_name(p)) + " V=" + std::to_string(V) + " Vp=" + std::to_string(Vp) + " offset " +
           std::to_string(offset);
  }
};

// Rows of logits as a launcher test stores them: in precision p, from element `offset` past a
// 16-byte boundary (offset 1 defeats the 16-byte packs).
struct StoredRows {
  Precision p;
  std::size_t offset;
  // The values as stored: floats, or 16-bit patterns two to a float (one spare, for odd counts).
  std::vector<float> words(const std::vector<float>& v) const {
    if (p == Precision::kFp32) {
      std::vector<float> out(offset, 0.0f);
      out.insert(out.end(), v.begin(), v.end());
      return out;
    }
    std::vector<uint16_t> bits(offset + v.size() + 1, 0);
    for (std::size_t i = 0; i < v.size(); ++i) bits[offset + i] = encode_16bit(v[i], p);
    std::vector<float> out(bits.size() / 2);
    std::memcpy(out.data(), bits.data(), out.size() * sizeof(float));
    return out;
  }
  ActPtr at(BackendFloats& b) const {
    return p == Precision::kFp32 ? ActPtr(b.get() + offset) : ActPtr(reinterpret_cast<uint16_t*>(b.get()) + offset, p);
  }
};

// N target ids in [0, V) as the words of a device buffer: row 0's the last real column (in the last
// pack), the others spread over the row.
std::vector<float> target_words(int N, int V) {
  std::vector<int32_t> ids(static_cast<std::size_t>(N));
  for (int r = 0; r < N; ++r) ids[static_cast<std::size_t>(r)] = r == 0 ? V - 1 : (r * 17) % V;
  std::vector<float> words(static_cast<std::size_t>(N));
  std::memcpy(words.data(), ids.data(), ids.size() * sizeof(int32_t));
  return words;
}

// CrossEntropyLoads::kPacks (16-byte packs) against the default kValues, on the launcher directly: the same
// bits in fp32, bf16 and fp16, out of place and in place, including a target in the last pack and
// padding inside a pack. Where the rows do not allow packs (Vp not a whole number of them, buffers
// not 16-byte aligned) the launcher falls back to kValues: the same bits again. The twin tests
// above hold kValues to the CPU.
TEST_F(TwinBackends, CrossEntropyBackwardInPacksGivesTheSameBits) {
  constexpr int N = 7;
  for (const Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
    for (const LauncherCase c : {LauncherCase{61, 64, 0}, LauncherCase{50, 56, 0}, LauncherCase{61, 66, 0},
                                 LauncherCase{61, 64, 1}}) {
      for (const bool in_place : {false, true}) {
        SCOPED_TRACE(c.name(p) + (in_place ? " in place" : ""));
        const std::size_t n = count_of(N, c.Vp);
        const std::vector<float> values = uniform(n, -4.0f, 4.0f);
        const StoredRows rows{p, c.offset};
        BackendFloats targets(*gpu_, target_words(N, c.V));
        BackendFloats row_max(*gpu_, std::vector<float>(N, 4.0f));
        BackendFloats row_sumexp(*gpu_, uniform(N, 1.0f, 100.0f));
        std::vector<std::vector<float>> results;
        for (const auto access : {CrossEntropyLoads::kValues, CrossEntropyLoads::kPacks}) {
          BackendFloats logits(*gpu_, rows.words(values));
          BackendFloats separate(*gpu_, rows.words(uniform(n, 5.0f, 9.0f)));  // garbage: overwritten
          BackendFloats& dlogits = in_place ? logits : separate;
          cuda::cross_entropy_backward_sharded(rows.at(dlogits), rows.at(logits),
                                               reinterpret_cast<const int32_t*>(targets.get()), row_max.get(),
                                               row_sumexp.get(), 0.125f, N, c.V, c.Vp, 0, nullptr, access);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          std::vector<float> words(rows.words(values).size());
          gpu_->copy_to_host(words.data(), dlogits.get(), words.size());
          results.push_back(words);
        }
        EXPECT_EQ(results[0], results[1]) << "packs against values";
      }
    }
  }
}

// cuda::cross_entropy_forward_backward against cuda::cross_entropy_forward followed by
// cuda::cross_entropy_backward_sharded on its statistics (what a training step ran before, and
// still runs under tensor parallelism): the same bits in the losses, the row statistics and the
// gradient, in fp32, bf16 and fp16, out of place and in place, with either CrossEntropyLoads,
// on rows a whole number of packs or not, off a 16-byte boundary (the packs' fallback), with a
// target in the last real column. In place, a kernel that wrote a gradient over a logit before
// every thread had read the row for the statistics (or before the target's logit was read for
// the loss) would give other bits. Under the race checker, each shape in one precision and in
// place only (kRaceChecker): the aliasing is what it looks for.
TEST_F(TwinBackends, CrossEntropyForwardBackwardGivesTheTwoKernelsBits) {
  constexpr int N = 9;
  const Precision precisions[] = {Precision::kFp32, Precision::kBf16, Precision::kFp16};
  const LauncherCase cases[] = {{61, 64, 0}, {600, 640, 0}, {61, 66, 0}, {61, 64, 1}};
  for (std::size_t pi = 0; pi < std::size(precisions); ++pi) {
    const Precision p = precisions[pi];
    for (std::size_t ci = 0; ci < std::size(cases); ++ci) {
      const LauncherCase c = cases[ci];
      if (kRaceChecker && ci % std::size(precisions) != pi) continue;
      for (const bool in_place : {false, true}) {
        if (kRaceChecker && !in_place) continue;
        for (const auto access : {CrossEntropyLoads::kValues, CrossEntropyLoads::kPacks}) {
          SCOPED_TRACE(c.name(p) + (in_place ? " in place" : "") +
                       (access == CrossEntropyLoads::kPacks ? " packs" : " values"));
          const std::size_t n = count_of(N, c.Vp);
          const std::vector<float> values = uniform(n, -6.0f, 6.0f);
          const StoredRows rows{p, c.offset};
          BackendFloats targets(*gpu_, target_words(N, c.V));
          const auto* target_ptr = reinterpret_cast<const int32_t*>(targets.get());
          const float dloss = 0.0625f;
          struct Result {
            std::vector<float> losses, row_max, row_sumexp, dlogits;
          };
          auto run = [&](bool fused) {
            BackendFloats logits(*gpu_, rows.words(values));
            BackendFloats separate(*gpu_, rows.words(uniform(n, 5.0f, 9.0f)));  // garbage: overwritten
            BackendFloats& dlogits = in_place ? logits : separate;
            BackendFloats losses(*gpu_, uniform(N, 5.0f, 9.0f));
            BackendFloats row_max(*gpu_, uniform(N, 5.0f, 9.0f));
            BackendFloats row_sumexp(*gpu_, uniform(N, 5.0f, 9.0f));
            if (fused) {
              cuda::cross_entropy_forward_backward(losses.get(), row_max.get(), row_sumexp.get(), rows.at(dlogits),
                                                   rows.at(logits), target_ptr, dloss, N, c.V, c.Vp, nullptr, access);
            } else {
              cuda::cross_entropy_forward(losses.get(), row_max.get(), row_sumexp.get(), rows.at(logits), target_ptr,
                                          N, c.V, c.Vp, nullptr);
              cuda::cross_entropy_backward_sharded(rows.at(dlogits), rows.at(logits), target_ptr, row_max.get(),
                                                   row_sumexp.get(), dloss, N, c.V, c.Vp, 0, nullptr, access);
            }
            EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
            Result r{std::vector<float>(N), std::vector<float>(N), std::vector<float>(N),
                     std::vector<float>(rows.words(values).size())};
            gpu_->copy_to_host(r.losses.data(), losses.get(), N);
            gpu_->copy_to_host(r.row_max.data(), row_max.get(), N);
            gpu_->copy_to_host(r.row_sumexp.data(), row_sumexp.get(), N);
            gpu_->copy_to_host(r.dlogits.data(), dlogits.get(), r.dlogits.size());
            return r;
          };
          const Result two = run(false);
          const Result one = run(true);
          EXPECT_EQ(one.losses, two.losses) << "losses";
          EXPECT_EQ(one.row_max, two.row_max) << "row max";
          EXPECT_EQ(one.row_sumexp, two.row_sumexp) << "row sum of exp";
          EXPECT_EQ(one.dlogits, two.dlogits) << "dlogits";
        }
      }
    }
  }
}

}  // namespace
}  // namespace trident::kernels::gpu_test
