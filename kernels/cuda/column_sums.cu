// Sums over rows (column_sums.cuh): the kernels only pass their block and thread indices to the
// per-thread functions of column_sums_math.h, which the host replay calls in the same order.
#include "kernels/cuda/column_sums.cuh"

#include <cstddef>

#include "kernels/cuda/column_sums_math.h"  // columns::*
#include "kernels/cuda/cuda_check.h"        // CUDA_CHECK_LAUNCH
#include "kernels/cuda/launch_shape.cuh"    // blocks_for
#include "kernels/stored_element.h"         // stored::with_policy, elements, common_storage

namespace trident::kernels::cuda {

namespace {

using columns::kRowLanes;
using columns::kTileColumns;

// Stage 1 of a sum: block (column tile, chunk) writes partial[chunk, col] for its 32 columns.
template <class S, class E = typename S::Element>
__global__ void __launch_bounds__(kTileColumns * kRowLanes)
    sum_partials_kernel(float* __restrict__ partial, const E* __restrict__ x, int N, int width, int rows_per_chunk) {
  __shared__ float lane_sums[kRowLanes][kTileColumns];
  const int tile = static_cast<int>(blockIdx.x), chunk = static_cast<int>(blockIdx.y);
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  lane_sums[ty][tx] = columns::sum_lane<S>(x, N, width, rows_per_chunk, tile, chunk, tx, ty);
  __syncthreads();
  columns::store_partial(partial, lane_sums, width, tile, chunk, tx, ty);
}

// Stage 1 of LayerNorm's pair: dw partials into partial_dw, db partials into partial_db.
template <class S, class E = typename S::Element>
__global__ void __launch_bounds__(kTileColumns * kRowLanes)
    layernorm_partials_kernel(float* __restrict__ partial_dw, float* __restrict__ partial_db,
                              const E* __restrict__ dout, const E* __restrict__ inp, const float* __restrict__ mean,
                              const float* __restrict__ rstd, int N, int C, int rows_per_chunk) {
  __shared__ float dw_sums[kRowLanes][kTileColumns];
  __shared__ float db_sums[kRowLanes][kTileColumns];
  const int tile = static_cast<int>(blockIdx.x), chunk = static_cast<int>(blockIdx.y);
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  float dw = 0.0f, db = 0.0f;
  columns::layernorm_lane<S>(dout, inp, mean, rstd, N, C, rows_per_chunk, tile, chunk, tx, ty, dw, db);
  dw_sums[ty][tx] = dw;
  db_sums[ty][tx] = db;
  __syncthreads();
  columns::store_partial(partial_dw, dw_sums, C, tile, chunk, tx, ty);
  columns::store_partial(partial_db, db_sums, C, tile, chunk, tx, ty);
}

// Stage 2: out_a (and out_b, when not null) += the chunk-ordered sums of their partials.
__global__ void finish_kernel(float* __restrict__ out_a, float* __restrict__ out_b, const float* __restrict__ partial_a,
                              const float* __restrict__ partial_b, int width, int chunks) {
  const int col = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  columns::finish_column(out_a, partial_a, width, chunks, col);
  if (out_b != nullptr) columns::finish_column(out_b, partial_b, width, chunks, col);
}

// out (out_a for blockIdx.y = 0, out_b for 1) += the column sums of `rows` rows of fp32 partials:
// stage 1's tile and lanes over one chunk holding every row, combined straight into out.
__global__ void __launch_bounds__(kTileColumns * kRowLanes)
    add_partials_pair_kernel(float* __restrict__ out_a, float* __restrict__ out_b, const float* __restrict__ partial_a,
                             const float* __restrict__ partial_b, int rows, int width) {
  __shared__ float lane_sums[kRowLanes][kTileColumns];
  const bool second = blockIdx.y == 1;
  const int tile = static_cast<int>(blockIdx.x);
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const float* partial = second ? partial_b : partial_a;
  lane_sums[ty][tx] = columns::sum_lane<stored::Fp32>(partial, rows, width, rows, tile, 0, tx, ty);
  __syncthreads();
  columns::add_lane_sums(second ? out_b : out_a, lane_sums, width, tile, tx, ty);
}

dim3 partials_grid(int width, const columns::ChunkPlan& plan) {
  return dim3(static_cast<unsigned>(blocks_for(static_cast<std::size_t>(width), kTileColumns)),
              static_cast<unsigned>(plan.chunks));
}

void finish(float* out_a, float* out_b, const float* partial_a, const float* partial_b, int width, int chunks,
            cudaStream_t stream) {
  finish_kernel<<<blocks_for(static_cast<std::size_t>(width), columns::kFinishThreads), columns::kFinishThreads, 0,
                  stream>>>(out_a, out_b, partial_a, partial_b, width, chunks);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void add_column_sums_in_chunks(float* sums, ConstActPtr x, int N, int width, float* scratch, int max_chunks,
                               cudaStream_t stream) {
  if (N <= 0 || width <= 0) return;
  const columns::ChunkPlan plan = columns::plan_chunks(N, max_chunks);
  stored::with_policy(x.storage(), [&](auto policy) {
    using S = decltype(policy);
    sum_partials_kernel<S><<<partials_grid(width, plan), dim3(kTileColumns, kRowLanes), 0, stream>>>(
        scratch, stored::elements<S>(x), N, width, plan.rows_per_chunk);
  });
  CUDA_CHECK_LAUNCH();
  finish(sums, nullptr, scratch, nullptr, width, plan.chunks, stream);
}

void add_column_sums(float* sums, ConstActPtr x, int N, int width, float* scratch, cudaStream_t stream) {
  add_column_sums_in_chunks(sums, x, N, width, scratch, columns::kChunks, stream);
}

void add_partial_sums_pair(float* out_a, float* out_b, const float* partial_a, const float* partial_b, int rows,
                           int width, cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return;
  const dim3 grid(static_cast<unsigned>(blocks_for(static_cast<std::size_t>(width), kTileColumns)), 2);
  add_partials_pair_kernel<<<grid, dim3(kTileColumns, kRowLanes), 0, stream>>>(out_a, out_b, partial_a, partial_b,
                                                                               rows, width);
  CUDA_CHECK_LAUNCH();
}

void add_layernorm_parameter_gradients_in_chunks(float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                                                 const float* mean, const float* rstd, int N, int C, float* scratch,
                                                 int max_chunks, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  const columns::ChunkPlan plan = columns::plan_chunks(N, max_chunks);
  float* partial_db = scratch + static_cast<std::size_t>(plan.chunks) * static_cast<std::size_t>(C);
  stored::with_policy(stored::common_storage({dout, inp}, "add_layernorm_parameter_gradients"), [&](auto policy) {
    using S = decltype(policy);
    layernorm_partials_kernel<S><<<partials_grid(C, plan), dim3(kTileColumns, kRowLanes), 0, stream>>>(
        scratch, partial_db, stored::elements<S>(dout), stored::elements<S>(inp), mean, rstd, N, C,
        plan.rows_per_chunk);
  });
  CUDA_CHECK_LAUNCH();
  finish(dweight, dbias, scratch, partial_db, C, plan.chunks, stream);
}

void add_layernorm_parameter_gradients(float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                                       const float* mean, const float* rstd, int N, int C, float* scratch,
                                       cudaStream_t stream) {
  add_layernorm_parameter_gradients_in_chunks(dweight, dbias, dout, inp, mean, rstd, N, C, scratch, columns::kChunks,
                                              stream);
}

}  // namespace trident::kernels::cuda
