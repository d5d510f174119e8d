// Token + position embedding lookup on the CPU, forward and accumulating backward.
#pragma once

#include <cstdint>

namespace trident::kernels::cpu {

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:].
void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                       int B, int T, int C);

// dwte[tokens[b,t],:] += dout[b,t,:];  dwpe[t,:] += sum_b dout[b,t,:].
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                        int B, int T, int C);

}  // namespace trident::kernels::cpu
