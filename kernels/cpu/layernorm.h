// LayerNorm over the channel axis on the CPU (eps = 1e-5), forward and accumulating backward.
#pragma once

namespace trident::kernels::cpu {

inline constexpr float kLayerNormEps = 1e-5f;

// out[N,C] = (inp - mean) * rstd * weight + bias per row; writes mean[N] and rstd[N].
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C);

// residual[N,C] = a + b (may alias a or b), then layernorm_forward of residual into out, row by
// row while the row is in cache. Bit-identical to the add followed by layernorm_forward.
void residual_layernorm_forward(float* residual, float* out, float* mean, float* rstd, const float* a,
                                const float* b, const float* weight, const float* bias, int N, int C);

// dinp[N,C] += d/dinp;  dweight[C] += sum_n dout * norm;  dbias[C] += sum_n dout.
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, int N, int C);

}  // namespace trident::kernels::cpu
