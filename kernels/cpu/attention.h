// Causal multi-head self-attention on the CPU (GPT-2 layout: qkv[B,T,3C], heads side by side).
// The reference twin of kernels/cuda/attention.cu; the contract is Backend's (kernels/backend.h).
#pragma once

#include <cstddef>

namespace trident::kernels::cpu {

// out[B,T,C] = softmax(q k^T / sqrt(hs), causal) v per head, hs = C / NH; lse[B,NH,T] gets the
// log-sum-exp of each row of scaled scores over its causal columns, kept for backward.
// scratch: attention_scratch_size(B,T,NH) floats, contents undefined on entry and exit.
void attention_forward(float* out, float* lse, float* scratch, const float* qkv, int B, int T,
                       int C, int NH);

// dqkv[B,T,3C] = gradient w.r.t. qkv (overwritten), recomputing the probabilities from qkv and lse.
// scratch as for forward.
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* lse, int B, int T, int C, int NH);

// Two T x T slots per (batch, head), the probabilities and the score gradient: each OpenMP task
// owns its (b, h) slots, so no two tasks share memory.
std::size_t attention_scratch_size(int B, int T, int NH);

}  // namespace trident::kernels::cpu
