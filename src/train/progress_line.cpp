#include "src/train/progress_line.h"

#include <cmath>
#include <cstdio>

namespace trident::train {

ProgressLine::ProgressLine(int64_t total_steps, double tokens_per_step, double flops_per_token,
                           double peak_flops)
    : total_steps_(total_steps),
      tokens_per_step_(tokens_per_step),
      flops_per_token_(flops_per_token),
      peak_flops_(peak_flops) {}

void ProgressLine::record(double step_seconds) {
  if (recorded_ == 0) {
    first_seconds_ = step_seconds;
  } else {
    seconds_after_first_ += step_seconds;
  }
  ++recorded_;
}

double ProgressLine::mfu(double seconds) const {
  if (peak_flops_ <= 0.0 || seconds <= 0.0) return NAN;
  return flops_per_token_ * tokens_per_step_ / seconds / peak_flops_;
}

std::string format_duration(double seconds) {
  char text[32];
  const auto total = static_cast<long long>(std::llround(seconds));
  if (total >= 3600) {
    std::snprintf(text, sizeof text, "%lldh%02lldm", total / 3600, (total % 3600) / 60);
  } else if (total >= 60) {
    std::snprintf(text, sizeof text, "%lldm%02llds", total / 60, total % 60);
  } else {
    std::snprintf(text, sizeof text, "%llds", total);
  }
  return text;
}

std::string ProgressLine::line(int64_t step, double loss, double lr, double grad_norm, double seconds,
                               double val_loss) const {
  const double mean = recorded_ > 1 ? seconds_after_first_ / static_cast<double>(recorded_ - 1) : first_seconds_;
  const double eta = mean * static_cast<double>(total_steps_ - step);
  char mfu_text[16];
  const double m = mfu(seconds);
  if (std::isnan(m)) {
    std::snprintf(mfu_text, sizeof mfu_text, "-");
  } else {
    std::snprintf(mfu_text, sizeof mfu_text, "%.1f%%", 100.0 * m);
  }
  // An overflowed or diverged step's norm: "inf" or "nan", never the sign printf gives a NaN.
  char norm_text[32];
  if (std::isfinite(grad_norm)) {
    std::snprintf(norm_text, sizeof norm_text, "%.3f", grad_norm);
  } else {
    std::snprintf(norm_text, sizeof norm_text, "%s", std::isnan(grad_norm) ? "nan" : "inf");
  }
  char text[256];
  std::snprintf(text, sizeof text,
                "step %*lld/%lld | loss %.4f | lr %.3e | grad norm %s | %.0f tok/s | %.1f ms/step | MFU %s | ETA %s",
                static_cast<int>(std::to_string(total_steps_).size()), static_cast<long long>(step),
                static_cast<long long>(total_steps_), loss, lr, norm_text, tokens_per_step_ / seconds,
                seconds * 1e3, mfu_text, format_duration(eta).c_str());
  std::string result = text;
  if (!std::isnan(val_loss)) {
    char val[48];
    std::snprintf(val, sizeof val, " | val loss %.4f", val_loss);
    result += val;
  }
  return result;
}

}  // namespace trident::train
