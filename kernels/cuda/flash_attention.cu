// Flash attention, fp32 math on fp32 or 16-bit buffers, hs = 64, in the manner of FlashAttention (Dao et al.): tiled, online
// softmax, causal, the T x T matrices never in global memory. The per-thread math and the index
// arithmetic are in flash_attention_math.h (shared with a host replay test); this file holds
// the kernels, which add only the block structure (which thread, which tile, when to sync), and
// the launchers.
//
// Forward: one block per (64-query tile, head, batch element), one thread per query row; K and
// V tiles of 64 keys through shared memory; running max m, sum l and output o per row (online
// softmax); at the end out = o / l and L = m + log(l), the row log-sum-exp that backward needs.
// Backward, three kernels, no atomics (each dqkv element written by one thread, every sum in a
// fixed order: the same bits on every run):
//   (a) D[b,h,t] = dout[t] . out[t] over the head's channels (= rowsum(P * dP));
//   (b) dK, dV: one block per 64-key tile, one thread per key, walking the query tiles at and
//       after the diagonal and recomputing P = exp(S - L), dP, dS = P (dP - D);
//   (c) dQ: one block per 64-query tile, one thread per query, walking the key tiles up to the
//       diagonal the same way.
// Both backward passes recompute S and dP (six products instead of four): the price of having
// no atomics. Correctness first, not fast: 64 threads per block, scalar fp32 FMAs from shared
// memory (a third of the GEMM path's speed on one H100, perf/kernels' variant 2 of
// attention_forward.cu and attention_backward.cu). The tensor-core kernels for 16-bit buffers
// are flash_attention_mma.cu's (the forward) and flash_attention_mma_backward.cu's.
// Every kernel is templated on the storage policy S of qkv, out, dout and dqkv
// (kernels/stored_element.h): 16-bit values are widened as the tiles are loaded and rounded
// once when out or dqkv is stored; lse and D stay fp32. 16-bit buffers on 16-byte boundaries
// (every buffer Trident allocates) go to the tensor-core kernels of flash_attention_mma*.cu
// instead, after (a) here; these scalar kernels keep fp32 and any other 16-bit operands.
#include "kernels/cuda/flash_attention.cuh"

#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/backend.h"                   // flash_attention_scratch_floats
#include "kernels/cuda/cuda_check.h"           // CUDA_CHECK, CUDA_CHECK_LAUNCH
#include "kernels/cuda/flash_attention_math.h"  // the per-thread math and indices
#include "kernels/cuda/flash_attention_mma.cuh"  // the tensor-core kernels for 16-bit buffers

