// TimingBackend (run.profile): timing changes no result, counts every kernel call under its
// name while measuring and none while not, and passes the fused matmul pairs on whole, so that a
// backend which fuses them (the CUDA backend's epilogues) still does under the profile.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/timing_backend.h"
#include "src/model/gpt.h"
#include "tests/unit/model/tiny_gpt.h"

using namespace trident;

using test_support::init_with_noise;
using test_support::random_tokens;
using test_support::tiny_config;

namespace {

// Counts the fused pairs that reach it whole (Backend's defaults would run them as their parts
// on the caller, and this would see none).
class PairCounter final : public kernels::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void matmul_gelu_forward(kernels::ActPtr out, kernels::ActPtr pre, kernels::ConstActPtr inp,
                           kernels::ConstActPtr weight, kernels::ConstActPtr bias, int N, int C, int OC) override {
    ++gelu_forward_pairs;
    inner().matmul_gelu_forward(out, pre, inp, weight, bias, N, C, OC);
  }
  void matmul_backward_through_gelu(kernels::ActPtr dpre, float* dweight, float* dbias, kernels::ConstActPtr dout,
                                    kernels::ConstActPtr inp, kernels::ConstActPtr weight, kernels::ConstActPtr pre,
                                    int N, int C, int OC) override {
    ++gelu_backward_pairs;
    inner().matmul_backward_through_gelu(dpre, dweight, dbias, dout, inp, weight, pre, N, C, OC);
  }
  int gelu_forward_pairs = 0;
  int gelu_backward_pairs = 0;
};

struct Pass {
  double loss = 0.0;
  std::vector<float> gradients;
};

// One forward and backward of the tiny model on `backend`.
Pass forward_backward(kernels::Backend& backend, const model::GptConfig& config) {
  const int B = 2, T = 5;
  model::Gpt gpt(config, backend, B, T);
  init_with_noise(gpt, 3);
  const auto tokens = random_tokens(B * T, config.vocab, 1);
  const auto targets = random_tokens(B * T, config.vocab, 2);
  gpt.zero_gradients();
  Pass pass;
  pass.loss = gpt.forward(tokens.data(), targets.data());
  gpt.backward(1.0f / (B * T), {});
  pass.gradients.resize(gpt.params().total_count());
  backend.copy_to_host(pass.gradients.data(), gpt.gradients(), pass.gradients.size());
  return pass;
}

}  // namespace

TEST(TimingBackend, CountsEveryKernelCallWithoutChangingAnyResult) {
  const auto config = tiny_config(3);
  auto plain = kernels::make_backend(kernels::Device::kCpu, 1);
  const Pass reference = forward_backward(*plain, config);

  auto inner = kernels::make_backend(kernels::Device::kCpu, 1);
  PairCounter pairs(*inner);
  kernels::TimingBackend timing(pairs);
  timing.set_measuring(true);
  const Pass timed = forward_backward(timing, config);

  EXPECT_EQ(timed.loss, reference.loss);
  ASSERT_EQ(timed.gradients.size(), reference.gradients.size());
  for (size_t i = 0; i < reference.gradients.size(); ++i) EXPECT_EQ(timed.gradients[i], reference.gradients[i]) << i;

  // Per block: one attention each way, the MLP's pairs whole; the final LayerNorm and the loss once.
  const auto& totals = timing.totals();
  const auto calls = [&](const std::string& op) {
    const auto it = totals.find(op);
    return it == totals.end() ? int64_t{-1} : it->second.calls;
  };
  const int64_t layers = config.layers;
  EXPECT_EQ(calls("attention_forward"), layers);
  EXPECT_EQ(calls("attention_backward"), layers);
  EXPECT_EQ(calls("matmul_gelu_forward 8->32"), layers);
  EXPECT_EQ(calls("matmul_backward_through_gelu 32->8"), layers);
  EXPECT_EQ(calls("matmul_forward 8->24"), layers);  // qkv
  EXPECT_EQ(calls("cross_entropy_forward"), 1);
  EXPECT_EQ(pairs.gelu_forward_pairs, layers);
  EXPECT_EQ(pairs.gelu_backward_pairs, layers);
  // The pairs' parts are not timed again on their own.
  EXPECT_EQ(calls("gelu_forward"), -1);
  for (const auto& [op, t] : totals) {
    EXPECT_GT(t.calls, 0) << op;
    EXPECT_GE(t.seconds, 0.0) << op;
  }
}

TEST(TimingBackend, TimesNothingWhileNotMeasuring) {
  auto inner = kernels::make_backend(kernels::Device::kCpu, 1);
  kernels::TimingBackend timing(*inner);
  EXPECT_FALSE(timing.measuring());  // as made: the trainer turns it on for the measured steps
  forward_backward(timing, tiny_config(2));
  EXPECT_TRUE(timing.totals().empty());
  timing.set_measuring(true);
  forward_backward(timing, tiny_config(2));
  EXPECT_FALSE(timing.totals().empty());
  timing.reset();
  EXPECT_TRUE(timing.totals().empty());
}

TEST(KernelTimeTable, ListsTheSlowestFirstPerStepWithTheRestOfTheStep) {
  const kernels::KernelTimes totals = {{"add", {0.03, 6}}, {"attention_forward", {0.3, 3}}};
  // 3 steps of 0.5 s: attention 100 ms a step (20%), add 10 ms (2%), the rest 390 ms.
  const std::string table = kernels::kernel_time_table(totals, 3, 1.5, "title:");
  EXPECT_EQ(table.rfind("title:\n", 0), 0u) << table;
  const auto attention = table.find("attention_forward");
  const auto add = table.find("  add ");
  ASSERT_NE(attention, std::string::npos) << table;
  ASSERT_NE(add, std::string::npos) << table;
  EXPECT_LT(attention, add) << table;
  EXPECT_NE(table.find("100.000   20.0%        1.0"), std::string::npos) << table;
  EXPECT_NE(table.find("10.000    2.0%        2.0"), std::string::npos) << table;
  EXPECT_NE(table.find("110.000   22.0%"), std::string::npos) << table;  // all kernels
  EXPECT_NE(table.find("390.000   78.0%"), std::string::npos) << table;  // outside the kernels
  EXPECT_NE(table.find("500.000"), std::string::npos) << table;          // the step
}
