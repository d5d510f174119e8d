// Softmax + cross-entropy over a padded vocabulary, on the CPU: fused (whole vocabulary on one
// rank) and in pieces over a vocabulary shard (tensor parallelism; the caller gathers the
// shards' row statistics between them).
#pragma once

#include <cstdint>

namespace trident::kernels::cpu {

// losses[n] = logsumexp(logits[n, 0:V]) - logits[n, targets[n]]; columns V..Vp are ignored.
// row_max, row_sumexp (both or neither null): each row's max and float sum of exp(l - max), for
// cross_entropy_backward_sharded (vocab_begin 0).
void cross_entropy_forward(float* losses, float* row_max, float* row_sumexp, const float* logits,
                           const int32_t* targets, int N, int V, int Vp);

// dlogits[n,v] = (softmax(logits[n,0:V])[v] - [v == targets[n]]) * dloss for v < V, 0 for
// V <= v < Vp. Overwrites; dlogits may alias logits.
void cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets,
                            float dloss, int N, int V, int Vp);

// Sharded: each rank holds logits[N, Vp_local] for the ids [vocab_begin, vocab_begin +
// Vp_local), the first V_local columns real (V_local may be 0), the rest padding (never read).
// One pass over this shard: stats[0,N) = each row's max over its real columns (-infinity when
// V_local == 0), stats[N,2N) = the float sum of exp(l - that max) (0 when V_local == 0),
// stats[2N,3N) = the target's logit when it is a real local column, else 0.
void cross_entropy_shard_statistics(float* stats, const float* logits, const int32_t* targets, int N,
                                    int V_local, int Vp_local, int vocab_begin);

// From the shards' stats blocks (gathered[shards * 3N], in rank order): the whole row's max,
// the sum rescaled to it (sum_r sum_r * exp(max_r - max), in double, rounded to float) and the
// target logit (the sum of the shards').
void cross_entropy_combine_shards(float* row_max, float* row_sumexp, float* target_logit, const float* gathered,
                                  int N, int shards);

// With the global row_max and row_sumexp: dlogits[n,v] = (exp(l - max)/sum - [target]) * dloss
// for v < V_local, 0 for V_local <= v < Vp_local. Overwrites; dlogits may alias logits.
void cross_entropy_backward_sharded(float* dlogits, const float* logits, const int32_t* targets,
                                    const float* row_max, const float* row_sumexp, float dloss,
                                    int N, int V_local, int Vp_local, int vocab_begin);

}  // namespace trident::kernels::cpu
