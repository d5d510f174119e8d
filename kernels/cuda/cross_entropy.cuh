// Softmax + cross-entropy over a padded vocabulary on the device: fused (whole vocabulary) and
// in three pieces over a vocabulary shard (tensor parallelism; the caller reduces the row
// maxima and sums across ranks in between). Semantics as kernels/backend.h. Launchers queue on
// `stream`. The logits and dlogits are fp32, or 16-bit of one format (read as they are, each
// gradient rounded once when stored); losses and row statistics are fp32.
#pragma once

#include <cuda_runtime.h>  // cudaStream_t

#include <cstdint>

#include "kernels/act_ptr.h"  // ActPtr, ConstActPtr

namespace trident::kernels::cuda {

// losses[n] = logsumexp(logits[n, 0:V]) - logits[n, targets[n]]; columns V..Vp never read.
// row_max, row_sumexp (both or neither null): each row's max and float sum of exp(l - max), for
// cross_entropy_backward_sharded with vocab_begin 0.
void cross_entropy_forward(float* losses, float* row_max, float* row_sumexp, ConstActPtr logits,
                           const int32_t* targets, int N, int V, int Vp, cudaStream_t stream);

// dlogits[n,v] = (softmax(logits[n,0:V])[v] - [v == targets[n]]) * dloss for v < V, 0 for
// V <= v < Vp. Overwrites; dlogits may alias logits.
void cross_entropy_backward(ActPtr dlogits, ConstActPtr logits, const int32_t* targets, float dloss, int N, int V,
                            int Vp, cudaStream_t stream);

// row_max[n] = max of the V_local real columns of logits[N, Vp_local] (-infinity if V_local
// is 0).
void cross_entropy_row_max(float* row_max, ConstActPtr logits, int N, int V_local, int Vp_local, cudaStream_t stream);

// With the global row_max: row_sumexp[n] = sum_{v < V_local} exp(logits[n,v] - row_max[n]);
// target_logit[n] = logits[n, targets[n] - vocab_begin] if that is a real local column, else 0.
void cross_entropy_row_sums(float* row_sumexp, float* target_logit, ConstActPtr logits, const int32_t* targets,
                            const float* row_max, int N, int V_local, int Vp_local, int vocab_begin,
                            cudaStream_t stream);

// With the global row_max and row_sumexp: dlogits[n,v] = (exp(l - max)/sum - [target]) * dloss
// for v < V_local, 0 for V_local <= v < Vp_local. Overwrites; dlogits may alias logits.
void cross_entropy_backward_sharded(ActPtr dlogits, ConstActPtr logits, const int32_t* targets, const float* row_max,
                                    const float* row_sumexp, float dloss, int N, int V_local, int Vp_local,
                                    int vocab_begin, cudaStream_t stream);

}  // namespace trident::kernels::cuda
