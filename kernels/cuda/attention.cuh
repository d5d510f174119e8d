// Causal multi-head self-attention on the device (GPT-2 layout: qkv[B,T,3C], heads side by
// side, att[B,NH,T,T] keeps the probabilities). Launchers queue on `stream`, which must be the
// stream of `cublas`.
#pragma once

#include <cublas_v2.h>     // cublasHandle_t
#include <cuda_runtime.h>  // cudaStream_t

#include <cstddef>

namespace trident::kernels::cuda {

// out[B,T,C] = softmax(q k^T / sqrt(hs), causal) v per head; att[B,NH,T,T] gets the
// probabilities (zero above the diagonal). hs = C / NH.
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH,
                       cublasHandle_t cublas, cudaStream_t stream);

// dqkv[B,T,3C] += gradient w.r.t. qkv. scratch: attention_scratch_size(B,T,NH) floats,
// contents undefined on entry and exit.
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH, cublasHandle_t cublas,
                        cudaStream_t stream);

// One T x T slot per (batch, head) for dP and then dS.
std::size_t attention_scratch_size(int B, int T, int NH);

}  // namespace trident::kernels::cuda
