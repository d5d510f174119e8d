// GELU (tanh approximation, GPT-2) on the device. Launchers queue on `stream`.
#pragma once

#include <cuda_runtime.h>  // cudaStream_t

#include <cstddef>

namespace trident::kernels::cuda {

// out = gelu(inp) (out may alias inp).
void gelu_forward(float* out, const float* inp, std::size_t n, cudaStream_t stream);
// dinp += gelu'(inp) * dout
void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n,
                   cudaStream_t stream);

}  // namespace trident::kernels::cuda
