// LayerNorm over the channel axis on the device (eps = 1e-5), forward and accumulating
// backward. Launchers queue on `stream`.
#pragma once

#include <cuda_runtime.h>  // cudaStream_t

namespace trident::kernels::cuda {

inline constexpr float kLayerNormEps = 1e-5f;  // as the CPU twin (kernels/cpu/layernorm.h)

// out[N,C] = (inp - mean) * rstd * weight + bias per row; writes mean[N] and rstd[N].
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C, cudaStream_t stream);

// residual[N,C] = a + b (may alias a or b), then layernorm_forward of residual into out, in one
// kernel: each row's sum stays in the block's threads between the add and the normalisation.
void residual_layernorm_forward(float* residual, float* out, float* mean, float* rstd, const float* a,
                                const float* b, const float* weight, const float* bias, int N, int C,
                                cudaStream_t stream);

// dinp[N,C] += d/dinp;  dweight[C] += sum_n dout * xhat;  dbias[C] += sum_n dout.
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C, cudaStream_t stream);

}  // namespace trident::kernels::cuda
