// Online-softmax cross-entropy rows: the candidates of the playground programs
// cross_entropy_forward and cross_entropy_shard_statistics (perf/kernels/README.md), and their
// host replays.
//
// The production kernels (kernels/cuda/cross_entropy.cu) read each row twice: a block max, then
// the sum of exp(l - max) on it. Here each thread keeps a running (max, sum) over the values it
// reads, rescaling its sum when its max grows,
//   x > max:  sum = sum * exp(max - x) + 1,  max = x
//   else:     sum += exp(x - max),
// and the block merges the threads' pairs, (m1, s1) + (m2, s2) = (m, s1 exp(m1 - m) + s2 exp(m2 - m))
// with m = max(m1, m2), in the order of block_reduce.cuh (a warp butterfly, then warp 0 over
// the warps' results). One read of the row instead of two: with the backward's one pass on the
// statistics the forward hands out, 3 passes over the [N, Vp] logits per micro-batch instead
// of 4. The sums are double, as in production and the CPU twin; each exponential is a float
// expf. A new max in a thread is rare after its first few values (about ln k of k random
// values), so the rescaling costs little.
//
// Loads: 16 bytes at a time (4 fp32 or 8 bf16 values) when the row starts 16-byte aligned,
// chunk c of the row to thread c % threads, then the V % (16 / sizeof E) tail one value per
// thread; one value per load otherwise. The decision is per row (the kernels check the
// address), so any Vp works.
//
// Determinism: the merge is symmetric (fmaxf, and a + b in double), so all lanes of the
// butterfly hold the same bits, and the block's order is fixed by its shape: run to run the
// same bits. The result differs from production's in the last bits (another order of the
// additions, the rescale factors' roundings), which the playground's tolerance covers.
//
// Host replay: thread_running and merged are __host__ __device__; replay_row runs every thread
// of a block in turn and emulates the butterfly, so the replays check the index arithmetic
// (vector chunks, tails, threads with no values, all-padding shards) and the math against the
// CPU twin without a GPU. What they cannot check: the shuffles and shared memory themselves
// (block_merged), and the device expf (within 2 ulp of the host's).
#pragma once

#include <cuda_runtime.h>  // uint4, __shfl_xor_sync, cudaStream_t, cudaGetLastError

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cuda/block_reduce.cuh"  // kWarpSize, kFullWarpMask (the production reduction's shape)
#include "kernels/stored_element.h"        // stored::Fp32, stored::Bf16: load as fp32

