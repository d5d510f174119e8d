// Dynamic loss scaling (src/train/loss_scaler.h): skip and back off on overflow, grow after a
// clean interval, stay within [min, max], and resume from checkpointed state.
#include "src/train/loss_scaler.h"

#include <gtest/gtest.h>

namespace trident::train {
namespace {

TEST(LossScaler, OverflowSkipsTheStepAndBacksOff) {
  LossScaler scaler({.initial_scale = 1024.0, .growth_interval = 3});
  EXPECT_TRUE(scaler.update(false));
  EXPECT_FALSE(scaler.update(true));
  EXPECT_EQ(scaler.scale(), 512.0);
  EXPECT_EQ(scaler.clean_steps(), 0);  // an overflow restarts the clean interval
}

TEST(LossScaler, GrowsAfterEachCleanInterval) {
  LossScaler scaler({.initial_scale = 1024.0, .growth_interval = 3});
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(scaler.update(false));
  EXPECT_EQ(scaler.scale(), 1024.0);
  EXPECT_TRUE(scaler.update(false));
  EXPECT_EQ(scaler.scale(), 2048.0);
  for (int i = 0; i < 3; ++i) scaler.update(false);
  EXPECT_EQ(scaler.scale(), 4096.0);
}

TEST(LossScaler, StaysWithinItsBounds) {
  LossScaler low({.initial_scale = 2.0, .min_scale = 1.0});
  for (int i = 0; i < 5; ++i) low.update(true);
  EXPECT_EQ(low.scale(), 1.0);
  LossScaler high({.initial_scale = 8.0, .growth_interval = 1, .max_scale = 16.0});
  for (int i = 0; i < 5; ++i) high.update(false);
  EXPECT_EQ(high.scale(), 16.0);
}

TEST(LossScaler, RestoredStateContinuesLikeTheOriginal) {
  LossScaler original({.initial_scale = 1024.0, .growth_interval = 4});
  for (int i = 0; i < 6; ++i) original.update(i == 1);
  LossScaler resumed({.initial_scale = 1024.0, .growth_interval = 4});
  resumed.restore(original.scale(), original.clean_steps());
  for (int i = 0; i < 7; ++i) {
    const bool overflow = i == 5;
    EXPECT_EQ(original.update(overflow), resumed.update(overflow));
    EXPECT_EQ(original.scale(), resumed.scale());
    EXPECT_EQ(original.clean_steps(), resumed.clean_steps());
  }
}

}  // namespace
}  // namespace trident::train