namespace trident::kernels::cuda {

namespace {

using namespace flash;  // kHeadSize, kTile, kPadded, kPart*, the tile functions

template <class S, class E = typename S::Element>
__global__ void __launch_bounds__(kTile)
    flash_forward_kernel(E* __restrict__ out, float* __restrict__ lse, const E* __restrict__ qkv, int T, int C,
                         int NH, float scale) {
  __shared__ float k_tile[kTile * kHeadSize];
  __shared__ float v_tile[kTile * kHeadSize];
  const int q0 = static_cast<int>(blockIdx.x) * kTile;
  const int h = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int tid = static_cast<int>(threadIdx.x);
  const int t = q0 + tid;
  const bool active = t < T;

  float q[kHeadSize];
  float o[kHeadSize];
  const E* q_row = qkv + qkv_index(b, active ? t : 0, kPartQ, h, T, C);
#pragma unroll
  for (int c = 0; c < kHeadSize; c++) {
    q[c] = active ? S::load(q_row[c]) : 0.0f;
    o[c] = 0.0f;
  }
  float m = -INFINITY;
  float l = 0.0f;

  // Key tiles from 0 to the block's last query: tiles wholly above the diagonal are skipped.
  const int last_query = min(q0 + kTile, T) - 1;
  for (int k0 = 0; k0 <= last_query; k0 += kTile) {
    __syncthreads();  // everyone is done with the previous tile
    load_kv_tiles<S>(k_tile, v_tile, kHeadSize, qkv, b, k0, h, T, C, tid);
    __syncthreads();  // the tile is complete
    if (active) forward_tile_update(q, k_tile, v_tile, k0, t, scale, m, l, o);
  }
  if (active) forward_finish<S>(out, lse, o, m, l, b, t, h, T, C, NH);
}

// Thread index -> (b, h, t) in D's own [B, NH, T] order (so the store is coalesced).
template <class S, class E = typename S::Element>
__global__ void flash_delta_kernel(float* __restrict__ delta, const E* __restrict__ dout, const E* __restrict__ out,
                                   int B, int T, int C, int NH) {
  const std::size_t index = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= static_cast<std::size_t>(B) * NH * T) return;
  const int t = static_cast<int>(index % T);
  const int h = static_cast<int>((index / T) % NH);
  const int b = static_cast<int>(index / (static_cast<std::size_t>(T) * NH));
  delta[index] = row_delta<S>(dout, out, b, t, h, T, C);
}

template <class S, class E = typename S::Element>
__global__ void __launch_bounds__(kTile)
    flash_dkdv_kernel(E* __restrict__ dqkv, const E* __restrict__ qkv, const E* __restrict__ dout,
                      const float* __restrict__ lse, const float* __restrict__ delta, int T, int C, int NH,
                      float scale) {
  extern __shared__ float shared[];
  const DkdvTiles tiles = carve_dkdv_tiles(shared);

  const int k0 = static_cast<int>(blockIdx.x) * kTile;
  const int h = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int tid = static_cast<int>(threadIdx.x);
  const int key = k0 + tid;
  const bool active = key < T;

  load_kv_tiles<S>(tiles.k_own, tiles.v_own, kPadded, qkv, b, k0, h, T, C, tid);
  float dk[kHeadSize];
  float dv[kHeadSize];
#pragma unroll
  for (int c = 0; c < kHeadSize; c++) {
    dk[c] = 0.0f;
    dv[c] = 0.0f;
  }
  // Query tiles at and after the key tile (earlier queries never see these keys). k0 < T, so
  // the loop runs at least once and its first __syncthreads publishes the own k and v.
  for (int q0 = k0; q0 < T; q0 += kTile) {
    __syncthreads();  // everyone is done with the previous query tile
    for (int i = tid; i < kTile * kHeadSize; i += kTile) {
      load_qkv_tile_element<S>(tiles.q_tile, kHeadSize, qkv, b, q0, kPartQ, h, T, C, i);
      load_row_tile_element<S>(tiles.do_tile, kHeadSize, dout, b, q0, h, T, C, i);
    }
    load_stat_element(tiles.lse_tile, lse, b, h, q0, T, NH, tid);  // kTile threads, kTile rows
    load_stat_element(tiles.delta_tile, delta, b, h, q0, T, NH, tid);
    __syncthreads();  // the tiles are complete
    if (active) {
      dkdv_tile_update(tiles.k_own + tid * kPadded, tiles.v_own + tid * kPadded, tiles.q_tile, tiles.do_tile,
                       tiles.lse_tile, tiles.delta_tile, q0, key, T, scale, dk, dv);
    }
  }
  if (active) {
    store_row<S>(dqkv + qkv_index(b, key, kPartK, h, T, C), dk, scale);
    store_row<S>(dqkv + qkv_index(b, key, kPartV, h, T, C), dv, 1.0f);
  }
}

template <class S, class E = typename S::Element>
__global__ void __launch_bounds__(kTile)
    flash_dq_kernel(E* __restrict__ dqkv, const E* __restrict__ qkv, const E* __restrict__ dout,
                    const float* __restrict__ lse, const float* __restrict__ delta, int T, int C, int NH,
                    float scale) {
  __shared__ float k_tile[kTile * kHeadSize];
  __shared__ float v_tile[kTile * kHeadSize];
  const int q0 = static_cast<int>(blockIdx.x) * kTile;
  const int h = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int tid = static_cast<int>(threadIdx.x);
  const int t = q0 + tid;
  const bool active = t < T;
  const int t_safe = active ? t : 0;  // inactive threads read a real row and never use it

  float q[kHeadSize];
  float do_t[kHeadSize];
  float dq[kHeadSize];
  load_row<S>(q, qkv + qkv_index(b, t_safe, kPartQ, h, T, C));
  load_row<S>(do_t, dout + row_index(b, t_safe, h, T, C));
#pragma unroll
  for (int c = 0; c < kHeadSize; c++) dq[c] = 0.0f;
  const float lse_t = lse[stat_index(b, h, t_safe, T, NH)];
  const float delta_t = delta[stat_index(b, h, t_safe, T, NH)];

  const int last_query = min(q0 + kTile, T) - 1;
  for (int k0 = 0; k0 <= last_query; k0 += kTile) {
    __syncthreads();
    load_kv_tiles<S>(k_tile, v_tile, kHeadSize, qkv, b, k0, h, T, C, tid);
    __syncthreads();
    if (active) dq_tile_update(q, do_t, lse_t, delta_t, k_tile, v_tile, k0, t, scale, dq);
  }
  if (active) store_row<S>(dqkv + qkv_index(b, t, kPartQ, h, T, C), dq, scale);
}

float flash_scale() { return 1.0f / std::sqrt(static_cast<float>(kHeadSize)); }  // as the twin

dim3 tile_grid(int B, int T, int NH) {
  return dim3(static_cast<unsigned>((T + kTile - 1) / kTile), static_cast<unsigned>(NH), static_cast<unsigned>(B));
}

void require_supported(int C, int NH) {
  if (!flash_attention_supported(C, NH)) {
    throw std::logic_error("flash attention: head size C / NH = " + std::to_string(NH > 0 ? C / NH : 0) +
                           " (C = " + std::to_string(C) + ", NH = " + std::to_string(NH) + "); the kernels need " +
                           std::to_string(kHeadSize));
  }
}

}  // namespace

