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

}  // namespace
}  // namespace trident::kernels::cuda
