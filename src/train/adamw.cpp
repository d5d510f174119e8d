#include "src/train/adamw.h"

#include <algorithm>

namespace trident::train {

AdamW::AdamW(const model::ParamTable& table, kernels::Backend& backend, AdamWSettings settings,
             std::size_t shard_begin, std::size_t shard_end)
    : backend_(backend), settings_(settings) {
  shard_end = std::min(shard_end, table.total_count());
  shard_begin_ = std::min(shard_begin, shard_end);
  state_count_ = shard_end - shard_begin_;
  for (const auto& t : table.tensors()) {
    const std::size_t begin = std::max(t.offset, shard_begin_);
    const std::size_t end = std::min(t.offset + t.count, shard_end);
    if (begin < end) segments_.push_back({begin, end - begin, t.spec.weight_decay});
  }
  m_ = backend_.allocate(std::max<std::size_t>(state_count_, 1));
  v_ = backend_.allocate(std::max<std::size_t>(state_count_, 1));
  backend_.fill_zero(m_, state_count_);
  backend_.fill_zero(v_, state_count_);
}

AdamW::~AdamW() {
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
    backend_.adamw_update(params + s.offset, shard_grads + local, m_ + local, v_ + local, s.count, args);
  }
}

}  // namespace trident::train
