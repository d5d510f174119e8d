// Softmax + cross-entropy over a padded vocabulary on the device: fused (whole vocabulary) and
// in pieces over a vocabulary shard (tensor parallelism; the caller gathers the shards' row
// statistics in between). Semantics as kernels/backend.h. Launchers queue on
// `stream`. The logits and dlogits are fp32, or 16-bit of one format (read as they are, each
// gradient rounded once when stored); losses and row statistics are fp32.
#pragma once

#include <cuda_runtime.h>  // cudaStream_t

#include <cstdint>

#include "kernels/act_ptr.h"  // ActPtr, ConstActPtr
#include "kernels/backend.h"  // CrossEntropyLoads

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

// One block per row: stats[0,N) = the max of the V_local real columns of logits[N, Vp_local]
// (-infinity if V_local is 0), stats[N,2N) = the float sum of exp(l - that max), stats[2N,3N) =
// the target's logit when it is a real local column, else 0.
void cross_entropy_shard_statistics(float* stats, ConstActPtr logits, const int32_t* targets, int N, int V_local,
                                    int Vp_local, int vocab_begin, cudaStream_t stream);

// The shards' stats blocks (gathered[shards * 3N], rank order) combined: row max, the sums
// rescaled to it, the target logit.
void cross_entropy_combine_shards(float* row_max, float* row_sumexp, float* target_logit, const float* gathered,
                                  int N, int shards, cudaStream_t stream);

// How cross_entropy_backward_sharded walks a row (cross_entropy.cu). kValues, the default: the
// block's threads one value at a time. kPacks: 16 bytes at a time (8 16-bit or 4 fp32 values,
// vector_pack.h), where the rows allow it (both buffers 16-byte aligned and Vp_local a whole
// number of packs; otherwise kValues): more bytes in flight per thread for a pass bound by
// memory latency. The same arithmetic on each value, so the same bits. The enum is
// kernels::CrossEntropyLoads (kernels/backend_options.h: run.cross_entropy_loads chooses); the
// playground (perf/kernels/cross_entropy_backward.cu) times both.

// With the global row_max and row_sumexp: dlogits[n,v] = (exp(l - max)/sum - [target]) * dloss
// for v < V_local, 0 for V_local <= v < Vp_local. Overwrites; dlogits may alias logits.
void cross_entropy_backward_sharded(ActPtr dlogits, ConstActPtr logits, const int32_t* targets, const float* row_max,
                                    const float* row_sumexp, float dloss, int N, int V_local, int Vp_local,
                                    int vocab_begin, cudaStream_t stream, CrossEntropyLoads access = CrossEntropyLoads::kValues);

// cross_entropy_forward (losses, row_max, row_sumexp: none null) and then
// cross_entropy_backward_sharded on those statistics with vocab_begin 0, by one kernel that reads
// each row of logits from memory once for both: the bits of the two launches. dlogits may alias
// logits. `access` as cross_entropy_backward_sharded's, for the gradient's pass over the row.
void cross_entropy_forward_backward(float* losses, float* row_max, float* row_sumexp, ActPtr dlogits,
                                    ConstActPtr logits, const int32_t* targets, float dloss, int N, int V, int Vp,
                                    cudaStream_t stream, CrossEntropyLoads access = CrossEntropyLoads::kValues);

}  // namespace trident::kernels::cuda
