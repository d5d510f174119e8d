// GELU (tanh approximation, GPT-2) on the device. Launchers queue on `stream`.
#pragma once

#include <cuda_runtime.h>  // cudaStream_t

#include <cstddef>

#include "kernels/act_ptr.h"  // ActPtr, ConstActPtr

namespace trident::kernels::cuda {

// The operands are fp32, or all 16-bit of one format (bf16 or fp16: read as they are, fp32
// math, each stored value rounded once); std::logic_error if they mix.
// out = gelu(inp) (out may alias inp).
void gelu_forward(ActPtr out, ConstActPtr inp, std::size_t n, cudaStream_t stream);
// dinp = gelu'(inp) * dout (overwritten; dinp may be dout)
void gelu_backward(ActPtr dinp, ConstActPtr inp, ConstActPtr dout, std::size_t n, cudaStream_t stream);

}  // namespace trident::kernels::cuda
