// The stall watchdog (run.stall_timeout): a rank that makes no progress for that long ends the
// job, saying where it was, instead of waiting until the allocation's time limit. A rank waits
// forever when a peer is stuck or gone without the job ending: a lost NCCL collective, a hung file
// system, a GPU fault, a task that died under srun without --kill-on-bad-exit.
//
// The trainer marks where the rank is as it goes (RankPosition: a few numbers, copied under a
// mutex, no allocation: a mark per pipeline action). A thread wakes a few times a timeout and,
// when the last mark is older than the timeout, calls the stall action once with the position
// and its age. The ranks waiting for a stuck peer show a communication (a reduction, a send or
// receive); the stuck one shows what it was doing. Which rank fires first is a matter of
// microseconds to seconds, so each says only where it is.
// Time the process spends stopped (SIGSTOP, a Slurm suspend) does not count: the thread sees its
// own wake-up come late and moves the mark forward by the delay.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace trident::train {

enum class Activity {
  kStartUp,             // device, communicators, model memory
  kLoadingCheckpoint,
  kForward,             // of micro_batch (a model chunk's, with the interleaved schedule)
  kBackward,
  kReceiveActivations,  // of micro_batch, from pipeline stage `peer`
  kSendActivations,     // to `peer`
  kReceiveGradient,     // the output gradient of micro_batch, from `peer`
  kSendGradient,        // the input gradient, to `peer`
  kGradientReduction,   // the data-parallel buckets, tied embedding, sequence-parallel sums
  kLossAndNorm,         // the loss, gradient norm and overflow verdict
  kOptimizer,           // AdamW and ZeRO-1's parameter gather
  kValidation,          // micro_batch counts the validation's micro-batches from 0
  kStopAgreement,       // whether a signal asked any rank to stop
  kCheckpointWrite,
  kFinishing,           // after the last step: the end-of-run reports, run.dir/final-params.h5
};

struct RankPosition {
  Activity activity = Activity::kStartUp;
  int64_t step = 0;      // the step in progress (1-based); 0 before the first
  int micro_batch = -1;  // -1: none
  int chunk = -1;        // the model chunk (interleaved schedule); -1: the only one
  int peer = -1;         // the pipeline stage sent to or received from; -1: none
};

// "step 12: receiving micro-batch 3's activations from pipeline stage 0", "start-up", ...
std::string describe(const RankPosition& position);

class StallWatchdog {
 public:
  using Clock = std::chrono::steady_clock;
  // Called once, from the watchdog's thread, with the last position and how long ago it was
  // marked. The application's action ends the process; one that returns stops the watching.
  using StallAction = std::function<void(const RankPosition& position, double seconds)>;

  // timeout_seconds > 0. The position starts as kStartUp, marked now.
  StallWatchdog(double timeout_seconds, StallAction action);
  ~StallWatchdog();  // stops the thread (without calling the action)
  StallWatchdog(const StallWatchdog&) = delete;
  StallWatchdog& operator=(const StallWatchdog&) = delete;

  // The rank is now at `position`.
  void mark(const RankPosition& position);
  double timeout_seconds() const { return timeout_; }

  // The last position and its age in seconds when that age exceeds the timeout at `now`;
  // empty otherwise. (The thread's test; public for the unit tests.)
  std::optional<std::pair<RankPosition, double>> stalled_at(Clock::time_point now) const;

 private:
  void watch();
  const double timeout_;
  const StallAction action_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  RankPosition position_;
  Clock::time_point marked_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once everything above is set
};

}  // namespace trident::train
