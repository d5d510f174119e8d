#include "src/train/adamw.h"

#include <algorithm>

namespace trident::train {

AdamW::AdamW(const model::ParamTable& table, kernels::Backend& backend, AdamWSettings settings,
             std::size_t shard_begin, std::size_t shard_end, kernels::Precision compute_precision)
    : backend_(backend), settings_(settings), precision_(compute_precision) {
  shard_end = std::min(shard_end, table.total_count());
  shard_begin_ = std::min(shard_begin, shard_end);
  state_count_ = shard_end - shard_begin_;
  for (const auto& t : table.tensors()) {
    const std::size_t begin = std::max(t.offset, shard_begin_);
    const std::size_t end = std::min(t.offset + t.count, shard_end);
    if (begin >= end) continue;
    // AdamW is elementwise, so neighbouring tensors with the same decay are one update (e.g. a
    // projection bias and the next LayerNorm's weight and bias): fewer launches, same bits.
    if (!segments_.empty() && segments_.back().decay == t.spec.weight_decay &&
        segments_.back().offset + segments_.back().count == begin) {
      segments_.back().count += end - begin;
    } else {
      segments_.push_back({begin, end - begin, t.spec.weight_decay});
    }
  }
  m_ = backend_.allocate(std::max<std::size_t>(state_count_, 1));
  v_ = backend_.allocate(std::max<std::size_t>(state_count_, 1));
  backend_.fill_zero(m_, state_count_);
  backend_.fill_zero(v_, state_count_);
  if (precision_ != kernels::Precision::kFp32) {
    master_ = backend_.allocate(std::max<std::size_t>(state_count_, 1));
    backend_.fill_zero(master_, state_count_);
  }
}

AdamW::~AdamW() {
  if (master_ != nullptr) backend_.release(master_);
  backend_.release(v_);
  backend_.release(m_);
}

void AdamW::update(float* params, const float* shard_grads, double lr, int64_t step_number) {
  kernels::AdamWArgs args;
  args.lr = static_cast<float>(lr);
  args.beta1 = static_cast<float>(settings_.beta1);
  args.beta2 = static_cast<float>(settings_.beta2);
  args.eps = static_cast<float>(settings_.eps);
  args.step = static_cast<int>(step_number);
  for (const Segment& s : segments_) {
    args.weight_decay = s.decay ? static_cast<float>(settings_.weight_decay) : 0.0f;
    const std::size_t local = s.offset - shard_begin_;
    if (master_ == nullptr) {
      backend_.adamw_update(params + s.offset, shard_grads + local, m_ + local, v_ + local, s.count, args);
    } else {
      backend_.adamw_update_master(master_ + local, params + s.offset, shard_grads + local, m_ + local, v_ + local,
                                   s.count, args, precision_);
    }
  }
}

void AdamW::adopt_parameters(float* params, std::size_t count) {
  if (master_ == nullptr) return;
  backend_.round_to_precision(master_, params + shard_begin_, state_count_, kernels::Precision::kFp32);  // a copy
  backend_.round_to_precision(params, params, count, precision_);
}

}  // namespace trident::train
