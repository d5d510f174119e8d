// ProgressLine: the line rank 0 prints every log.every steps, and the figures behind it
// (tokens/s, MFU, ETA). ETA uses the mean step time after the first step, which pays for
// warm-up (page faults, thread start) and would skew it.
#pragma once

#include <cstdint>
#include <string>

namespace trident::train {

class ProgressLine {
 public:
  // peak_flops: the whole job's peak (per-rank peak times ranks); 0 = unknown (MFU not shown).
  ProgressLine(int64_t total_steps, double tokens_per_step, double flops_per_token, double peak_flops);
  void record(double step_seconds);
  // Model FLOPs utilisation of a step that took `seconds` (NaN when the peak is unknown).
  double mfu(double seconds) const;
  std::string line(int64_t step, double loss, double lr, double grad_norm, double seconds,
                   double val_loss) const;

 private:
  int64_t total_steps_;
  double tokens_per_step_;
  double flops_per_token_;
  double peak_flops_;
  int64_t recorded_ = 0;
  double seconds_after_first_ = 0.0;
  double first_seconds_ = 0.0;
};

// "1h02m", "3m05s", "12s".
std::string format_duration(double seconds);

}  // namespace trident::train
