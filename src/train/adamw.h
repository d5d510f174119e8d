// AdamW over a parameter table: one moment pair per parameter element, same arena offsets as
// the parameters, decay only where the table says so (not biases, not norms).
#pragma once

#include <cstdint>

#include "kernels/backend.h"
#include "src/model/param_table.h"

namespace trident::train {

struct AdamWSettings {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

class AdamW {
 public:
  AdamW(const model::ParamTable& table, kernels::Backend& backend, AdamWSettings settings);
  ~AdamW();
  AdamW(const AdamW&) = delete;
  AdamW& operator=(const AdamW&) = delete;
  // One update of every tensor; step_number is 1-based (bias correction).
  void update(float* params, const float* grads, double lr, int64_t step_number);
  std::size_t state_bytes() const { return 2 * table_.total_count() * sizeof(float); }

 private:
  const model::ParamTable& table_;
  kernels::Backend& backend_;
  AdamWSettings settings_;
  float* m_ = nullptr;
  float* v_ = nullptr;
};

}  // namespace trident::train
