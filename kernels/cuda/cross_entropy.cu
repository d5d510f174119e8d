// Softmax + cross-entropy, fused, so the [N,Vp] probabilities are never stored (the CPU twin's
// math, kernels/cpu/cross_entropy.cpp):
//   loss_n = log(sum_v exp(l_v - m)) + m - l_target,  m = max_v l_v   (stable: exponents <= 0)
//   dl_v   = (exp(l_v - m) / sum - [v == target]) * dloss
// One block per row (kRowThreads threads striding over the vocabulary; block_max, block_sum).
// The exponential sum is accumulated in double, as on the CPU: V is ~50k terms and the loss is
// a small difference of large sums. The padded columns V..Vp are never read; backward writes
// them 0 so that the LM-head matmul backward sees no gradient there.
//
// Aliasing (dlogits == logits): every read of the row for the max and the sum happens before
// the block reduction that ends that pass (block_sum synchronises the block), and in the final
// pass each thread reads logit v and then writes gradient v itself, so no thread overwrites a
// logit another thread has still to read.
//
// Sharded (vocabulary-parallel) pieces: the same row loops over a rank's V_local real columns,
// with the global max and sum (reduced across ranks by the caller) passed in. The local sum is
// accumulated in double and handed over as a float, like the CPU twin. V_local may be 0 (an
// all-padding shard): row max -infinity, sum 0, target logit 0, gradient all zeros.
#include <cmath>
#include <cstddef>

#include "kernels/cuda/block_reduce.cuh"  // block_max, block_sum
#include "kernels/cuda/cross_entropy.cuh"
#include "kernels/cuda/cuda_check.h"      // CUDA_CHECK_LAUNCH
#include "kernels/cuda/launch_shape.cuh"  // kRowThreads, elementwise_blocks, grid-stride helpers

namespace trident::kernels::cuda {

namespace {

// Max of row[0..V), V >= 1, over the block; every thread gets it.
__device__ float row_max_of(const float* row, int V) {
  float local = -INFINITY;
  for (int v = threadIdx.x; v < V; v += blockDim.x) local = fmaxf(local, row[v]);
  return block_max(local);
}

// sum_{v < V} exp(row[v] - row_max) in double, over the block; every thread gets it.
__device__ double exp_sum(const float* row, float row_max, int V) {
  double local = 0.0;
  for (int v = threadIdx.x; v < V; v += blockDim.x) {
    local += static_cast<double>(expf(row[v] - row_max));
  }
  return block_sum(local);
}

// The local column of a global target id, or -1 when it is not a real column of this shard.
__device__ int local_target(int32_t target, int vocab_begin, int V_local) {
  const int local = target - vocab_begin;
  return local >= 0 && local < V_local ? local : -1;
}

// Row n of a [N, columns] matrix.
__device__ std::size_t row_offset(int n, int columns) {
  return static_cast<std::size_t>(n) * columns;
}

__global__ void cross_entropy_forward_kernel(float* losses, const float* logits,
                                             const int32_t* targets, int V, int Vp) {
  const int n = blockIdx.x;
  const float* row = logits + row_offset(n, Vp);
  const float row_max = row_max_of(row, V);
  const double sum = exp_sum(row, row_max, V);
  if (threadIdx.x == 0) {
    const double loss =
        log(sum) + static_cast<double>(row_max) - static_cast<double>(row[targets[n]]);
    losses[n] = static_cast<float>(loss);
  }
}

__global__ void cross_entropy_backward_kernel(float* dlogits, const float* logits,
                                              const int32_t* targets, float dloss, int V, int Vp) {
  const int n = blockIdx.x;
  const float* row = logits + row_offset(n, Vp);
  float* drow = dlogits + row_offset(n, Vp);
  const int target = targets[n];
  const float row_max = row_max_of(row, V);
  const float factor = static_cast<float>(static_cast<double>(dloss) / exp_sum(row, row_max, V));
  for (int v = threadIdx.x; v < Vp; v += blockDim.x) {
    float grad = 0.0f;  // padding
    if (v < V) {
      grad = expf(row[v] - row_max) * factor;
      if (v == target) grad -= dloss;
    }
    drow[v] = grad;
  }
}

__global__ void fill_kernel(float* x, float value, std::size_t n) {
  for (std::size_t i = grid_first_index(); i < n; i += grid_stride()) x[i] = value;
}

__global__ void cross_entropy_row_max_kernel(float* row_max, const float* logits, int V_local,
                                             int Vp_local) {
  const int n = blockIdx.x;
  const float m = row_max_of(logits + row_offset(n, Vp_local), V_local);
  if (threadIdx.x == 0) row_max[n] = m;
}

__global__ void cross_entropy_row_sums_kernel(float* row_sumexp, float* target_logit,
                                              const float* logits, const int32_t* targets,
                                              const float* row_max, int V_local, int Vp_local,
                                              int vocab_begin) {
  const int n = blockIdx.x;
  const float* row = logits + row_offset(n, Vp_local);
  // exp_sum is a block reduction: every thread calls it, also when V_local is 0 (sum 0).
  const double sum = exp_sum(row, row_max[n], V_local);
  if (threadIdx.x == 0) {
    row_sumexp[n] = static_cast<float>(sum);
    const int t = local_target(targets[n], vocab_begin, V_local);
    target_logit[n] = t >= 0 ? row[t] : 0.0f;
  }
}

__global__ void cross_entropy_backward_sharded_kernel(float* dlogits, const float* logits,
                                                      const int32_t* targets, const float* row_max,
                                                      const float* row_sumexp, float dloss,
                                                      int V_local, int Vp_local, int vocab_begin) {
  const int n = blockIdx.x;
  const float* row = logits + row_offset(n, Vp_local);
  float* drow = dlogits + row_offset(n, Vp_local);
  const int t = local_target(targets[n], vocab_begin, V_local);
  const float m = row_max[n];
  // Read only when there are real columns: an all-padding shard's sum is 0.
  const float factor =
      V_local > 0
          ? static_cast<float>(static_cast<double>(dloss) / static_cast<double>(row_sumexp[n]))
          : 0.0f;
  for (int v = threadIdx.x; v < Vp_local; v += blockDim.x) {
    float grad = 0.0f;  // padding
    if (v < V_local) {
      grad = expf(row[v] - m) * factor;
      if (v == t) grad -= dloss;
    }
    drow[v] = grad;
  }
}

}  // namespace

void cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int N, int V,
                           int Vp, cudaStream_t stream) {
  if (N == 0) return;
  cross_entropy_forward_kernel<<<N, kRowThreads, 0, stream>>>(losses, logits, targets, V, Vp);
  CUDA_CHECK_LAUNCH();
}

void cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets,
                            float dloss, int N, int V, int Vp, cudaStream_t stream) {
  if (N == 0) return;
  cross_entropy_backward_kernel<<<N, kRowThreads, 0, stream>>>(dlogits, logits, targets, dloss, V,
                                                               Vp);
  CUDA_CHECK_LAUNCH();
}

void cross_entropy_row_max(float* row_max, const float* logits, int N, int V_local, int Vp_local,
                           cudaStream_t stream) {
  if (N == 0) return;
  if (V_local <= 0) {
    const auto n = static_cast<std::size_t>(N);
    fill_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(row_max, -INFINITY, n);
  } else {
    cross_entropy_row_max_kernel<<<N, kRowThreads, 0, stream>>>(row_max, logits, V_local, Vp_local);
  }
  CUDA_CHECK_LAUNCH();
}

void cross_entropy_row_sums(float* row_sumexp, float* target_logit, const float* logits,
                            const int32_t* targets, const float* row_max, int N, int V_local,
                            int Vp_local, int vocab_begin, cudaStream_t stream) {
  if (N == 0) return;
  cross_entropy_row_sums_kernel<<<N, kRowThreads, 0, stream>>>(
      row_sumexp, target_logit, logits, targets, row_max, V_local < 0 ? 0 : V_local, Vp_local,
      vocab_begin);
  CUDA_CHECK_LAUNCH();
}

void cross_entropy_backward_sharded(float* dlogits, const float* logits, const int32_t* targets,
                                    const float* row_max, const float* row_sumexp, float dloss,
                                    int N, int V_local, int Vp_local, int vocab_begin,
                                    cudaStream_t stream) {
  if (N == 0 || Vp_local == 0) return;
  cross_entropy_backward_sharded_kernel<<<N, kRowThreads, 0, stream>>>(
      dlogits, logits, targets, row_max, row_sumexp, dloss, V_local < 0 ? 0 : V_local, Vp_local,
      vocab_begin);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trident::kernels::cuda
