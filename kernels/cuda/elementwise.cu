// Elementwise kernels: memory-bound, so one grid-stride loop each (launch_shape.cuh), one
// element per iteration, coalesced. out may alias a or b: each element is read and written by
// the same thread at the same index. `add` (the residual stream) is templated on the storage
// (kernels/stored_element.h): fp32, or bf16/fp16 buffers read and rounded once as they are.
//
// sum_squares is a two-stage reduction in double, like the CPU twin (it feeds the global
// gradient norm over ~1e8 elements, where a float sum would lose the small terms):
//   stage 1: sum_squares_blocks(n) blocks (1024 from 2M floats on; one per 2048 floats below, so
//            that a short range does not start 262,144 threads), each grid-strides over x 16
//            bytes (4 floats) a load, two loads issued before either is used, squares in double,
//            reduces its block with block_sum and writes one partial. The up to 3 floats before the first 16-byte
//            boundary and after the last are block 0's first thread's. (One 4-byte load a thread
//            in 256 blocks took 4.7 ms over GPT-2 774M's gradients on an H100, 3.1 GB: a quarter
//            of its bandwidth, the loads' latency uncovered.)
//   stage 2: one block reduces the partials into scratch[kSumSquaresBlocks].
// A grid fixed by n gives a fixed order of additions, so the result is the same on every run
// (no atomics). The scalar is copied back and the stream waited for.
#include <cuda_bf16.h>  // __float2bfloat16_rn
#include <cuda_fp16.h>  // __float2half_rn
#include <cuda_runtime.h>  // cudaMemcpyAsync

#include <cstdint>  // std::uintptr_t

#include "kernels/cuda/block_reduce.cuh"  // block_sum
#include "kernels/cuda/cuda_check.h"      // CUDA_CHECK, CUDA_CHECK_LAUNCH
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/launch_shape.cuh"  // elementwise_blocks, grid_first_index, grid_stride
#include "kernels/stored_element.h"        // stored::with_policy, elements, common_storage

namespace trident::kernels::cuda {

namespace {

template <class S>
__global__ void add_kernel(typename S::Element* out, const typename S::Element* a, const typename S::Element* b,
                           std::size_t n) {
  for (std::size_t i = grid_first_index(); i < n; i += grid_stride()) out[i] = S::store(S::load(a[i]) + S::load(b[i]));
}

__global__ void accumulate_kernel(float* dst, const float* src, std::size_t n) {
  for (std::size_t i = grid_first_index(); i < n; i += grid_stride()) dst[i] += src[i];
}

__global__ void scale_kernel(float* x, float factor, std::size_t n) {
  for (std::size_t i = grid_first_index(); i < n; i += grid_stride()) x[i] *= factor;
}

__global__ void round_to_bf16_kernel(float* dst, const float* src, std::size_t n) {
  for (std::size_t i = grid_first_index(); i < n; i += grid_stride()) dst[i] = __bfloat162float(__float2bfloat16_rn(src[i]));
}

__global__ void round_to_fp16_kernel(float* dst, const float* src, std::size_t n) {
  for (std::size_t i = grid_first_index(); i < n; i += grid_stride()) dst[i] = __half2float(__float2half_rn(src[i]));
}

__device__ __forceinline__ double squares_of(float4 q) {
  const double a = q.x, b = q.y, c = q.z, d = q.w;
  return (a * a + b * b) + (c * c + d * d);
}

// Stage 1: partials[blockIdx.x] = sum of x[i]^2 over this block's share of the grid stride.
__global__ void sum_squares_partial_kernel(double* partials, const float* x, std::size_t n) {
  // x is 4-byte aligned (a float*): 0 to 3 floats reach the next 16-byte boundary.
  const std::size_t to_boundary = ((16 - (reinterpret_cast<std::uintptr_t>(x) & 15)) & 15) / sizeof(float);
  const std::size_t head = to_boundary < n ? to_boundary : n;
  const std::size_t quads = (n - head) / 4;
  const auto* body = reinterpret_cast<const float4*>(x + head);
  double local = 0.0;
  const std::size_t stride = grid_stride();
  std::size_t q = grid_first_index();
  for (; q + stride < quads; q += 2 * stride) {
    const float4 first = body[q], second = body[q + stride];
    local += squares_of(first);
    local += squares_of(second);
  }
  if (q < quads) local += squares_of(body[q]);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    for (std::size_t i = 0; i < head; ++i) local += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    for (std::size_t i = head + 4 * quads; i < n; ++i) local += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  }
  const double block_total = block_sum(local);
  if (threadIdx.x == 0) partials[blockIdx.x] = block_total;
}

// Stage 2, one block: *total = sum of the `count` partials.
__global__ void sum_partials_kernel(double* total, const double* partials, int count) {
  double local = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) local += partials[i];
  const double block_total = block_sum(local);
  if (threadIdx.x == 0) *total = block_total;
}

}  // namespace

void add(ActPtr out, ConstActPtr a, ConstActPtr b, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  stored::with_policy(stored::common_storage({out, a, b}, "add"), [&](auto policy) {
    using S = decltype(policy);
    add_kernel<S><<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(
        stored::elements<S>(out), stored::elements<S>(a), stored::elements<S>(b), n);
  });
  CUDA_CHECK_LAUNCH();
}

void accumulate(float* dst, const float* src, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  accumulate_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(dst, src, n);
  CUDA_CHECK_LAUNCH();
}

void scale(float* x, float factor, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  scale_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(x, factor, n);
  CUDA_CHECK_LAUNCH();
}

double sum_squares(const float* x, std::size_t n, double* scratch, cudaStream_t stream) {
  if (n == 0) return 0.0;
  const ElementRange all{0, n};
  double result = 0.0;
  return sum_squares_of_ranges(x, &all, 1, scratch, scratch + kSumSquaresBlocks, &result, stream);
}

double sum_squares_of_ranges(const float* base, const ElementRange* ranges, std::size_t count, double* scratch,
                             double* totals, double* host_totals, cudaStream_t stream) {
  if (count == 0) return 0.0;
  // The partials are reused range after range: stream order keeps each range's second stage
  // ahead of the next range's first.
  double* partials = scratch;
  for (std::size_t i = 0; i < count; ++i) {
    if (ranges[i].count == 0) {
      CUDA_CHECK(cudaMemsetAsync(totals + i, 0, sizeof(double), stream));
      continue;
    }
    const int blocks = sum_squares_blocks(ranges[i].count);
    sum_squares_partial_kernel<<<blocks, kElementwiseThreads, 0, stream>>>(partials, base + ranges[i].offset,
                                                                          ranges[i].count);
    CUDA_CHECK_LAUNCH();
    sum_partials_kernel<<<1, kElementwiseThreads, 0, stream>>>(totals + i, partials, blocks);
    CUDA_CHECK_LAUNCH();
  }
  CUDA_CHECK(cudaMemcpyAsync(host_totals, totals, count * sizeof(double), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  double total = 0.0;
  for (std::size_t i = 0; i < count; ++i) total += host_totals[i];
  return total;
}

void round_to_precision(float* dst, const float* src, std::size_t n, Precision precision, cudaStream_t stream) {
  if (n == 0) return;
  switch (precision) {
    case Precision::kFp32:
      if (dst != src) CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
      return;
    case Precision::kBf16:
      round_to_bf16_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(dst, src, n);
      break;
    case Precision::kFp16:
      round_to_fp16_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(dst, src, n);
      break;
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace trident::kernels::cuda
