// Token + position embedding lookup on the CPU, forward and accumulating backward, over a
// vocabulary range (vocabulary-parallel tensor parallelism; 0, Vp when unsharded).
#pragma once

#include <cstdint>

namespace trident::kernels::cpu {

// out[b,t,:] = (vocab_begin <= tok < vocab_end ? wte[tok - vocab_begin,:] : 0)
//            + (wpe ? wpe[t,:] : 0),   tok = tokens[b,t]; wte points at row vocab_begin.
void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                       int B, int T, int C, int vocab_begin, int vocab_end);

// dwte[tok - vocab_begin,:] += dout[b,t,:] for owned tokens; dwpe (may be null)[t,:] +=
// sum_b dout[b,t,:].
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                        int B, int T, int C, int vocab_begin, int vocab_end);

}  // namespace trident::kernels::cpu
