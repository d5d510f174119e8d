// Softmax + cross-entropy, fused, so the [N,Vp] probabilities are never stored (the CPU twin's
// math, kernels/cpu/cross_entropy.cpp):
//   loss_n = log(sum_v exp(l_v - m)) + m - l_target,  m = max_v l_v   (stable: exponents <= 0)
//   dl_v   = (exp(l_v - m) / sum - [v == target]) * dloss
// One block per row (kLossRowThreads = 1024 threads for the row statistics, kRowThreads = 256
// for the backward on given statistics, striding over the vocabulary). The forward and the
// shard statistics read the row once (cross_entropy_math.h: each thread a running max and
// rescaled sum, merged over the block); the backward on given statistics reads it once more
// and writes the gradient. With tensor parallelism that is 3 passes over the logits per
// micro-batch (the shards' statistics are gathered in between). Without it a training step
// runs cross_entropy_forward_backward: the forward's block goes on to write the row's gradient
// with the statistics it has just made, so its second read of the row comes soon after the
// first (from L2 where the row is still there) and the logits make 2 passes through memory, one
// read and one write, not 3. The same arithmetic as the forward then the backward on its
// statistics (the sum rounded to float before the division, as the backward reads it): the
// same bits. (cross_entropy_backward, which finds the max and sum itself, takes two passes
// for them: the model does not call it.) The exponential sum is accumulated in double, as on
// the CPU: V is ~50k terms and the loss is a small difference of large sums. The padded columns
// V..Vp are never read; backward writes them 0 so that the LM-head matmul backward sees no
// gradient there.
//
// Aliasing (dlogits == logits): every read of the row for the max and the sum (and the fused
// kernel's read of the target's logit) happens before the block reduction that ends that pass
// (block_sum and block_merged synchronise the block), and in the final pass each thread reads
// logit v and then writes gradient v itself, so no thread overwrites a logit another thread has
// still to read.
//
// Sharded (vocabulary-parallel) pieces: the same row loops over a rank's V_local real columns.
// The statistics kernel hands out the shard's max and its sum of exp(l - that max), accumulated
// in double and rounded to float, like the CPU twin (in one read, as the forward); the caller
// gathers them and the combine kernel rescales each shard's sum to the row's max. The backward
// gets the row's max and sum.
// V_local may be 0 (an all-padding shard): max -infinity, sum 0, target logit 0, gradient all
// zeros.
//
// The logits and their gradients are templated on their storage (kernels/stored_element.h):
// fp32 buffers, or bf16/fp16 ones read as they are (each gradient rounded once when stored);
// the losses and the row statistics are fp32 in every storage.
#include <cmath>
#include <cstddef>

#include "kernels/cuda/block_reduce.cuh"  // block_max, block_sum
#include "kernels/cuda/cross_entropy.cuh"
#include "kernels/cuda/cross_entropy_math.h"  // softmax::Running, thread_running, merged, loss_of
#include "kernels/cuda/cuda_check.h"      // CUDA_CHECK_LAUNCH
#include "kernels/cuda/launch_shape.cuh"  // kRowThreads, kLossRowThreads, elementwise_blocks, grid-stride
#include "kernels/cuda/softmax_block.cuh"  // softmax::block_merged, BackwardRow, store_row_statistics
#include "kernels/cuda/vector_pack.h"   // Pack, load_pack, store_pack, starts_aligned (CrossEntropyLoads::kPacks)
#include "kernels/stored_element.h"        // stored::with_policy, elements, common_storage

