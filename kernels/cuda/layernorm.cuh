// LayerNorm over the channel axis on the device (eps = 1e-5), forward and accumulating
// backward. Launchers queue on `stream`.
#pragma once

#include <cuda_runtime.h>  // cudaStream_t

#include "kernels/act_ptr.h"  // ActPtr, ConstActPtr

namespace trident::kernels::cuda {

inline constexpr float kLayerNormEps = 1e-5f;  // as the CPU twin (kernels/cpu/layernorm.h)

// The activations and weights (ActPtr, ConstActPtr) are fp32, or all 16-bit of one format
// (read as they are, fp32 math, each stored value rounded once); std::logic_error if they mix.
// mean, rstd and the parameter gradients are fp32 in every storage.

// out[N,C] = (inp - mean) * rstd * weight + bias per row; writes mean[N] and rstd[N].
void layernorm_forward(ActPtr out, float* mean, float* rstd, ConstActPtr inp, ConstActPtr weight, ConstActPtr bias,
                       int N, int C, cudaStream_t stream);

// residual[N,C] = a + b (may alias a or b), then layernorm_forward of residual into out, in one
// kernel: each row's sum stays in the block's threads between the add and the normalisation.
// Under 16-bit storage the normalisation reads the rounded residual it stored.
void residual_layernorm_forward(ActPtr residual, ActPtr out, float* mean, float* rstd, ConstActPtr a, ConstActPtr b,
                                ConstActPtr weight, ConstActPtr bias, int N, int C, cudaStream_t stream);

// dinp[N,C] += d/dinp;  dweight[C] += sum_n dout * xhat;  dbias[C] += sum_n dout. column_scratch:
// columns::pair_scratch_floats(C) floats of device workspace for the parameter sums (column_sums.cuh).
void layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                        ConstActPtr weight, const float* mean, const float* rstd, int N, int C, float* column_scratch,
                        cudaStream_t stream);

}  // namespace trident::kernels::cuda
