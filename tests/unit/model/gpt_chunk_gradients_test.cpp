// With the interleaved schedule a rank holds several model chunks, and each chunk's last backward
// of the step reports, through grads_final, the offsets from which its gradients are final (the
// trainer starts the data-parallel buckets from them): only offsets within or above the chunk's
// own blocks, descending, and 0 (the embeddings) from chunk 0 alone.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/backend.h"
#include "src/model/gpt.h"
#include "tests/unit/model/tiny_gpt.h"

using namespace trident;

namespace {

std::vector<float> noise(std::size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> pick(0.0f, 0.1f);
  std::vector<float> v(n);
  for (auto& x : v) x = pick(rng);
  return v;
}

}  // namespace

TEST(GptChunkGradients, EachChunkReportsOnlyItsOwnBlocksAndAbove) {
  // 4 layers over 2 stages x 2 chunks: stage s holds layer s (chunk 0) and layer 2 + s (chunk 1).
  const model::GptConfig config = test_support::tiny_config(4);
  auto backend = kernels::make_backend(kernels::Device::kCpu, 1);
  const int B = 2, T = 5;
  for (int stage = 0; stage < 2; ++stage) {
    model::Gpt gpt(config, *backend, B, T, {.layout = {.pp = 2, .pp_rank = stage, .chunks = 2, .slots = 1}});
    test_support::init_with_noise(gpt, 3);
    const auto tokens = test_support::random_tokens(B * T, config.vocab, 1);
    const auto targets = test_support::random_tokens(B * T, config.vocab, 2);
    const std::size_t boundary = gpt.boundary_floats();
    gpt.zero_gradients();
    // Forward of both chunks (the inputs a previous virtual stage would send), then backward of
    // chunk 1 and chunk 0, as the interleaved schedule's last backwards come.
    for (int chunk = 0; chunk < 2; ++chunk) {
      if (!(stage == 0 && chunk == 0)) {
        const auto input = noise(boundary, 10 + chunk);
        backend->copy_to_device(gpt.stage_input(0, chunk).f32(), input.data(), boundary);
      }
      gpt.forward(0, chunk, tokens.data(), targets.data(), 1.0f / (B * T));
    }
    std::vector<std::vector<std::size_t>> reported(2);
    for (int chunk = 1; chunk >= 0; --chunk) {
      if (!(stage == 1 && chunk == 1)) {  // not the model's last chunk: the next virtual stage's gradient
        const auto grad = noise(boundary, 20 + chunk);
        backend->copy_to_device(gpt.output_grad(0, chunk).f32(), grad.data(), boundary);
      }
      gpt.backward(0, chunk, 1.0f / (B * T), [&](std::size_t offset) { reported[chunk].push_back(offset); });
    }
    const std::size_t chunk1_begin = gpt.params().find("block" + std::to_string(2 + stage) + ".ln1.weight").offset;
    const std::size_t chunk0_begin = gpt.params().find("block" + std::to_string(stage) + ".ln1.weight").offset;
    ASSERT_FALSE(reported[1].empty()) << "stage " << stage;
    for (std::size_t i = 0; i < reported[1].size(); ++i) {
      EXPECT_GE(reported[1][i], chunk1_begin) << "stage " << stage << ": chunk 1 reported below its blocks";
      if (i > 0) {
        EXPECT_LT(reported[1][i], reported[1][i - 1]);
      }
    }
    EXPECT_EQ(reported[1].back(), chunk1_begin) << "stage " << stage;
    if (stage == 1) {
      EXPECT_EQ(reported[1].front(), gpt.params().find("ln_f.weight").offset);  // the head first
    }
    ASSERT_EQ(reported[0].size(), 2u) << "stage " << stage;  // its one block, then everything
    EXPECT_EQ(reported[0][0], chunk0_begin);
    EXPECT_EQ(reported[0][1], 0u);
    EXPECT_LT(chunk0_begin, chunk1_begin);
  }
}
