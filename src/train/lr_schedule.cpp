#include "src/train/lr_schedule.h"

#include <cmath>
#include <numbers>

namespace trident::train {

double LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) {
    return peak * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  }
  // min_lr from decay_steps on, also where the decay ends as the warm-up does (warmup_steps ==
  // decay_steps, which the deck accepts: that once kept the peak for good).
  if (step >= decay_steps) return floor;
  // Here warmup_steps <= step < decay_steps: the division is by a positive count.
  const double progress =
      static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps - warmup_steps);
  return floor + (peak - floor) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace trident::train
