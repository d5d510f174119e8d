#include "src/train/adamw.h"

namespace trident::train {

AdamW::AdamW(const model::ParamTable& table, kernels::Backend& backend, AdamWSettings settings)
    : table_(table), backend_(backend), settings_(settings) {
  m_ = backend_.allocate(table_.total_count());
  v_ = backend_.allocate(table_.total_count());
  backend_.fill_zero(m_, table_.total_count());
  backend_.fill_zero(v_, table_.total_count());
}

AdamW::~AdamW() {
  backend_.release(v_);
  backend_.release(m_);
}

void AdamW::update(float* params, const float* grads, double lr, int64_t step_number) {
  kernels::AdamWArgs args;
  args.lr = static_cast<float>(lr);
  args.beta1 = static_cast<float>(settings_.beta1);
  args.beta2 = static_cast<float>(settings_.beta2);
  args.eps = static_cast<float>(settings_.eps);
  args.step = static_cast<int>(step_number);
  for (const auto& t : table_.tensors()) {
    args.weight_decay = t.spec.weight_decay ? static_cast<float>(settings_.weight_decay) : 0.0f;
    backend_.adamw_update(params + t.offset, grads + t.offset, m_ + t.offset, v_ + t.offset, t.count, args);
  }
}

}  // namespace trident::train
