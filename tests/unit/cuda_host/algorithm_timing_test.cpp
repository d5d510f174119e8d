// The choice among timed cuBLASLt answers (kernels/cuda/algorithm_timing.h).
#include "kernels/cuda/algorithm_timing.h"

#include <gtest/gtest.h>

namespace trident::kernels::cuda {
namespace {

TEST(FastestAnswer, KeepsTheHeuristicsFirstUnlessAnotherBeatsItByTheMargin) {
  EXPECT_EQ(fastest_answer({1.00f, 0.99f, 1.20f}, 0.02f), 0);  // 1% faster: within the noise
  EXPECT_EQ(fastest_answer({1.00f, 0.97f, 0.90f}, 0.02f), 2);  // the fastest, not the first beyond
  EXPECT_EQ(fastest_answer({1.00f, 0.90f, 0.95f}, 0.02f), 1);
  EXPECT_EQ(fastest_answer({0.50f}, 0.02f), 0);
  EXPECT_EQ(fastest_answer({1.00f, 0.90f}, 0.0f), 1);
}

TEST(FastestAnswer, SkipsAnswersThatFailed) {
  EXPECT_EQ(fastest_answer({-1.0f, 1.10f, 1.05f}, 0.02f), 2);  // the first failed: the fastest that ran
  EXPECT_EQ(fastest_answer({1.00f, -1.0f, 0.80f}, 0.02f), 2);
  EXPECT_EQ(fastest_answer({1.00f, -1.0f}, 0.02f), 0);
  EXPECT_EQ(fastest_answer({-1.0f, -1.0f}, 0.02f), -1);
  EXPECT_EQ(fastest_answer({}, 0.02f), -1);
}

TEST(ChosenAnswer, ReadsBackWhatItWrites) {
  const TimedMatmulShape shape{1280, 8192, 5120, 8, 3, 0.1234f, 0.1011f};
  const std::string text = format_chosen_answer(shape);
  EXPECT_EQ(text, "answer 3 of 8 (first 0.1234 ms, chosen 0.1011 ms)");
  const auto read = parse_chosen_answer(text);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->chosen, 3);
  EXPECT_EQ(read->answers, 8);
  EXPECT_FLOAT_EQ(read->first_ms, 0.1234f);
  EXPECT_FLOAT_EQ(read->chosen_ms, 0.1011f);
}

TEST(ChosenAnswer, RefusesWhatIsNotOne) {
  EXPECT_FALSE(parse_chosen_answer("answer 8 of 8 (first 1.0000 ms, chosen 1.0000 ms)"));   // no such answer
  EXPECT_FALSE(parse_chosen_answer("answer -1 of 8 (first 1.0000 ms, chosen 1.0000 ms)"));
  EXPECT_FALSE(parse_chosen_answer("answer 1 of 8"));
  EXPECT_FALSE(parse_chosen_answer("answer 1 of 8 (first 1.0000 ms, chosen 1.0000 ms) and more"));
  EXPECT_FALSE(parse_chosen_answer(""));
}

}  // namespace
}  // namespace trident::kernels::cuda
