// Learning rate: linear warm-up to the peak, then cosine decay to a floor, then the floor.
#pragma once

#include <cstdint>

namespace trident::train {

struct LrSchedule {
  double peak = 0.0;
  double floor = 0.0;
  int64_t warmup_steps = 0;
  int64_t decay_steps = 0;  // step at which the cosine reaches the floor (>= warmup_steps)

  // Learning rate of 0-based step `step`: (step+1)/warmup * peak during warm-up, so the first
  // step already moves; then floor + (peak - floor) * (1 + cos(pi * progress)) / 2.
  double at(int64_t step) const;
};

}  // namespace trident::train
