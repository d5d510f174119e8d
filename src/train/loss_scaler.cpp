#include "src/train/loss_scaler.h"

#include <algorithm>

namespace trident::train {

LossScaler::LossScaler(const LossScalerSettings& settings) : settings_(settings), scale_(settings.initial_scale) {}

bool LossScaler::update(bool overflow) {
  if (overflow) {
    scale_ = std::max(settings_.min_scale, scale_ * settings_.backoff_factor);
    clean_steps_ = 0;
    return false;
  }
  if (++clean_steps_ >= settings_.growth_interval) {
    scale_ = std::min(settings_.max_scale, scale_ * settings_.growth_factor);
    clean_steps_ = 0;
  }
  return true;
}

void LossScaler::restore(double scale, int64_t clean_steps) {
  scale_ = std::clamp(scale, settings_.min_scale, settings_.max_scale);
  clean_steps_ = clean_steps;
}

}  // namespace trident::train
