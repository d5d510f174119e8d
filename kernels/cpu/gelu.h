// GELU (tanh approximation, as GPT-2) on the CPU.
#pragma once

#include <cstddef>

namespace trident::kernels::cpu {

// out[i] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),  x = inp[i].
void gelu_forward(float* out, const float* inp, std::size_t n);
// dinp[i] += gelu'(inp[i]) * dout[i].
void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n);

}  // namespace trident::kernels::cpu
