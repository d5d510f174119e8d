// Causal multi-head self-attention on the CPU (GPT-2 layout: qkv[B,T,3C], heads side by side).
#pragma once

#include <cstddef>

namespace trident::kernels::cpu {

// out[B,T,C] = softmax(q k^T / sqrt(hs), causal) v per head; att[B,NH,T,T] gets the
// probabilities (zero above the diagonal), kept for backward. hs = C / NH.
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH);

// dqkv[B,T,3C] += gradient w.r.t. qkv. scratch: attention_scratch_size(B,T,NH) floats, contents
// undefined on entry and exit.
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH);

// One T x T slot per (batch, head): each task owns its slot, so backward never races.
std::size_t attention_scratch_size(int B, int T, int NH);

}  // namespace trident::kernels::cpu
