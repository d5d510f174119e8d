// Fused softmax + cross-entropy over a padded vocabulary, on the CPU.
#pragma once

#include <cstdint>

namespace trident::kernels::cpu {

// losses[n] = logsumexp(logits[n, 0:V]) - logits[n, targets[n]]; columns V..Vp are ignored.
void cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int N,
                           int V, int Vp);

// dlogits[n,v] = (softmax(logits[n,0:V])[v] - [v == targets[n]]) * dloss for v < V, 0 for
// V <= v < Vp. Overwrites; dlogits may alias logits.
void cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets,
                            float dloss, int N, int V, int Vp);

}  // namespace trident::kernels::cpu
