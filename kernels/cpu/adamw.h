// AdamW update of one tensor on the CPU.
#pragma once

#include <cstddef>

#include "kernels/backend.h"  // AdamWArgs

namespace trident::kernels::cpu {

// m, v: first and second moments, updated in place; param updated in place. See AdamWArgs.
void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n,
                  const AdamWArgs& args);

}  // namespace trident::kernels::cpu
