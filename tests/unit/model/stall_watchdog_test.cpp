// The stall watchdog: quiet while marks come, its action once a mark is older than the timeout,
// with the last position; the message the application prints names the step and action.
#include "src/train/stall_watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "src/app/stall_exit.h"

namespace trident::train {
namespace {

using std::chrono::milliseconds;

TEST(StallWatchdog, DescribesWhereTheRankIs) {
  EXPECT_EQ(describe({}), "start-up (devices, communicators, model)");
  EXPECT_EQ(describe({.activity = Activity::kForward, .step = 12, .micro_batch = 3}),
            "step 12: forward of micro-batch 3");
  EXPECT_EQ(describe({.activity = Activity::kReceiveActivations, .step = 4, .micro_batch = 1, .chunk = 1, .peer = 0}),
            "step 4: receiving the activations of micro-batch 1 (model chunk 1) from pipeline stage 0");
  EXPECT_EQ(describe({.activity = Activity::kSendGradient, .step = 4, .micro_batch = 2, .peer = 1}),
            "step 4: sending the gradient of micro-batch 2 to pipeline stage 1");
  EXPECT_EQ(describe({.activity = Activity::kValidation, .step = 100, .micro_batch = 17}),
            "step 100: validation, its micro-batch 17");
  EXPECT_EQ(describe({.activity = Activity::kCheckpointWrite, .step = 500}), "step 500: writing its checkpoint");
  EXPECT_EQ(describe({.activity = Activity::kFinishing, .step = 600}),
            "finishing after step 600 (end-of-run reports, final parameters)");
}

TEST(StallWatchdog, StalledOnlyWhenTheLastMarkIsOlderThanTheTimeout) {
  StallWatchdog watchdog(1000.0, [](const RankPosition&, double) { ADD_FAILURE() << "fired"; });
  const RankPosition position{.activity = Activity::kBackward, .step = 7, .micro_batch = 2};
  const auto before = StallWatchdog::Clock::now();
  watchdog.mark(position);
  EXPECT_FALSE(watchdog.stalled_at(before + std::chrono::seconds(999)));
  const auto stall = watchdog.stalled_at(StallWatchdog::Clock::now() + std::chrono::seconds(1001));
  ASSERT_TRUE(stall);
  EXPECT_EQ(describe(stall->first), "step 7: backward of micro-batch 2");
  EXPECT_GT(stall->second, 1000.0);
  EXPECT_LT(stall->second, 1100.0);
}

// The thread: marks every 10 ms keep a 0.2 s watchdog quiet; once they stop, it fires once with
// the last position. (The bounds are generous: a loaded machine only delays the firing.)
TEST(StallWatchdog, FiresOnceWhenMarksStop) {
  std::mutex mutex;
  int fired = 0;
  RankPosition reported;
  StallWatchdog watchdog(0.2, [&](const RankPosition& position, double seconds) {
    const std::lock_guard<std::mutex> lock(mutex);
    ++fired;
    reported = position;
    EXPECT_GT(seconds, 0.2);
  });
  for (int i = 0; i < 50; ++i) {  // 0.5 s of progress
    watchdog.mark({.activity = Activity::kForward, .step = i + 1, .micro_batch = 0});
    std::this_thread::sleep_for(milliseconds(10));
    const std::lock_guard<std::mutex> lock(mutex);
    if (fired != 0) break;
  }
  {
    const std::lock_guard<std::mutex> lock(mutex);
    EXPECT_EQ(fired, 0) << "fired while marks came every 10 ms";
  }
  watchdog.mark({.activity = Activity::kLossAndNorm, .step = 51});
  for (int i = 0; i < 1000; ++i) {  // up to 10 s
    std::this_thread::sleep_for(milliseconds(10));
    const std::lock_guard<std::mutex> lock(mutex);
    if (fired != 0) break;
  }
  std::this_thread::sleep_for(milliseconds(300));  // a second call would come within this
  const std::lock_guard<std::mutex> lock(mutex);
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(describe(reported), "step 51: the loss and gradient-norm reductions");
}

TEST(StallWatchdog, DestroyingItStopsTheThreadWithoutFiring) {
  std::atomic<bool> fired{false};
  const auto start = std::chrono::steady_clock::now();
  { StallWatchdog watchdog(3600.0, [&](const RankPosition&, double) { fired = true; }); }
  EXPECT_FALSE(fired);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));  // not a poll period's wait
}

TEST(StallExit, MessageSaysHowLongWhereAndWhatToDo) {
  EXPECT_EQ(app::stall_message({.activity = Activity::kReceiveGradient, .step = 4, .micro_batch = 3, .peer = 1},
                               1800.4, 1800, "runs/a/checkpoints"),
            "no progress for 1800 s (run.stall_timeout = 1800) at step 4: receiving the gradient of micro-batch 3 "
            "from pipeline stage 1. A rank of the job is stuck or has died (the ranks that wait for it report a "
            "reduction, a send or a receive; a stuck one what it was doing); ending the job with exit status 4. "
            "Rerun the same command to resume from the newest checkpoint in runs/a/checkpoints");
}

}  // namespace
}  // namespace trident::train
