// Causal multi-head self-attention on the device (GPT-2 layout: qkv[B,T,3C], heads side by
// side; forward keeps out and the row log-sum-exp lse[B,NH,T], backward recomputes the
// probabilities). The contract is Backend's (kernels/backend.h). Launchers queue on `stream`,
// which must be the stream of `cublas`.
#pragma once

#include <cublas_v2.h>     // cublasHandle_t
#include <cuda_runtime.h>  // cudaStream_t

#include <cstddef>

namespace trident::kernels::cuda {

// out[B,T,C] = softmax(q k^T / sqrt(hs), causal) v per head, hs = C / NH; lse[B,NH,T] gets the
// log-sum-exp of each row of scaled scores over its causal columns. scratch:
// attention_scratch_size(B,T,NH) floats, contents undefined on entry and exit.
void attention_forward(float* out, float* lse, float* scratch, const float* qkv, int B, int T,
                       int C, int NH, cublasHandle_t cublas, cudaStream_t stream);

// dqkv[B,T,3C] = gradient w.r.t. qkv (overwritten), recomputing the probabilities from qkv and lse.
// scratch as for forward.
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* lse, int B, int T, int C, int NH, cublasHandle_t cublas,
                        cudaStream_t stream);

// Two T x T slots per (batch, head): the scores/probabilities, and dP then dS (backward).
std::size_t attention_scratch_size(int B, int T, int NH);

}  // namespace trident::kernels::cuda
