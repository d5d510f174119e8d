// The former production cross-entropy row statistics, kept to time against (they left
// kernels/cuda/cross_entropy.cu when the one-read online kernels replaced them): a block of 256
// threads per row takes the row's max, then the sum of exp(l - max) on it: two reads of the
// row, the second partly from L2. The fused forward and the shard statistics, as they were.
#pragma once

#include <cuda_runtime.h>  // cudaStream_t, cudaGetLastError

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/block_reduce.cuh"  // block_max, block_sum
#include "kernels/cuda/launch_shape.cuh"  // kRowThreads

namespace trident::playground::two_pass {

namespace kc = trident::kernels::cuda;

template <class S, class E = typename S::Element>
__device__ float row_max_of(const E* row, int V) {
  float local = -INFINITY;
  for (int v = threadIdx.x; v < V; v += blockDim.x) local = fmaxf(local, S::load(row[v]));
  return kc::block_max(local);
}

template <class S, class E = typename S::Element>
__device__ double exp_sum(const E* row, float row_max, int V) {
  double local = 0.0;
  for (int v = threadIdx.x; v < V; v += blockDim.x) local += static_cast<double>(expf(S::load(row[v]) - row_max));
  return kc::block_sum(local);
}

template <class S, class E = typename S::Element>
__global__ void forward_kernel(float* losses, float* row_max, float* row_sumexp, const E* logits,
                               const int32_t* targets, int V, int Vp) {
  const int n = blockIdx.x;
  const E* row = logits + static_cast<std::size_t>(n) * Vp;
  const float max = row_max_of<S>(row, V);
  const double sum = exp_sum<S>(row, max, V);
  if (threadIdx.x == 0) {
    const double loss = log(sum) + static_cast<double>(max) - static_cast<double>(S::load(row[targets[n]]));
    losses[n] = static_cast<float>(loss);
    if (row_max != nullptr) {
      row_max[n] = max;
      row_sumexp[n] = static_cast<float>(sum);
    }
  }
}

template <class S, class E = typename S::Element>
__global__ void shard_statistics_kernel(float* stats, const E* logits, const int32_t* targets, int V_local,
                                        int Vp_local, int vocab_begin) {
  const int n = blockIdx.x;
  const std::size_t N = gridDim.x;
  const E* row = logits + static_cast<std::size_t>(n) * Vp_local;
  const float max = row_max_of<S>(row, V_local);
  const double sum = exp_sum<S>(row, max, V_local);
  if (threadIdx.x == 0) {
    stats[n] = max;
    stats[N + n] = V_local > 0 ? static_cast<float>(sum) : 0.0f;
    const int t = targets[n] - vocab_begin;
    stats[2 * N + n] = t >= 0 && t < V_local ? S::load(row[t]) : 0.0f;
  }
}

// Launchers: one block of kRowThreads per row; the launch's error, if any, is returned.
template <class S, class E = typename S::Element>
cudaError_t forward(float* losses, float* row_max, float* row_sumexp, const E* logits, const int32_t* targets, int N,
                    int V, int Vp, cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  forward_kernel<S><<<N, kc::kRowThreads, 0, stream>>>(losses, row_max, row_sumexp, logits, targets, V, Vp);
  return cudaGetLastError();
}

template <class S, class E = typename S::Element>
cudaError_t shard_statistics(float* stats, const E* logits, const int32_t* targets, int N, int V_local, int Vp_local,
                             int vocab_begin, cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  shard_statistics_kernel<S><<<N, kc::kRowThreads, 0, stream>>>(stats, logits, targets, V_local, Vp_local,
                                                                vocab_begin);
  return cudaGetLastError();
}

}  // namespace trident::playground::two_pass
