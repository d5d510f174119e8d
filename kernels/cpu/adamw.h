// AdamW update of one tensor on the CPU.
#pragma once

#include <cstddef>

#include "kernels/backend.h"  // AdamWArgs

namespace trident::kernels::cpu {

// m, v: first and second moments, updated in place; param updated in place. See AdamWArgs.
void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n,
                  const AdamWArgs& args);
// The same update of fp32 master weights, and compute[i] = master[i] rounded to `precision`:
// the rounded float in an fp32 compute, the bit pattern in a 16-bit one (whose storage must be
// `precision`: std::logic_error otherwise).
void adamw_update_master(float* master, ActPtr compute, const float* grad, float* m, float* v, std::size_t n,
                         const AdamWArgs& args, Precision precision);

}  // namespace trident::kernels::cpu