namespace trident::kernels::cuda {

namespace {

using softmax::BackwardRow;
using softmax::block_merged;

// Max of row[0..V) over the block (-infinity when V is 0); every thread gets it.
template <class S, class E = typename S::Element>
__device__ float row_max_of(const E* row, int V) {
  float local = -INFINITY;
  for (int v = threadIdx.x; v < V; v += blockDim.x) local = fmaxf(local, S::load(row[v]));
  return block_max(local);
}

// sum_{v < V} exp(row[v] - row_max) in double, over the block; every thread gets it.
template <class S, class E = typename S::Element>
__device__ double exp_sum(const E* row, float row_max, int V) {
  double local = 0.0;
  for (int v = threadIdx.x; v < V; v += blockDim.x) {
    local += static_cast<double>(expf(S::load(row[v]) - row_max));
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

// Row n's BackwardRow from the statistics as stored.
__device__ __forceinline__ BackwardRow backward_row(int n, const int32_t* targets, const float* row_max,
                                                    const float* row_sumexp, float dloss, int V_local,
                                                    int vocab_begin) {
  // The sum is read only when there are real columns: an all-padding shard's sum is 0.
  const float factor =
      V_local > 0 ? static_cast<float>(static_cast<double>(dloss) / static_cast<double>(row_sumexp[n])) : 0.0f;
  return BackwardRow{local_target(targets[n], vocab_begin, V_local), row_max[n], factor};
}

// The row's statistics in one read (cross_entropy_math.h), 16-byte loads where it is aligned.
template <class S, class E = typename S::Element>
__device__ softmax::Running row_statistics(const E* row, int V) {
  return block_merged(softmax::thread_running<S>(row, V, starts_aligned(row), threadIdx.x, blockDim.x));
}

template <class S, class E = typename S::Element>
__global__ void __launch_bounds__(kLossRowThreads, kLossRowBlocksPerSm)
    cross_entropy_forward_kernel(float* losses, float* row_max, float* row_sumexp, const E* logits,
                                             const int32_t* targets, int V, int Vp) {
  const int n = blockIdx.x;
  const E* row = logits + row_offset(n, Vp);
  const softmax::Running r = row_statistics<S>(row, V);
  if (threadIdx.x == 0) {
    losses[n] = softmax::loss_of(r, S::load(row[targets[n]]));
    if (row_max != nullptr) {
      row_max[n] = r.max;
      row_sumexp[n] = static_cast<float>(r.sum);
    }
  }
}

template <class S, class E = typename S::Element>
__global__ void cross_entropy_backward_kernel(E* dlogits, const E* logits, const int32_t* targets, float dloss, int V,
                                              int Vp) {
  const int n = blockIdx.x;
  const E* row = logits + row_offset(n, Vp);
  E* drow = dlogits + row_offset(n, Vp);
  const int target = targets[n];
  const float row_max = row_max_of<S>(row, V);
  const float factor = static_cast<float>(static_cast<double>(dloss) / exp_sum<S>(row, row_max, V));
  for (int v = threadIdx.x; v < Vp; v += blockDim.x) {
    float grad = 0.0f;  // padding
    if (v < V) {
      grad = expf(S::load(row[v]) - row_max) * factor;
      if (v == target) grad -= dloss;
    }
    drow[v] = S::store(grad);
  }
}

// stats[n], stats[N + n], stats[2N + n]: this shard's row max, the sum of exp(l - that max) and
// the target's logit (V_local may be 0: no values, max -infinity, sum 0, no local target).
template <class S, class E = typename S::Element>
__global__ void __launch_bounds__(kLossRowThreads, kLossRowBlocksPerSm)
    cross_entropy_shard_statistics_kernel(float* stats, const E* logits, const int32_t* targets,
                                                      int V_local, int Vp_local, int vocab_begin) {
  const int n = blockIdx.x;
  const std::size_t N = gridDim.x;
  const E* row = logits + row_offset(n, Vp_local);
  const softmax::Running r = row_statistics<S>(row, V_local);  // every thread, also when V_local is 0
  if (threadIdx.x == 0) {
    stats[n] = r.max;
    stats[N + n] = static_cast<float>(r.sum);
    stats[2 * N + n] = softmax::shard_target_logit<S>(row, targets[n], vocab_begin, V_local);
  }
}

// One thread per row: the shards' blocks of gathered[shards * 3N] combined in rank order (the
// CPU twin's loop; every rank gets the same bits from the same blocks).
__global__ void cross_entropy_combine_shards_kernel(float* row_max, float* row_sumexp, float* target_logit,
                                                    const float* gathered, std::size_t N, int shards) {
  for (std::size_t n = grid_first_index(); n < N; n += grid_stride()) {
    float max = -INFINITY;
    for (int r = 0; r < shards; r++) max = fmaxf(max, gathered[static_cast<std::size_t>(r) * 3 * N + n]);
    double sum = 0.0, target = 0.0;
    for (int r = 0; r < shards; r++) {
      const float* block = gathered + static_cast<std::size_t>(r) * 3 * N;
      if (block[n] != -INFINITY) sum += static_cast<double>(block[N + n]) * exp(static_cast<double>(block[n]) - max);
      target += block[2 * N + n];
    }
    row_max[n] = max;
    row_sumexp[n] = static_cast<float>(sum);
    target_logit[n] = static_cast<float>(target);
  }
}

// The gradient of one row, drow[v] for v < Vp_local from row[v] (0 on the padding), as the block
// walks it: kValues, one value a thread at a time; kPacks, 16-byte packs, thread i taking packs
// i, i + blockDim, ... of the row, each read whole and written back whole (its padding values are
// read but not used). Both backward kernels and the fused one write their rows with it.
template <class S, CrossEntropyLoads kAccess, class E>
__device__ void write_row_gradient(E* drow, const E* row, const BackwardRow& r, float dloss, int V_local,
                                   int Vp_local) {
  if constexpr (kAccess == CrossEntropyLoads::kPacks) {
    constexpr int kPack = Pack<E>::kCount;
    for (int p = threadIdx.x; p < Vp_local / kPack; p += blockDim.x) {
      const int v0 = p * kPack;
      Pack<E> pack = load_pack(row + v0);
#pragma unroll
      for (int i = 0; i < kPack; i++) {
        const int v = v0 + i;
        pack.values[i] = S::store(v < V_local ? r.gradient(S::load(pack.values[i]), v, dloss) : 0.0f);
      }
      store_pack(drow + v0, pack);
    }
  } else {
    for (int v = threadIdx.x; v < Vp_local; v += blockDim.x) {
      drow[v] = S::store(v < V_local ? r.gradient(S::load(row[v]), v, dloss) : 0.0f);  // 0: padding
    }
  }
}

template <class S, CrossEntropyLoads kAccess, class E = typename S::Element>
__global__ void cross_entropy_backward_sharded_kernel(E* dlogits, const E* logits, const int32_t* targets,
                                                      const float* row_max, const float* row_sumexp, float dloss,
                                                      int V_local, int Vp_local, int vocab_begin) {
  const int n = blockIdx.x;
  const BackwardRow r = backward_row(n, targets, row_max, row_sumexp, dloss, V_local, vocab_begin);
  write_row_gradient<S, kAccess>(dlogits + row_offset(n, Vp_local), logits + row_offset(n, Vp_local), r, dloss,
                                 V_local, Vp_local);
}

// cross_entropy_forward_kernel's loss and statistics, then the backward's gradient on them, by one
// block per row. The factor is backward_row's from the statistics as stored (the sum rounded to
// float), so every value has the bits of the two kernels.
template <class S, CrossEntropyLoads kAccess, class E = typename S::Element>
__global__ void __launch_bounds__(kLossRowThreads, kLossRowBlocksPerSm)
    cross_entropy_forward_backward_kernel(float* losses, float* row_max, float* row_sumexp, E* dlogits,
                                                      const E* logits, const int32_t* targets, float dloss, int V,
                                                      int Vp) {
  const int n = blockIdx.x;
  const E* row = logits + row_offset(n, Vp);
  const int32_t target = targets[n];
  // Read before row_statistics' barriers, so before any thread writes a gradient over it.
  const float target_logit = threadIdx.x == 0 ? S::load(row[target]) : 0.0f;
  const BackwardRow r = softmax::store_row_statistics(row_statistics<S>(row, V), n, target_logit, target, dloss, V,
                                                      losses, row_max, row_sumexp);
  write_row_gradient<S, kAccess>(dlogits + row_offset(n, Vp), row, r, dloss, V, Vp);
}

// Whether a launch over rows of Vp_local values of E may take kPacks: both buffers 16-byte aligned
// and the rows a whole number of packs (then every row starts aligned too).
template <class E>
bool packs_fit(CrossEntropyLoads access, int Vp_local, const E* dlogits, const E* logits) {
  return access == CrossEntropyLoads::kPacks && Vp_local % Pack<E>::kCount == 0 && starts_aligned(dlogits) &&
         starts_aligned(logits);
}

}  // namespace

void cross_entropy_forward(float* losses, float* row_max, float* row_sumexp, ConstActPtr logits,
                           const int32_t* targets, int N, int V, int Vp, cudaStream_t stream) {
  if (N == 0) return;
  stored::with_policy(logits.storage(), [&](auto policy) {
    using S = decltype(policy);
    cross_entropy_forward_kernel<S><<<N, kLossRowThreads, 0, stream>>>(losses, row_max, row_sumexp,
                                                                   stored::elements<S>(logits), targets, V, Vp);
  });
  CUDA_CHECK_LAUNCH();
}

void cross_entropy_backward(ActPtr dlogits, ConstActPtr logits, const int32_t* targets, float dloss, int N, int V,
                            int Vp, cudaStream_t stream) {
  if (N == 0) return;
  stored::with_policy(stored::common_storage({dlogits, logits}, "cross_entropy_backward"), [&](auto policy) {
    using S = decltype(policy);
    cross_entropy_backward_kernel<S><<<N, kRowThreads, 0, stream>>>(
        stored::elements<S>(dlogits), stored::elements<S>(logits), targets, dloss, V, Vp);
  });
  CUDA_CHECK_LAUNCH();
}

void cross_entropy_shard_statistics(float* stats, ConstActPtr logits, const int32_t* targets, int N, int V_local,
                                    int Vp_local, int vocab_begin, cudaStream_t stream) {
  if (N == 0) return;
  stored::with_policy(logits.storage(), [&](auto policy) {
    using S = decltype(policy);
    cross_entropy_shard_statistics_kernel<S><<<N, kLossRowThreads, 0, stream>>>(
        stats, stored::elements<S>(logits), targets, V_local < 0 ? 0 : V_local, Vp_local, vocab_begin);
  });
  CUDA_CHECK_LAUNCH();
}

void cross_entropy_combine_shards(float* row_max, float* row_sumexp, float* target_logit, const float* gathered,
                                  int N, int shards, cudaStream_t stream) {
  if (N == 0) return;
  const auto n = static_cast<std::size_t>(N);
  cross_entropy_combine_shards_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(
      row_max, row_sumexp, target_logit, gathered, n, shards);
  CUDA_CHECK_LAUNCH();
}

void cross_entropy_backward_sharded(ActPtr dlogits, ConstActPtr logits, const int32_t* targets, const float* row_max,
                                    const float* row_sumexp, float dloss, int N, int V_local, int Vp_local,
                                    int vocab_begin, cudaStream_t stream, CrossEntropyLoads access) {
  if (N == 0 || Vp_local == 0) return;
  const Precision storage = stored::common_storage({dlogits, logits}, "cross_entropy_backward_sharded");
  stored::with_policy(storage, [&](auto policy) {
    using S = decltype(policy);
    auto* d = stored::elements<S>(dlogits);
    const auto* l = stored::elements<S>(logits);
    const int real = V_local < 0 ? 0 : V_local;
    if (packs_fit(access, Vp_local, d, l)) {
      cross_entropy_backward_sharded_kernel<S, CrossEntropyLoads::kPacks><<<N, kRowThreads, 0, stream>>>(
          d, l, targets, row_max, row_sumexp, dloss, real, Vp_local, vocab_begin);
    } else {
      cross_entropy_backward_sharded_kernel<S, CrossEntropyLoads::kValues><<<N, kRowThreads, 0, stream>>>(
          d, l, targets, row_max, row_sumexp, dloss, real, Vp_local, vocab_begin);
    }
  });
  CUDA_CHECK_LAUNCH();
}

void cross_entropy_forward_backward(float* losses, float* row_max, float* row_sumexp, ActPtr dlogits,
                                    ConstActPtr logits, const int32_t* targets, float dloss, int N, int V, int Vp,
                                    cudaStream_t stream, CrossEntropyLoads access) {
  if (N == 0) return;
  const Precision storage = stored::common_storage({dlogits, logits}, "cross_entropy_forward_backward");
  stored::with_policy(storage, [&](auto policy) {
    using S = decltype(policy);
    auto* d = stored::elements<S>(dlogits);
    const auto* l = stored::elements<S>(logits);
    if (packs_fit(access, Vp, d, l)) {
      cross_entropy_forward_backward_kernel<S, CrossEntropyLoads::kPacks>
          <<<N, kLossRowThreads, 0, stream>>>(losses, row_max, row_sumexp, d, l, targets, dloss, V, Vp);
    } else {
      cross_entropy_forward_backward_kernel<S, CrossEntropyLoads::kValues>
          <<<N, kLossRowThreads, 0, stream>>>(losses, row_max, row_sumexp, d, l, targets, dloss, V, Vp);
    }
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trident::kernels::cuda
