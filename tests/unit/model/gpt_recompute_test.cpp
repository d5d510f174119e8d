// Full activation recomputation (train.recompute = full) is a memory trade, not a numerical
// change: the same kernels run on the same inputs in the same order, so the loss and every
// gradient element must be bit-identical to keeping all activations, and the arena must shrink
// by exactly the per-block intermediates of all but one block.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/backend.h"
#include "src/model/gpt.h"
#include "tests/unit/model/tiny_gpt.h"

using namespace trident;

using test_support::init_with_noise;
using test_support::random_tokens;
using test_support::tiny_config;

namespace {

// Two micro-batches of [B, T] accumulated into one gradient, as the trainer does.
struct AccumulatedStep {
  std::vector<double> losses;         // per micro-batch
  std::vector<float> gradients;       // the whole gradient arena
  std::vector<size_t> final_offsets;  // every grads_final call, in order
};

AccumulatedStep accumulate_two_micro_batches(const model::GptConfig& config, model::Recompute recompute) {
  auto backend = kernels::make_backend(kernels::Device::kCpu, 1);
  const int B = 2, T = 5;
  model::Gpt gpt(config, *backend, B, T, {.layout = {.recompute = recompute}});
  init_with_noise(gpt, 3);
  const auto tokens = random_tokens(2 * B * T, config.vocab, 1);
  const auto targets = random_tokens(2 * B * T, config.vocab, 2);
  AccumulatedStep step;
  gpt.zero_gradients();
  for (int m = 0; m < 2; ++m) {
    step.losses.push_back(gpt.forward(tokens.data() + m * B * T, targets.data() + m * B * T));
    gpt.backward(1.0f / (2 * B * T), [&](size_t offset) { step.final_offsets.push_back(offset); });
  }
  step.gradients.resize(gpt.params().total_count());
  backend->copy_to_host(step.gradients.data(), gpt.gradients(), step.gradients.size());
  return step;
}

}  // namespace

TEST(GptRecompute, LossAndEveryGradientElementAreBitIdenticalToKeepingActivations) {
  for (int layers : {2, 3}) {
    const auto config = tiny_config(layers);
    const auto kept = accumulate_two_micro_batches(config, model::Recompute::kNone);
    const auto recomputed = accumulate_two_micro_batches(config, model::Recompute::kFull);
    ASSERT_EQ(kept.losses.size(), recomputed.losses.size());
    for (size_t m = 0; m < kept.losses.size(); ++m) EXPECT_EQ(kept.losses[m], recomputed.losses[m]) << layers;
    ASSERT_EQ(kept.gradients.size(), recomputed.gradients.size());
    size_t nonzero = 0;
    for (size_t i = 0; i < kept.gradients.size(); ++i) {
      EXPECT_EQ(kept.gradients[i], recomputed.gradients[i]) << "layers " << layers << ", element " << i;
      nonzero += kept.gradients[i] != 0.0f;
    }
    // The comparison means something only if the gradient does (padded wte rows stay zero).
    EXPECT_GT(nonzero, kept.gradients.size() / 2);
  }
}

TEST(GptRecompute, GradsFinalOffsetsAreTheSameSequence) {
  const auto config = tiny_config(3);
  const auto kept = accumulate_two_micro_batches(config, model::Recompute::kNone);
  const auto recomputed = accumulate_two_micro_batches(config, model::Recompute::kFull);
  EXPECT_EQ(kept.final_offsets, recomputed.final_offsets);
  // ln_f, three blocks, the embeddings: per micro-batch, monotone decreasing, 0 last.
  ASSERT_EQ(recomputed.final_offsets.size(), 2u * 5u);
  for (size_t i = 0; i < recomputed.final_offsets.size(); ++i) {
    if (i % 5 == 4) {
      EXPECT_EQ(recomputed.final_offsets[i], 0u);
    } else {
      EXPECT_GT(recomputed.final_offsets[i], recomputed.final_offsets[i + 1]);
    }
  }
}

TEST(GptRecompute, EstimateShrinksAndMatchesTheAllocatedArena) {
  auto backend = kernels::make_backend(kernels::Device::kCpu, 1);
  const int B = 2, T = 5;
  for (int layers : {1, 2, 3}) {
    const auto config = tiny_config(layers);
    const std::size_t scratch = backend->attention_scratch_size(B, T, config.heads);
    const std::size_t none = model::activation_floats(config, B, T, scratch, {.recompute = model::Recompute::kNone});
    const std::size_t full = model::activation_floats(config, B, T, scratch, {.recompute = model::Recompute::kFull});
    if (layers >= 2) {
      EXPECT_LT(full, none) << layers;
    } else {
      EXPECT_EQ(full, none);  // one block: its workspace is its own activations
    }
    // The constructor checks that carving the arena used exactly the estimated floats.
    model::Gpt kept(config, *backend, B, T, {.layout = {.recompute = model::Recompute::kNone}});
    model::Gpt recomputed(config, *backend, B, T, {.layout = {.recompute = model::Recompute::kFull}});
    EXPECT_EQ(kept.activation_bytes(), none * sizeof(float));
    EXPECT_EQ(recomputed.activation_bytes(), full * sizeof(float));
  }
}

