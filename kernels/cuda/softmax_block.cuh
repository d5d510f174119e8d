// The cross-entropy's block-wide pieces, shared by kernels/cuda/cross_entropy.cu and the kernel
// playground's candidates (perf/kernels/held_row_cross_entropy.cuh), so that a candidate that
// keeps the same order of operations gives the production kernels' bits:
// - block_merged: the threads' running (max, sum) pairs of cross_entropy_math.h merged over the
//   block, in block_reduce.cuh's order (a warp butterfly, then warp 0 over the warps' results);
// - BackwardRow: what the gradient of a row needs once its statistics are known, and the
//   gradient of one real logit; store_row_statistics, which makes it from the block's
//   statistics as the loss and gradient kernels store them.
#pragma once

#include <cuda_runtime.h>  // __shfl_xor_sync, __syncthreads, threadIdx

#include <cmath>  // expf

#include "kernels/cuda/block_reduce.cuh"      // kWarpSize, kFullWarpMask
#include "kernels/cuda/cross_entropy_math.h"  // softmax::Running, merged, empty_running, loss_of

namespace trident::kernels::cuda::softmax {

// What the gradient of a row needs once its statistics are known, and the gradient of one real
// logit: dl = exp(l - max) * (dloss / sum), less dloss at the target. Every kernel that writes a
// row's gradient takes it from here, so that they give the same bits.
struct BackwardRow {
  int target;    // the local column of the row's target, or -1
  float max;     // the row's max
  float factor;  // dloss / the row's sum of exp(l - max)
  __device__ __forceinline__ float gradient(float l, int v, float dloss) const {
    const float grad = expf(l - max) * factor;
    return v == target ? grad - dloss : grad;
  }
};

// The warp's pairs merged by a butterfly (every lane gets the same bits: merged is symmetric).
__device__ inline Running warp_merged(Running r) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const Running other{__shfl_xor_sync(kFullWarpMask, r.max, offset), __shfl_xor_sync(kFullWarpMask, r.sum, offset)};
    r = merged(r, other);
  }
  return r;
}

// block_reduce's scheme for the pair (its contract: blockDim.x a multiple of 32 and at most 1024,
// every thread calls it); every thread gets the block's result.
__device__ inline Running block_merged(Running r) {
  __shared__ float warp_max[1024 / kWarpSize];
  __shared__ double warp_sum[1024 / kWarpSize];
  __shared__ float block_max_value;
  __shared__ double block_sum_value;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  r = warp_merged(r);
  __syncthreads();  // as block_reduce: safe whatever ran before
  if (lane == 0) {
    warp_max[warp] = r.max;
    warp_sum[warp] = r.sum;
  }
  __syncthreads();
  if (warp == 0) {
    Running partial = lane < warps ? Running{warp_max[lane], warp_sum[lane]} : empty_running();
    partial = warp_merged(partial);
    if (lane == 0) {
      block_max_value = partial.max;
      block_sum_value = partial.sum;
    }
  }
  __syncthreads();
  return {block_max_value, block_sum_value};
}

// Row n's block statistics made final: thread 0 stores the loss (target_logit: the target's
// logit, read by thread 0) and the statistics, the sum rounded to float as the backward on given
// statistics reads it; every thread gets the row's BackwardRow on them (target: the row's
// target id, its column when it is one of [0, V)).
__device__ inline BackwardRow store_row_statistics(const Running& stats, int n, float target_logit, int target,
                                                   float dloss, int V, float* losses, float* row_max,
                                                   float* row_sumexp) {
  const float sum = static_cast<float>(stats.sum);
  if (threadIdx.x == 0) {
    losses[n] = loss_of(stats, target_logit);
    row_max[n] = stats.max;
    row_sumexp[n] = sum;
  }
  const float factor = V > 0 ? static_cast<float>(static_cast<double>(dloss) / static_cast<double>(sum)) : 0.0f;
  return BackwardRow{target >= 0 && target < V ? target : -1, stats.max, factor};
}

}  // namespace trident::kernels::cuda::softmax
