// Sums over rows ("column sums"), the per-thread math of kernels/cuda/column_sums.cu: the bias
// gradient dbias[o] += sum_n dout[n, o] and LayerNorm's parameter gradients
// dweight[c] += sum_n dout * (inp - mean[n]) * rstd[n], dbias[c] += sum_n dout.
// Plain C++ that nvcc compiles for the device and any C++ compiler for the host, so that a host
// program can replay the kernels with these very functions
// (tests/unit/kernels/column_sums_replay_test.cpp, on every build).
//
// The scheme, deterministic and without atomics: stage 1 is a grid of (32-column tiles) x
// (row chunks), blocks of 32 x 8 threads. threadIdx.x is the column (a warp reads a contiguous
// stretch of a row), threadIdx.y one of 8 lanes striding over the chunk's rows; after a
// barrier, thread (x, 0) adds its column's 8 lane sums in lane order and writes one partial per
// (chunk, column) into scratch. Stage 2: one thread per column adds the chunks' partials in
// chunk order into the output. Fixed grid, fixed order: the same bits on every run and every
// GPU. The chunk count is a constant for that reason (it fixes where the sums split).
//
// Why 64 chunks: at 768 columns the grid is 24 x 64 = 1536 blocks of 256 threads, about 1.5
// waves on an H100 (132 SMs x 8 resident blocks), each block reading 128 rows; wider shapes
// have more. The kernels it replaces walked every row of a column on one thread: 768 to 3072
// threads in all, a few warps per SM, each a chain of N loads (perf/kernels/column_sums.cu
// keeps that scheme as variant 1 and times both).
#pragma once

#include <cstddef>

#include "kernels/stored_element.h"  // stored::Fp32, Bf16, Fp16 (dout and inp in their storage)

#if defined(__CUDACC__)
#define TRIDENT_COLUMNS_HD __host__ __device__ __forceinline__
#else
#define TRIDENT_COLUMNS_HD inline
#endif

namespace trident::kernels::cuda::columns {

constexpr int kTileColumns = 32;    // threadIdx.x: one column each
constexpr int kRowLanes = 8;        // threadIdx.y: lanes striding over a chunk's rows
constexpr int kFinishThreads = 32;  // stage 2: threads per block, one per column
constexpr int kChunks = 64;         // the most row chunks (fewer when N < 64)

// Chunk r holds the rows [r * rows_per_chunk, min(N, (r + 1) * rows_per_chunk)); none is empty.
struct ChunkPlan {
  int rows_per_chunk;
  int chunks;
};

// N >= 1, max_chunks >= 1.
TRIDENT_COLUMNS_HD ChunkPlan plan_chunks(int N, int max_chunks) {
  const int rows_per_chunk = (N + max_chunks - 1) / max_chunks;
  return {rows_per_chunk, (N + rows_per_chunk - 1) / rows_per_chunk};
}

// Floats of scratch for one sum over `columns` columns (a bias), and for LayerNorm's pair: a
// partial per (chunk, column) of each sum, at most `max_chunks` chunks.
inline std::size_t sum_scratch_floats(int columns, int max_chunks = kChunks) {
  return static_cast<std::size_t>(max_chunks) * static_cast<std::size_t>(columns);
}
inline std::size_t pair_scratch_floats(int columns, int max_chunks = kChunks) {
  return 2 * sum_scratch_floats(columns, max_chunks);
}

// Thread x of block (tile, chunk): its column and the chunk's rows; lane y takes begin + y,
// begin + y + kRowLanes, ... below end.
struct LaneRange {
  int col;
  int begin;
  int end;
};

TRIDENT_COLUMNS_HD LaneRange lane_range(int tile, int chunk, int x, int rows_per_chunk, int N) {
  const int begin = chunk * rows_per_chunk;
  const int end = begin + rows_per_chunk < N ? begin + rows_per_chunk : N;
  return {tile * kTileColumns + x, begin, end};
}

// Stage 1 before the barrier, the bias: lane y's sum of column col of x[N, columns], rows in
// order (0 past the last column).
template <class S, class E = typename S::Element>
TRIDENT_COLUMNS_HD float sum_lane(const E* x, int N, int columns, int rows_per_chunk, int tile, int chunk, int tx,
                                  int ty) {
  const LaneRange r = lane_range(tile, chunk, tx, rows_per_chunk, N);
  float sum = 0.0f;
  if (r.col < columns) {
    for (int n = r.begin + ty; n < r.end; n += kRowLanes) sum += S::load(x[static_cast<std::size_t>(n) * columns + r.col]);
  }
  return sum;
}

// Stage 1 before the barrier, LayerNorm: dw += dy * (x - mean) * rstd and db += dy over lane
// y's rows (both 0 past the last column).
template <class S, class E = typename S::Element>
TRIDENT_COLUMNS_HD void layernorm_lane(const E* dout, const E* inp, const float* mean, const float* rstd, int N, int C,
                                       int rows_per_chunk, int tile, int chunk, int tx, int ty, float& dw, float& db) {
  const LaneRange r = lane_range(tile, chunk, tx, rows_per_chunk, N);
  dw = 0.0f;
  db = 0.0f;
  if (r.col >= C) return;
  for (int n = r.begin + ty; n < r.end; n += kRowLanes) {
    const std::size_t i = static_cast<std::size_t>(n) * C + r.col;
    const float dy = S::load(dout[i]);
    dw += dy * (S::load(inp[i]) - mean[n]) * rstd[n];
    db += dy;
  }
}

// Stage 1 after the barrier: thread (x, 0) adds the kRowLanes lane sums of its column in lane
// order into partial[chunk, col] (partial row-major [chunks, columns]).
TRIDENT_COLUMNS_HD void store_partial(float* partial, const float (*lane_sums)[kTileColumns], int columns, int tile,
                                      int chunk, int tx, int ty) {
  const int col = tile * kTileColumns + tx;
  if (ty != 0 || col >= columns) return;
  float total = 0.0f;
  for (int lane = 0; lane < kRowLanes; lane++) total += lane_sums[lane][tx];
  partial[static_cast<std::size_t>(chunk) * columns + col] = total;
}

// Stage 1's combine where the block's chunk is the whole sum (add_partial_sums_pair): thread
// (x, 0) adds its column's kRowLanes lane sums in lane order into out[col].
TRIDENT_COLUMNS_HD void add_lane_sums(float* out, const float (*lane_sums)[kTileColumns], int columns, int tile, int tx,
                                      int ty) {
  const int col = tile * kTileColumns + tx;
  if (ty != 0 || col >= columns) return;
  float total = 0.0f;
  for (int lane = 0; lane < kRowLanes; lane++) total += lane_sums[lane][tx];
  out[col] += total;
}

// Stage 2 for column col: out[col] += partial[0, col] + partial[1, col] + ... in chunk order.
TRIDENT_COLUMNS_HD void finish_column(float* out, const float* partial, int columns, int chunks, int col) {
  if (col >= columns) return;
  float sum = 0.0f;
  for (int r = 0; r < chunks; r++) sum += partial[static_cast<std::size_t>(r) * columns + col];
  out[col] += sum;
}

}  // namespace trident::kernels::cuda::columns
