// LayerNorm over the channel axis on the CPU (eps = 1e-5), forward and accumulating backward.
#pragma once

namespace trident::kernels::cpu {

inline constexpr float kLayerNormEps = 1e-5f;

// out[N,C] = (inp - mean) * rstd * weight + bias per row; writes mean[N] and rstd[N].
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C);

// dinp[N,C] += d/dinp;  dweight[C] += sum_n dout * norm;  dbias[C] += sum_n dout.
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, int N, int C);

}  // namespace trident::kernels::cpu
