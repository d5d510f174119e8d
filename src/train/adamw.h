// AdamW over a parameter table: first and second moments for a contiguous range of the
// parameter arena (the whole arena, or this rank's ZeRO-1 shard), decay only where the table
// says so (not biases, not norms).
//
// Mixed precision (train.precision = bf16 | fp16): the model computes with a 16-bit copy of its
// weights, and small updates would vanish in it (bf16 keeps 8 significant bits: an update below
// 1/256 of a weight is lost). So AdamW also holds the fp32 master weights of its range, updates
// those, and writes the compute copy rounded from them. Checkpoints and final files hold the
// master weights.
#pragma once

#include <cstdint>
#include <limits>

#include "kernels/backend.h"
#include "src/model/param_table.h"

namespace trident::train {

// Bytes of AdamW's state for `count` elements: two fp32 moments, fp32 master weights in mixed
// precision, and one bit per element saying whether it decays.
inline std::size_t adamw_state_bytes(std::size_t count, bool master_weights) {
  return (master_weights ? 3 : 2) * count * sizeof(float) + kernels::adamw_decay_mask_words(count) * sizeof(int32_t);
}

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
  // compute_precision: the precision of the model's weights; other than kFp32, AdamW keeps fp32
  // master weights for its range.
  AdamW(const model::ParamTable& table, kernels::Backend& backend, AdamWSettings settings,
        std::size_t shard_begin = 0, std::size_t shard_end = std::numeric_limits<std::size_t>::max(),
        kernels::Precision compute_precision = kernels::Precision::kFp32);
  ~AdamW();
  AdamW(const AdamW&) = delete;
  AdamW& operator=(const AdamW&) = delete;
  // One update of the shard's parameters: params is the whole arena (the model's, in the compute
  // precision: 16-bit with master weights); shard_grads[i] is the gradient of arena element
  // shard_begin + i. step_number is 1-based (bias correction). With master weights the update
  // goes to them and params[shard] receives their rounded values. The gradients are read times
  // grad_scale (kernels::AdamWArgs::grad_scale) and left as they are.
  void update(kernels::ActPtr params, const float* shard_grads, double lr, int64_t step_number,
              float grad_scale = 1.0f);
  // With master weights: takes those of arena elements [offset, offset + count) that lie in this
  // range from their fp32 host values (initialisation, checkpoint loading; the model's arena is
  // set from the same values, model::Gpt::set_parameters). Nothing to do in fp32.
  void adopt_parameters(std::size_t offset, const float* host_values, std::size_t count);
  // fp32 values of arena elements [shard_begin(), shard_begin() + state_count()): the master
  // weights, or the fp32 arena's own elements when there are none.
  const float* fp32_parameters(kernels::ActPtr params) const {
    return master_ != nullptr ? master_ : params.f32() + shard_begin_;
  }
  kernels::Precision compute_precision() const { return precision_; }
  // Moments, master weights in mixed precision, and the decay mask.
  std::size_t state_bytes() const { return adamw_state_bytes(state_count_, master_ != nullptr); }
  // The moments of arena elements [shard_begin(), shard_begin() + state_count()) (checkpoints).
  std::size_t shard_begin() const { return shard_begin_; }
  std::size_t state_count() const { return state_count_; }
  float* first_moment() { return m_; }
  float* second_moment() { return v_; }

 private:
  kernels::Backend& backend_;
  AdamWSettings settings_;
  std::size_t shard_begin_ = 0;
  std::size_t state_count_ = 0;
  kernels::Precision precision_ = kernels::Precision::kFp32;
  float* m_ = nullptr;
  float* v_ = nullptr;
  float* master_ = nullptr;  // fp32 master weights (mixed precision only)
  int32_t* decay_mask_ = nullptr;  // kernels::AdamWArgs::decay_mask of the range
};

}  // namespace trident::train
