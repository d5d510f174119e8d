// Launch shapes shared by the CUDA kernels, so that every launcher computes its grid the same
// way and none launches an empty grid (a grid of zero blocks is a launch error).
//
// Two kinds of kernel share them:
// - elementwise: a grid-stride loop over n elements; the grid is capped, so any n works and
//   each thread handles several elements when n is large;
// - row-wise: one block of kRowThreads threads per row; the threads stride over the row and
//   combine through the block reductions of block_reduce.cuh.
// Sums over rows (bias and LayerNorm parameter gradients) have their own two-stage shape
// (column_sums_math.h), as has the embedding's scatter (embedding_math.h).
#pragma once

#include <cuda_runtime.h>  // blockIdx, blockDim, gridDim, threadIdx (implicit under nvcc)

#include <algorithm>
#include <cstddef>

namespace trident::kernels::cuda {

// Threads per block for elementwise kernels: a multiple of the warp size, the usual sweet spot.
inline constexpr int kElementwiseThreads = 256;
// Blocks at most for a grid-stride loop: ~8 resident blocks per SM on 132 SMs (H100) fill the
// GPU; more would only add scheduling overhead, and the loop covers the rest.
inline constexpr int kMaxElementwiseBlocks = 1024;
// Threads per block for row-wise kernels (layernorm, softmax rows, cross-entropy rows). A
// multiple of 32, as block_reduce requires; rows shorter than this leave threads idle.
inline constexpr int kRowThreads = 256;
// Threads per block for the cross-entropy's row statistics (the forward, the loss and gradient
// together, a vocabulary shard's statistics; rows of ~50k logits). Two such blocks an SM keep
// about 264 rows in flight on an H100, 26 MB of bf16 logits, which its 50 MB L2 holds: so the
// fused kernel's second read of its row, for the gradient, finds the row there. Eight blocks of
// kRowThreads would have 1056 rows, 106 MB, in flight. (llm.c's fused classifier also takes
// blocks of 1024.) The kernels declare __launch_bounds__(kLossRowThreads, kLossRowBlocksPerSm):
// 32 registers at most, so that both blocks fit.
inline constexpr int kLossRowThreads = 1024;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
inline constexpr int kLossRowBlocksPerSm = 1;  // sm_75 holds 1024 threads an SM: one such block
#else
inline constexpr int kLossRowBlocksPerSm = 2;
#endif

// A grid-stride loop is
//   for (std::size_t i = grid_first_index(); i < n; i += grid_stride()) ...
// in size_t, so tensors past 2^31 elements index correctly.
__device__ inline std::size_t grid_first_index() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ inline std::size_t grid_stride() {
  return static_cast<std::size_t>(gridDim.x) * blockDim.x;
}

// Blocks for a grid-stride loop over n > 0 elements.
inline int elementwise_blocks(std::size_t n) {
  const std::size_t wanted = (n + kElementwiseThreads - 1) / kElementwiseThreads;
  return static_cast<int>(std::min<std::size_t>(wanted, kMaxElementwiseBlocks));
}

// Blocks of `threads` threads for one thread per item, count > 0.
inline int blocks_for(std::size_t count, int threads) {
  return static_cast<int>((count + static_cast<std::size_t>(threads) - 1) /
                          static_cast<std::size_t>(threads));
}

}  // namespace trident::kernels::cuda
