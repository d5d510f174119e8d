// Launch shapes shared by the CUDA kernels, so that every launcher computes its grid the same
// way and none launches an empty grid (a grid of zero blocks is a launch error).
//
// Three kinds of kernel:
// - elementwise: a grid-stride loop over n elements; the grid is capped, so any n works and
//   each thread handles several elements when n is large;
// - row-wise: one block of kRowThreads threads per row; the threads stride over the row and
//   combine through the block reductions of block_reduce.cuh;
// - column: one thread per column summing over the rows in order (kColumnThreads).
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

// A grid-stride loop is
//   for (std::size_t i = grid_first_index(); i < n; i += grid_stride()) ...
// in size_t, so tensors past 2^31 elements index correctly.
__device__ inline std::size_t grid_first_index() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ inline std::size_t grid_stride() {
  return static_cast<std::size_t>(gridDim.x) * blockDim.x;
}

// Threads per block for column kernels: one thread per column walking every row in order (the
// deterministic, atomic-free sums over rows: bias and layernorm parameter gradients, embedding
// scatter). One warp per block still reads 32 consecutive floats of a row at a time
// (coalesced), and spreads the few threads (a column count) over as many SMs as possible.
inline constexpr int kColumnThreads = 32;

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