namespace trident::playground::online_ce {

// Threads per block: the production kRowThreads, so both read a row with the same parallelism.
inline constexpr int kThreads = 256;
inline constexpr int kVectorBytes = 16;

// A running max and the double sum of exp(value - max) over the values seen. No default member
// initializers: the block merge keeps these in __shared__ memory.
struct RunningSoftmax {
  float max;
  double sum;
};

__host__ __device__ inline RunningSoftmax empty_running() { return {-INFINITY, 0.0}; }

// One more value. The first value takes the first branch (exp(-inf) = 0: sum = 1).
__host__ __device__ inline void add(RunningSoftmax& r, float x) {
  if (x > r.max) {
    r.sum = r.sum * static_cast<double>(expf(r.max - x)) + 1.0;
    r.max = x;
  } else {
    r.sum += static_cast<double>(expf(x - r.max));
  }
}

// Two threads' pairs as one; symmetric in a and b, bit for bit. Two empty pairs stay empty
// (exp(-inf - -inf) would be NaN).
__host__ __device__ inline RunningSoftmax merged(RunningSoftmax a, RunningSoftmax b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return a;
  return {m, a.sum * static_cast<double>(expf(a.max - m)) + b.sum * static_cast<double>(expf(b.max - m))};
}

// 16 bytes of elements, loaded as one uint4 on the device (ld.global.v4) and copied on the host.
template <class E>
struct Pack {
  static constexpr int kCount = kVectorBytes / static_cast<int>(sizeof(E));
  E values[kCount];
};

template <class E>
__host__ __device__ inline Pack<E> load_pack(const E* src) {
  Pack<E> pack;
#ifdef __CUDA_ARCH__
  const uint4 raw = *reinterpret_cast<const uint4*>(src);
  memcpy(&pack, &raw, sizeof pack);
#else
  std::memcpy(&pack, src, sizeof pack);
#endif
  return pack;
}

// Thread `thread` of `threads`: its running pair over row[0, V) (see the file comment for which
// values it reads). `vectorized` only when the row starts 16-byte aligned.
template <class S, class E = typename S::Element>
__host__ __device__ inline RunningSoftmax thread_running(const E* row, int V, bool vectorized, int thread,
                                                         int threads) {
  RunningSoftmax r = empty_running();
  int tail_begin = 0;
  if (vectorized) {
    constexpr int kCount = Pack<E>::kCount;
    const int chunks = V / kCount;
    for (int c = thread; c < chunks; c += threads) {
      const Pack<E> pack = load_pack(row + static_cast<std::size_t>(c) * kCount);
      for (int i = 0; i < kCount; i++) add(r, S::load(pack.values[i]));
    }
    tail_begin = chunks * kCount;
  }
  for (int v = tail_begin + thread; v < V; v += threads) add(r, S::load(row[v]));
  return r;
}

__host__ __device__ inline bool starts_aligned(const void* row) {
  return reinterpret_cast<std::uintptr_t>(row) % kVectorBytes == 0;
}

// What thread 0 writes from the block's pair (kernels and replays alike).
__host__ __device__ inline float loss_of(const RunningSoftmax& r, float target_logit) {
  return static_cast<float>(log(r.sum) + static_cast<double>(r.max) - static_cast<double>(target_logit));
}

// The target's logit when it is a real column of this shard (ids [vocab_begin, vocab_begin +
// V_local)), else 0.
template <class S, class E = typename S::Element>
__host__ __device__ inline float shard_target_logit(const E* row, int32_t target, int vocab_begin, int V_local) {
  const int t = target - vocab_begin;
  return t >= 0 && t < V_local ? S::load(row[t]) : 0.0f;
}

// ---- device: the block merge and the two kernels ------------------------------------------

__device__ inline RunningSoftmax warp_merged(RunningSoftmax r) {
  using trident::kernels::cuda::kFullWarpMask;
  for (int offset = trident::kernels::cuda::kWarpSize / 2; offset > 0; offset /= 2) {
    const RunningSoftmax other{__shfl_xor_sync(kFullWarpMask, r.max, offset),
                               __shfl_xor_sync(kFullWarpMask, r.sum, offset)};
    r = merged(r, other);
  }
  return r;
}

// block_reduce's scheme for the pair; every thread gets the block's result. blockDim.x is a
// multiple of 32; every thread calls it.
__device__ inline RunningSoftmax block_merged(RunningSoftmax r) {
  constexpr int kWarpSize = trident::kernels::cuda::kWarpSize;
  __shared__ float warp_max[1024 / kWarpSize];
  __shared__ double warp_sum[1024 / kWarpSize];
  __shared__ float block_max;
  __shared__ double block_sum;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  r = warp_merged(r);
  if (lane == 0) {
    warp_max[warp] = r.max;
    warp_sum[warp] = r.sum;
  }
  __syncthreads();
  if (warp == 0) {
    RunningSoftmax partial = lane < warps ? RunningSoftmax{warp_max[lane], warp_sum[lane]} : empty_running();
    partial = warp_merged(partial);
    if (lane == 0) {
      block_max = partial.max;
      block_sum = partial.sum;
    }
  }
  __syncthreads();
  return {block_max, block_sum};
}

// The production forward's contract (kernels/cuda/cross_entropy.cuh): losses, and row_max and
// row_sumexp when not null.
template <class S, class E = typename S::Element>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(float* losses, float* row_max, float* row_sumexp, const E* logits, const int32_t* targets, int V,
                   int Vp, bool allow_vectors) {
  const int n = blockIdx.x;
  const E* row = logits + static_cast<std::size_t>(n) * Vp;
  const bool vectorized = allow_vectors && starts_aligned(row);
  const RunningSoftmax r = block_merged(thread_running<S>(row, V, vectorized, threadIdx.x, blockDim.x));
  if (threadIdx.x == 0) {
    losses[n] = loss_of(r, S::load(row[targets[n]]));
    if (row_max != nullptr) {
      row_max[n] = r.max;
      row_sumexp[n] = static_cast<float>(r.sum);
    }
  }
}

// The production shard statistics' contract: stats[n], stats[N + n], stats[2N + n] = the
// shard's row max (-infinity when V_local is 0), the float sum of exp(l - that max), the
// target's logit when this shard holds it (else 0).
template <class S, class E = typename S::Element>
__global__ void __launch_bounds__(kThreads)
    shard_statistics_kernel(float* stats, const E* logits, const int32_t* targets, int V_local, int Vp_local,
                            int vocab_begin) {
  const int n = blockIdx.x;
  const std::size_t N = gridDim.x;
  const E* row = logits + static_cast<std::size_t>(n) * Vp_local;
  const RunningSoftmax r =
      block_merged(thread_running<S>(row, V_local, starts_aligned(row), threadIdx.x, blockDim.x));
  if (threadIdx.x == 0) {
    stats[n] = r.max;
    stats[N + n] = static_cast<float>(r.sum);
    stats[2 * N + n] = shard_target_logit<S>(row, targets[n], vocab_begin, V_local);
  }
}

// Launchers: one block of kThreads per row; the launch's error, if any, is returned.
template <class S, class E = typename S::Element>
cudaError_t forward(float* losses, float* row_max, float* row_sumexp, const E* logits, const int32_t* targets, int N,
                    int V, int Vp, bool allow_vectors, cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  forward_kernel<S><<<N, kThreads, 0, stream>>>(losses, row_max, row_sumexp, logits, targets, V, Vp, allow_vectors);
  return cudaGetLastError();
}

template <class S, class E = typename S::Element>
cudaError_t shard_statistics(float* stats, const E* logits, const int32_t* targets, int N, int V_local, int Vp_local,
                             int vocab_begin, cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  shard_statistics_kernel<S><<<N, kThreads, 0, stream>>>(stats, logits, targets, V_local < 0 ? 0 : V_local, Vp_local,
                                                         vocab_begin);
  return cudaGetLastError();
}

// ---- host replay ----------------------------------------------------------------------------

// What one block computes for a row: every thread's pair, then the butterfly within each warp
// (lane l merges its pair with lane l ^ offset's, offsets 16 down to 1), then warp 0 over the
// warps' lane-0 results (empty pairs past the last warp).
template <class S, class E = typename S::Element>
RunningSoftmax replay_row(const E* row, int V, bool vectorized, int threads = kThreads) {
  constexpr int kWarpSize = trident::kernels::cuda::kWarpSize;
  auto butterfly = [](std::vector<RunningSoftmax> lanes) {
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      std::vector<RunningSoftmax> next(lanes.size());
      for (int l = 0; l < kWarpSize; l++) next[l] = merged(lanes[l], lanes[l ^ offset]);
      lanes = next;
    }
    return lanes[0];
  };
  const int warps = threads / kWarpSize;
  std::vector<RunningSoftmax> warp_results(kWarpSize, empty_running());
  for (int w = 0; w < warps; w++) {
    std::vector<RunningSoftmax> lanes(kWarpSize);
    for (int l = 0; l < kWarpSize; l++) lanes[l] = thread_running<S>(row, V, vectorized, w * kWarpSize + l, threads);
    warp_results[w] = butterfly(lanes);
  }
  return butterfly(warp_results);
}

