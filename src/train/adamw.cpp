#include "src/train/adamw.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace trident::train {

namespace {
// Sets bits [begin, end) of a bit mask: whole words at a time between the partial ends (a
// GPT-2 range has ~10^8 elements).
void set_bits(std::vector<uint32_t>& mask, std::size_t begin, std::size_t end) {
  while (begin < end && begin % 32 != 0) {
    mask[begin / 32] |= 1u << (begin % 32);
    ++begin;
  }
  for (; begin + 32 <= end; begin += 32) mask[begin / 32] = ~0u;
  for (; begin < end; ++begin) mask[begin / 32] |= 1u << (begin % 32);
}
}  // namespace

AdamW::AdamW(const model::ParamTable& table, kernels::Backend& backend, AdamWSettings settings,
             std::size_t shard_begin, std::size_t shard_end, kernels::Precision compute_precision)
    : backend_(backend), settings_(settings), precision_(compute_precision) {
  shard_end = std::min(shard_end, table.total_count());
  shard_begin_ = std::min(shard_begin, shard_end);
  state_count_ = shard_end - shard_begin_;
  // The decay mask of the range: one bit per element, set inside tensors that decay. With it
  // one update covers every tensor of the range (one kernel launch per step, not one per run
  // of tensors with the same decay), with the same bits.
  std::vector<uint32_t> mask(kernels::adamw_decay_mask_words(state_count_), 0u);
  for (const auto& t : table.tensors()) {
    if (!t.spec.weight_decay) continue;
    const std::size_t begin = std::max(t.offset, shard_begin_);
    const std::size_t end = std::min(t.offset + t.count, shard_end);
    if (begin < end) set_bits(mask, begin - shard_begin_, end - shard_begin_);  // outside the shard: begin >= end
  }
  decay_mask_ = backend_.allocate_tokens(std::max<std::size_t>(mask.size(), 1));
  // The backend's token memory is int32: the words go as their bit patterns (reading a uint32_t
  // through its signed type is allowed aliasing).
  backend_.copy_tokens_to_device(decay_mask_, reinterpret_cast<const int32_t*>(mask.data()), mask.size());
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
  backend_.release_tokens(decay_mask_);
}

void AdamW::update(kernels::ActPtr params, const float* shard_grads, double lr, int64_t step_number,
                   float grad_scale) {
  kernels::AdamWArgs args;
  args.grad_scale = grad_scale;
  args.lr = static_cast<float>(lr);
  args.beta1 = static_cast<float>(settings_.beta1);
  args.beta2 = static_cast<float>(settings_.beta2);
  args.eps = static_cast<float>(settings_.eps);
  args.step = static_cast<int>(step_number);
  args.weight_decay = static_cast<float>(settings_.weight_decay);
  args.decay_mask = decay_mask_;
  if (master_ == nullptr) {
    backend_.adamw_update(params.f32() + shard_begin_, shard_grads, m_, v_, state_count_, args);
  } else {
    backend_.adamw_update_master(master_, params + shard_begin_, shard_grads, m_, v_, state_count_, args, precision_);
  }
}

void AdamW::adopt_parameters(std::size_t offset, const float* host_values, std::size_t count) {
  if (master_ == nullptr) return;
  const std::size_t begin = std::max(offset, shard_begin_);
  const std::size_t end = std::min(offset + count, shard_begin_ + state_count_);
  if (begin >= end) return;
  backend_.copy_to_device(master_ + (begin - shard_begin_), host_values + (begin - offset), end - begin);
}

}  // namespace trident::train
