// AdamW over a parameter table: first and second moments for a contiguous range of the
// parameter arena (the whole arena, or this rank's ZeRO-1 shard), decay only where the table
// says so (not biases, not norms).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

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
  // Holds state for arena elements [shard_begin, shard_end) (clamped to the table; padding
  // beyond the last tensor belongs to no parameter and is never updated).
  AdamW(const model::ParamTable& table, kernels::Backend& backend, AdamWSettings settings,
        std::size_t shard_begin = 0, std::size_t shard_end = std::numeric_limits<std::size_t>::max());
  ~AdamW();
  AdamW(const AdamW&) = delete;
  AdamW& operator=(const AdamW&) = delete;
  // One update of the shard's parameters: params is the whole arena; shard_grads[i] is the
  // gradient of arena element shard_begin + i. step_number is 1-based (bias correction).
  void update(float* params, const float* shard_grads, double lr, int64_t step_number);
  std::size_t state_bytes() const { return 2 * state_count_ * sizeof(float); }
  // The moments of arena elements [shard_begin(), shard_begin() + state_count()) (checkpoints).
  std::size_t shard_begin() const { return shard_begin_; }
  std::size_t state_count() const { return state_count_; }
  float* first_moment() { return m_; }
  float* second_moment() { return v_; }

 private:
  struct Segment {           // one tensor's overlap with the shard
    std::size_t offset = 0;  // arena offset of the first element
    std::size_t count = 0;
    bool decay = false;
  };
  kernels::Backend& backend_;
  AdamWSettings settings_;
  std::size_t shard_begin_ = 0;
  std::size_t state_count_ = 0;
  std::vector<Segment> segments_;
  float* m_ = nullptr;
  float* v_ = nullptr;
};

}  // namespace trident::train