bool flash_attention_supported(int C, int NH) { return NH > 0 && C % NH == 0 && C / NH == flash::kHeadSize; }

std::size_t flash_attention_shared_bytes() { return kDkdvSharedBytes; }

std::size_t flash_attention_scratch_size(int B, int T, int NH, FlashDq dq) {
  return flash_attention_scratch_floats(B, T, NH, dq);
}

void flash_attention_forward(ActPtr out, float* lse, ConstActPtr qkv, int B, int T, int C, int NH,
                             cudaStream_t stream, const FlashMmaOptions& mma) {
  require_supported(C, NH);
  if (B == 0 || T == 0) return;
  if (flash_attention_mma_applies({out, qkv})) {
    flash_attention_mma_forward(out, lse, qkv, B, T, C, NH, flash_scale(), stream, mma);
    return;
  }
  stored::with_policy(stored::common_storage({out, qkv}, "flash_attention_forward"), [&](auto policy) {
    using S = decltype(policy);
    flash_forward_kernel<S><<<tile_grid(B, T, NH), kTile, 0, stream>>>(stored::elements<S>(out), lse,
                                                                       stored::elements<S>(qkv), T, C, NH,
                                                                       flash_scale());
  });
  CUDA_CHECK_LAUNCH();
}

void flash_attention_backward(ActPtr dqkv, float* scratch, ConstActPtr dout, ConstActPtr qkv, ConstActPtr out,
                              const float* lse, int B, int T, int C, int NH, cudaStream_t stream,
                              const FlashMmaOptions& mma) {
  require_supported(C, NH);
  if (B == 0 || T == 0) return;
  float* delta = scratch;
  const std::size_t rows = flash_attention_scratch_size(B, T, NH);
  float* dq_sums = scratch + flash_attention_dq_sums_offset(B, T, NH);  // only the mma kernels' dQ in the key walk
  constexpr int kDeltaThreads = 256;
  const auto delta_blocks = static_cast<unsigned>((rows + kDeltaThreads - 1) / kDeltaThreads);
  const Precision storage = stored::common_storage({dqkv, dout, qkv, out}, "flash_attention_backward");
  stored::with_policy(storage, [&](auto policy) {
    using S = decltype(policy);
    const auto* dout_s = stored::elements<S>(dout);
    const auto* qkv_s = stored::elements<S>(qkv);
    auto* dqkv_s = stored::elements<S>(dqkv);
    flash_delta_kernel<S><<<delta_blocks, kDeltaThreads, 0, stream>>>(delta, dout_s, stored::elements<S>(out), B, T,
                                                                     C, NH);
    CUDA_CHECK_LAUNCH();
    if (flash_attention_mma_applies({dqkv, dout, qkv, out})) {
      flash_attention_mma_backward(dqkv, dout, qkv, lse, delta, dq_sums, B, T, C, NH, flash_scale(), stream, mma);
      return;
    }
    // 66,560 bytes of dynamic shared memory on a GPU (more with the emulation's slice guards):
    // above the default 48 KiB, so opted in (the backend checked the GPU allows it,
    // flash_attention_shared_bytes).
    CUDA_CHECK(cudaFuncSetAttribute(flash_dkdv_kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(kDkdvSharedBytes)));
    const dim3 grid = tile_grid(B, T, NH);
    flash_dkdv_kernel<S><<<grid, kTile, kDkdvSharedBytes, stream>>>(dqkv_s, qkv_s, dout_s, lse, delta, T, C, NH,
                                                                    flash_scale());
    CUDA_CHECK_LAUNCH();
    flash_dq_kernel<S><<<grid, kTile, 0, stream>>>(dqkv_s, qkv_s, dout_s, lse, delta, T, C, NH, flash_scale());
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trident::kernels::cuda
