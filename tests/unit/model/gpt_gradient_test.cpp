// Whole-model checks of the hand-written backward on a tiny GPT: central finite differences of
// the loss against the analytic gradient of every tensor, micro-batch accumulation, and the
// logits' gradient made by a training forward.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <optional>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "src/model/gpt.h"
#include "tests/unit/model/tiny_gpt.h"

using namespace trident;

using test_support::init_with_noise;
using test_support::random_tokens;
using test_support::tiny_config;

TEST(GptGradient, EveryTensorMatchesCentralFiniteDifferences) {
  auto backend = kernels::make_backend(kernels::Device::kCpu, 1);
  const auto config = tiny_config();
  const int B = 2, T = 5;
  model::Gpt gpt(config, *backend, B, T);
  init_with_noise(gpt, 3);
  const auto tokens = random_tokens(B * T, config.vocab, 1);
  const auto targets = random_tokens(B * T, config.vocab, 2);
  const double n_tokens = B * T;

  gpt.zero_gradients();
  gpt.forward(tokens.data(), targets.data());
  gpt.backward(static_cast<float>(1.0 / n_tokens), {});
  std::vector<float> grads(gpt.gradients(), gpt.gradients() + gpt.params().total_count());

  float* params = gpt.parameters().f32();
  auto loss = [&] { return gpt.forward(tokens.data(), targets.data()) / n_tokens; };
  std::mt19937 rng(11);
  int checked = 0;
  for (const auto& t : gpt.params().tensors()) {
    // The largest-gradient element of each tensor plus two random ones.
    size_t largest = 0;
    for (size_t i = 1; i < t.count; ++i)
      if (std::fabs(grads[t.offset + i]) > std::fabs(grads[t.offset + largest])) largest = i;
    std::uniform_int_distribution<size_t> pick(0, t.count - 1);
    for (size_t i : {largest, pick(rng), pick(rng)}) {
      const size_t at = t.offset + i;
      const float saved = params[at];
      const float eps = 1e-2f;
      params[at] = saved + eps;
      const double up = loss();
      params[at] = saved - eps;
      const double down = loss();
      params[at] = saved;
      const double numeric = (up - down) / (2.0 * eps);
      // fp32 forward: the loss (~2.4) carries ~1e-7 relative rounding, i.e. ~1e-5 in the
      // difference quotient at most, and the O(eps^2) truncation a fraction of a percent.
      // Measured: every check within 0.27 of 2e-5 + 0.1%. The 2e-4 + 2% this had was ~55 times
      // the need: five checks would have passed a zero gradient, nine half of one.
      EXPECT_NEAR(grads[at], numeric, 2e-5 + 1e-3 * std::fabs(numeric)) << t.spec.name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 40);
}

TEST(GptGradient, PaddedVocabularyRowsGetNoGradient) {
  auto backend = kernels::make_backend(kernels::Device::kCpu, 1);
  const auto config = tiny_config();
  model::Gpt gpt(config, *backend, 2, 5);
  init_with_noise(gpt, 3);
  const auto tokens = random_tokens(10, config.vocab, 1);
  gpt.zero_gradients();
  gpt.forward(tokens.data(), tokens.data());
  gpt.backward(0.1f, {});
  const auto& wte = gpt.params().find("wte");
  for (size_t i = static_cast<size_t>(config.vocab) * config.hidden; i < wte.count; ++i) {
    EXPECT_EQ(gpt.gradients()[wte.offset + i], 0.0f);
  }
}

TEST(GptGradient, TwoMicroBatchesAccumulateToTheGradientOfOneBatch) {
  auto backend = kernels::make_backend(kernels::Device::kCpu, 1);
  const auto config = tiny_config();
  const int T = 6;
  const auto tokens = random_tokens(4 * T, config.vocab, 7);
  const auto targets = random_tokens(4 * T, config.vocab, 8);

  model::Gpt whole(config, *backend, 4, T);
  init_with_noise(whole, 9);
  whole.zero_gradients();
  const double loss_whole = whole.forward(tokens.data(), targets.data());
  whole.backward(1.0f / (4 * T), {});

  model::Gpt half(config, *backend, 2, T);
  init_with_noise(half, 9);
  half.zero_gradients();
  double loss_halves = 0;
  std::vector<size_t> final_offsets;
  for (int m = 0; m < 2; ++m) {
    loss_halves += half.forward(tokens.data() + m * 2 * T, targets.data() + m * 2 * T);
    half.backward(1.0f / (4 * T), [&](size_t offset) { final_offsets.push_back(offset); });
  }
  EXPECT_NEAR(loss_whole, loss_halves, 1e-5 * std::fabs(loss_whole));
  for (size_t i = 0; i < whole.params().total_count(); ++i) {
    // Same sums in another order: fp32 reassociation only.
    EXPECT_NEAR(whole.gradients()[i], half.gradients()[i], 1e-6 + 1e-4 * std::fabs(whole.gradients()[i])) << i;
  }
  // The bucket callback reports monotonically decreasing offsets ending at 0 in each backward.
  ASSERT_FALSE(final_offsets.empty());
  EXPECT_EQ(final_offsets.back(), 0u);
  for (size_t i = 1; i < final_offsets.size() / 2; ++i) EXPECT_LT(final_offsets[i], final_offsets[i - 1]);
}

// A training forward (training_dloss given) makes the logits' gradient with the loss
// (Backend::cross_entropy_forward_backward); backward then starts from it instead of making it.
// Two micro-batches, the first with a training forward and the second without (the slot's mark
// must not outlive its forward), against both without: the same losses and gradients, bit for bit.
// A backward that made the gradient again over the one already there would not give them.
TEST(GptGradient, TrainingForwardMakesTheLogitGradientWithTheSameBits) {
  auto backend = kernels::make_backend(kernels::Device::kCpu, 1);
  const auto config = tiny_config();
  const int B = 2, T = 5;
  const auto tokens = random_tokens(2 * B * T, config.vocab, 4);
  const auto targets = random_tokens(2 * B * T, config.vocab, 5);
  const float dloss = 1.0f / (2 * B * T);
  auto run = [&](bool training_first) {
    model::Gpt gpt(config, *backend, B, T);
    init_with_noise(gpt, 6);
    gpt.zero_gradients();
    std::vector<double> losses;
    for (int m = 0; m < 2; ++m) {
      const std::optional<float> training = training_first && m == 0 ? std::optional<float>(dloss) : std::nullopt;
      losses.push_back(gpt.forward(0, 0, tokens.data() + m * B * T, targets.data() + m * B * T, training));
      gpt.backward(dloss, {});
    }
    std::vector<float> grads(gpt.gradients(), gpt.gradients() + gpt.params().total_count());
    return std::make_pair(losses, grads);
  };
  const auto plain = run(false);
  const auto training = run(true);
  EXPECT_EQ(training.first, plain.first);
  ASSERT_EQ(training.second.size(), plain.second.size());
  std::size_t differing = 0;
  for (std::size_t i = 0; i < plain.second.size(); ++i) differing += training.second[i] != plain.second[i] ? 1 : 0;
  EXPECT_EQ(differing, 0u) << "gradient elements differing";
}

// The gradient a training forward made holds for its dloss only: another is a caller's error.
TEST(GptGradient, BackwardWithAnotherDlossThanTheTrainingForwardsThrows) {
  auto backend = kernels::make_backend(kernels::Device::kCpu, 1);
  const auto config = tiny_config();
  model::Gpt gpt(config, *backend, 2, 5);
  init_with_noise(gpt, 3);
  const auto tokens = random_tokens(10, config.vocab, 1);
  gpt.zero_gradients();
  gpt.forward(0, 0, tokens.data(), tokens.data(), 0.1f);
  EXPECT_THROW(gpt.backward(0.2f, {}), std::logic_error);
}