TEST(GptRecompute, Gpt2SmallEstimateShrinksByElevenBlocksOfIntermediates) {
  // GPT-2 124M: L = 12, NH = 12, C = 768, Vp = 50304; micro-batch B = 4, T = 1024.
  //   BTC = 4 * 1024 * 768 = 3,145,728    BT = 4,096    lse = B NH T = 49,152
  //   one block's intermediates (everything but its output; attention keeps the row
  //   log-sum-exp, not the B NH T^2 probabilities):
  //     15 BTC + 4 BT + lse = 47,185,920 + 16,384 + 49,152 = 47,251,456 floats
  //   kNone keeps L of them, kFull one: saving (L - 1) * 47,251,456 = 519,766,016 floats
  //     = 2,079,064,064 bytes (1.94 GiB).
  //   kNone total = BTC (encoded) + L (16 BTC + 4 BT + lse) + BTC (ln_f) + 2 BT + BT Vp
  //                 + BT (losses) + 2 BT (the cross-entropy's row max and sum of exp)
  //                 + 10 BTC (backward: dresidual, dln, dqkv, datty, dup) + scratch
  //     = 3,145,728 + 604,766,208 + 3,145,728 + 8,192 + 206,045,184 + 4,096 + 8,192
  //       + 31,457,280 + 100,663,296 = 949,243,904 floats (3,796,975,616 bytes, 3.54 GiB)
  //   kFull total = 949,243,904 - 519,766,016 = 429,477,888 floats (1,717,911,552 bytes,
  //     1.60 GiB)
  // The attention scratch is the CPU backend's (2 B NH T^2: P and dS of one layer at a time);
  // the saving does not depend on it.
  const model::GptConfig gpt2_small{12, 12, 768, 1024, 50257, 50304};
  const std::size_t scratch = std::size_t{2} * 4 * 12 * 1024 * 1024;
  const std::size_t none = model::activation_floats(gpt2_small, 4, 1024, scratch, {.recompute = model::Recompute::kNone});
  const std::size_t full = model::activation_floats(gpt2_small, 4, 1024, scratch, {.recompute = model::Recompute::kFull});
  EXPECT_EQ(none - full, 519'766'016u);
  EXPECT_EQ(none, 949'243'904u);
  EXPECT_EQ(full, 429'477'888u);
  // The default is kNone, what every caller had before recomputation existed.
  EXPECT_EQ(model::activation_floats(gpt2_small, 4, 1024, scratch), none);
}

TEST(ActivationEstimate, SequenceParallelKeepsTheOwnRowsOutsideTheMatmuls) {
  // GPT-2 124M, B = 4, T = 1024, one stage, tp = 2 (BTC = 3,145,728, BT = 4,096). Sequence
  // parallelism splits, per block, residual2 and the output (BTC/2 each) and the 4 LayerNorm
  // statistics (BT/2 each); per slot the stage input and ln_f's 2 statistics; the residual
  // gradient. Saved under kNone:
  //   L (BTC + 2 BT) + BTC/2 (input) + BT (ln_f statistics) + BTC/2 (dresidual)
  //     = 12 * 3,153,920 + 1,572,864 + 4,096 + 1,572,864 = 40,996,864 floats
  // and under kFull: the shared workspace's residual2 and statistics (BTC/2 + 2 BT), the kept
  // block outputs (L BTC/2) and the same per-slot and scratch savings:
  //     1,581,056 + 18,874,368 + 3,149,824 = 23,605,248 floats.
  // With tp = 1 the flag changes nothing.
  const model::GptConfig gpt2_small{12, 12, 768, 1024, 50257, 50304};
  const std::size_t scratch = std::size_t{2} * 4 * 6 * 1024 * 1024;  // the CPU backend's at tp = 2
  auto floats = [&](int tp, bool sp, model::Recompute recompute) {
    return model::activation_floats(gpt2_small, 4, 1024, scratch,
                                    {.tp = tp, .recompute = recompute, .sequence_parallel = sp});
  };
  using model::Recompute;
  EXPECT_EQ(floats(2, false, Recompute::kNone) - floats(2, true, Recompute::kNone), 40'996'864u);
  EXPECT_EQ(floats(2, false, Recompute::kFull) - floats(2, true, Recompute::kFull), 23'605'248u);
  EXPECT_EQ(floats(1, true, Recompute::kNone), floats(1, false, Recompute::kNone));
}
