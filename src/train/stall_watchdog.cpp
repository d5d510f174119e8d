#include "src/train/stall_watchdog.h"

#include <algorithm>  // std::clamp
#include <utility>

namespace trident::train {

std::string describe(const RankPosition& p) {
  const std::string micro = "micro-batch " + std::to_string(p.micro_batch) +
                            (p.chunk >= 0 ? " (model chunk " + std::to_string(p.chunk) + ")" : "");
  const std::string stage = "pipeline stage " + std::to_string(p.peer);
  std::string what;
  switch (p.activity) {
    case Activity::kStartUp: return "start-up (devices, communicators, model)";
    case Activity::kLoadingCheckpoint: return "reading the checkpoint to resume from";
    case Activity::kForward: what = "forward of " + micro; break;
    case Activity::kBackward: what = "backward of " + micro; break;
    case Activity::kReceiveActivations: what = "receiving the activations of " + micro + " from " + stage; break;
    case Activity::kSendActivations: what = "sending the activations of " + micro + " to " + stage; break;
    case Activity::kReceiveGradient: what = "receiving the gradient of " + micro + " from " + stage; break;
    case Activity::kSendGradient: what = "sending the gradient of " + micro + " to " + stage; break;
    case Activity::kGradientReduction: what = "the gradient reductions after backward"; break;
    case Activity::kLossAndNorm: what = "the loss and gradient-norm reductions"; break;
    case Activity::kOptimizer: what = "the optimizer update"; break;
    case Activity::kValidation: what = "validation, its micro-batch " + std::to_string(p.micro_batch); break;
    case Activity::kStopAgreement: what = "agreeing whether a signal asked to stop"; break;
    case Activity::kCheckpointWrite: what = "writing its checkpoint"; break;
    case Activity::kFinishing:
      return "finishing after step " + std::to_string(p.step) + " (end-of-run reports, final parameters)";
  }
  return "step " + std::to_string(p.step) + ": " + what;
}

StallWatchdog::StallWatchdog(double timeout_seconds, StallAction action)
    : timeout_(timeout_seconds), action_(std::move(action)), marked_(Clock::now()), thread_([this] { watch(); }) {}

StallWatchdog::~StallWatchdog() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void StallWatchdog::mark(const RankPosition& position) {
  const Clock::time_point now = Clock::now();
  const std::lock_guard<std::mutex> lock(mutex_);
  position_ = position;
  marked_ = now;
}

std::optional<std::pair<RankPosition, double>> StallWatchdog::stalled_at(Clock::time_point now) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  const double age = std::chrono::duration<double>(now - marked_).count();
  if (age <= timeout_) return std::nullopt;
  return std::pair{position_, age};
}

void StallWatchdog::watch() {
  // A few looks per timeout (a stall is reported within a quarter of it), at most one a second.
  const auto period = std::chrono::duration<double>(std::clamp(timeout_ / 4.0, 0.01, 1.0));
  // A look that comes this much later than due means the process did not run: stopped (SIGSTOP,
  // Slurm's suspend of a job) or the machine paused. That time is no rank's fault, so the mark
  // moves forward by it; otherwise every rank would end the job the moment it resumed.
  constexpr std::chrono::seconds kStoppedAfter{2};
  std::unique_lock<std::mutex> lock(mutex_);
  Clock::time_point due = Clock::now() + std::chrono::duration_cast<Clock::duration>(period);
  while (!stopping_) {
    wake_.wait_until(lock, due);
    if (stopping_) return;
    const Clock::time_point now = Clock::now();
    if (now - due > kStoppedAfter) marked_ += now - due;
    due = now + std::chrono::duration_cast<Clock::duration>(period);
    lock.unlock();
    const auto stall = stalled_at(Clock::now());
    if (stall) {
      action_(stall->first, stall->second);
      return;
    }
    lock.lock();
  }
}

}  // namespace trident::train