template <class S, class E = typename S::Element>
void replay_forward(float* losses, float* row_max, float* row_sumexp, const E* logits, const int32_t* targets, int N,
                    int V, int Vp, bool vectorized) {
  for (int n = 0; n < N; n++) {
    const E* row = logits + static_cast<std::size_t>(n) * Vp;
    const RunningSoftmax r = replay_row<S>(row, V, vectorized);
    losses[n] = loss_of(r, S::load(row[targets[n]]));
    row_max[n] = r.max;
    row_sumexp[n] = static_cast<float>(r.sum);
  }
}

template <class S, class E = typename S::Element>
void replay_shard_statistics(float* stats, const E* logits, const int32_t* targets, int N, int V_local, int Vp_local,
                             int vocab_begin, bool vectorized) {
  const auto rows = static_cast<std::size_t>(N);
  for (int n = 0; n < N; n++) {
    const E* row = logits + static_cast<std::size_t>(n) * Vp_local;
    const RunningSoftmax r = replay_row<S>(row, V_local, vectorized);
    stats[n] = r.max;
    stats[rows + n] = static_cast<float>(r.sum);
    stats[2 * rows + n] = shard_target_logit<S>(row, targets[n], vocab_begin, V_local);
  }
}

}  // namespace trident::playground::online_ce
