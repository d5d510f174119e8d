// Dynamic loss scaling for fp16 training (issue 4; docs/model.md once fp16 lands).
//
// fp16 gradients underflow below ~6e-8, so the loss is multiplied by a large scale before
// backward and the gradients divided by it before the update. Too large a scale overflows
// instead: a step whose gradients hold an inf or a NaN (on any rank) is skipped and the scale
// backed off; after `growth_interval` clean steps in a row it grows again. This is the scheme
// of Micikevicius et al. (2018) and of PyTorch's GradScaler. Its state (scale, clean steps) is
// part of the training state and goes into checkpoints.
#pragma once

#include <cstdint>

namespace trident::train {

struct LossScalerSettings {
  double initial_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // clean steps before the scale grows
  double min_scale = 1.0;          // never below: a scale of 1 is no scaling
  double max_scale = 16777216.0;   // 2^24: fp32 master gradients stay far from overflow
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerSettings& settings = {});
  double scale() const { return scale_; }
  int64_t clean_steps() const { return clean_steps_; }
  // The scale cannot back off any further: an overflow now is not the scale's doing.
  bool at_minimum() const { return scale_ <= settings_.min_scale; }
  // After a step's gradients are reduced, with `overflow` agreed over every rank: returns
  // whether the step may be applied (false: skip it), and updates the scale.
  bool update(bool overflow);
  // From a checkpoint.
  void restore(double scale, int64_t clean_steps);

 private:
  LossScalerSettings settings_;
  double scale_;
  int64_t clean_steps_ = 0;
};

}  // namespace trident::train
