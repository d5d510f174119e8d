// AdamW update of one tensor on the device. The launcher queues on `stream`.
#pragma once

#include <cuda_runtime.h>  // cudaStream_t

#include <cstddef>

#include "kernels/backend.h"  // AdamWArgs, AdamWLoads

namespace trident::kernels::cuda {

// m, v updated in place, param -= lr * (mhat / (sqrt(vhat) + eps) + weight_decay * param).
// loads: one element a thread (kValues) or four on 16-byte accesses (kPacks, where every array
// starts on a pack; the one-element kernel otherwise): the same bits (adamw.cu).
void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n,
                  const AdamWArgs& args, cudaStream_t stream, AdamWLoads loads = AdamWLoads::kValues);
// The same update of fp32 master weights; compute[i] = master[i] rounded to `precision` in the
// same pass (__float2bfloat16_rn / __float2half_rn): the rounded float in an fp32 compute, the
// 16-bit value in a 16-bit one (whose storage must be `precision`: std::logic_error otherwise).
void adamw_update_master(float* master, ActPtr compute, const float* grad, float* m, float* v, std::size_t n,
                         const AdamWArgs& args, Precision precision, cudaStream_t stream,
                         AdamWLoads loads = AdamWLoads::kValues);

}  // namespace trident::kernels::cuda
