// Warp and block reductions for the row-wise kernels (one block per row).
//
// warp_reduce: a butterfly of __shfl_xor_sync, after which every lane holds the reduction of
// the 32 lanes. block_reduce: each warp reduces its lanes, warp leaders park the partial
// results in shared memory, warp 0 reduces those, and the result is broadcast through shared
// memory, so EVERY thread of the block returns the block's result.
//
// Contract: blockDim.x is a multiple of 32 (all lanes of every warp exist, as the full shuffle
// mask says) and at most 1024, and every thread of the block calls it (it synchronises), so a
// kernel must not return early before a reduction. Calling it several times in a row in one
// kernel is safe: a call writes warp_results only after the previous call's last barrier (warp
// 0 has read them by then) and block_result only after its own second barrier (which every
// thread reaches only after reading the previous result). The barrier at the top is thus not
// needed for that; it is kept so that each call is safe on its own, whatever ran before it.
// The order of the additions is fixed by the block shape: deterministic run to run.
#pragma once

#include <cuda_runtime.h>  // __shfl_xor_sync, __syncthreads, threadIdx (implicit under nvcc)

#include <cmath>

namespace trident::kernels::cuda {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullWarpMask = 0xffffffffu;

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename T, typename Op>
__device__ T warp_reduce(T value, Op op) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value = op(value, __shfl_xor_sync(kFullWarpMask, value, offset));
  }
  return value;
}

// identity: the value a warp slot takes when it has nothing to contribute (0 for a sum,
// -infinity for a max).
template <typename T, typename Op>
__device__ T block_reduce(T value, Op op, T identity) {
  __shared__ T warp_results[1024 / kWarpSize];
  __shared__ T block_result;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;

  value = warp_reduce(value, op);
  __syncthreads();  // see the contract above
  if (lane == 0) warp_results[warp] = value;
  __syncthreads();
  if (warp == 0) {
    T partial = lane < warps ? warp_results[lane] : identity;
    partial = warp_reduce(partial, op);
    if (lane == 0) block_result = partial;
  }
  __syncthreads();
  return block_result;
}

template <typename T>
__device__ T block_sum(T value) {
  return block_reduce(value, SumOp{}, T(0));
}

__device__ inline float block_max(float value) { return block_reduce(value, MaxOp{}, -INFINITY); }

}  // namespace trident::kernels::cuda
