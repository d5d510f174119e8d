// Playground: causal multi-head attention BACKWARD, GPT-2 layout, the contract of
// kernels/backend.h attention_backward: qkv[B,T,3C] holds q in channels [0,C), k in [C,2C),
// v in [2C,3C); head h owns channels [h*hs, (h+1)*hs) of each, hs = C/NH, scale 1/sqrt(hs),
// causal. Given dout[B,T,C] and the forward's out[B,T,C] and row log-sum-exp lse[B,NH,T], the
// backward ACCUMULATES: dqkv += d(loss)/d(qkv).
// Reference: the CPU twins trident::kernels::cpu::attention_forward (for lse), then
// cpu::attention_backward (scratch: cpu::attention_scratch_size(B, T, NH) floats).
//
//   playground_attention_backward [variant|all] [reps]
//   timed shape: ATTN_B (8) x ATTN_T (1024), ATTN_C (768), ATTN_NH (12); validated at
//   ATTN_VALIDATE_B (2) batch elements at T = ATTN_VALIDATE_T (256) and at a ragged
//   T = ATTN_RAGGED_T (200, not a multiple of 64).
//
// Variants:
//   1  production: cuda::attention_forward (untimed: it produces out and lse) then
//      cuda::attention_backward (timed): batched cuBLAS S = scale Q K^T into scratch and a row
//      kernel P = exp(S - L) (the probabilities recomputed, T x T in global memory), dP = dO V^T
//      into a second T x T region, a softmax-backward kernel dS = scale * P * (dP - rowsum(P dP)),
//      then three batched GEMMs dQ += dS K, dK += dS^T Q, dV += P^T dO over the full T x T
//      square. fp32 (CUBLAS_DEFAULT_MATH).
//   2  flash-style backward, fp32, hs = 64 only. It never reads or writes anything T x T:
//      from the forward it keeps only out[B,T,C] and the per-row log-sum-exp
//      L[b,h,t] = log sum_{t2<=t} exp(S[t,t2]) (S = scale q k^T), and recomputes
//      P[t,t2] = exp(S[t,t2] - L[t]) tile by tile. Untimed preparation: a fused forward like
//      attention_forward.cu's variant 2, which writes L too. Timed: three kernels (the
//      launcher takes Backend::attention_backward's arguments, its scratch holding D: a
//      drop-in under that contract),
//        (a) D[b,h,t] = dout[t] . out[t] over the head's 64 channels (= sum_t2 P dP, since
//            out[t] = sum_t2 P[t,t2] v[t2]; D replaces the T-term row sum of the softmax
//            backward by a 64-term one);
//        (b) dK, dV: one block per (batch, head, 64-key tile), one thread per key; loops over
//            the query tiles at or after the key tile (causal), recomputing per (query, key):
//            P = exp(S - L), dV += P dO, dP = dO . v, dS = P (dP - D), dK += dS q; at the end
//            dk += scale * dK, dv += dV;
//        (c) dQ: one block per (batch, head, 64-query tile), one thread per query; loops over
//            the key tiles up to the diagonal, recomputing P and dS the same way, dQ += dS k;
//            at the end dq += scale * dQ.
//      (b) writes only the k and v channels of dqkv, (c) only the q channels, each element by
//      exactly one thread, each sum in a fixed order: no atomics, the same bits on every run
//      (checked: two runs from the same state must agree bit for bit).
//
// What each thread does, index arithmetic included, is in __host__ __device__ functions that
// the kernels call between their __syncthreads, so that a host program can replay the kernels'
// loops with the same functions (that is how this file was checked before any GPU ran it).
//
// TFLOP/s counts the useful causal work of a backward without recomputation, four products
// (dP, dV, dK, dQ) over the pairs t2 <= t: 8 * B * NH * hs * T(T+1)/2, for both variants.
// Production recomputes S once (a fifth product, over the full square), the flash variant S
// twice and dP twice (in (b) and again in (c)), so their rates understate what they execute.
#include <cublas_v2.h>     // CUBLAS_DEFAULT_MATH
#include <cuda_runtime.h>  // __syncthreads, cudaFuncSetAttribute

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"      // cpu::attention_forward/backward (the reference)
#include "kernels/cuda/attention.cuh"   // cuda::attention_forward/backward (variant 1)
#include "perf/kernels/playground.cuh"  // harness

// `#pragma unroll` for the device pass only: the host pass compiles the __host__ __device__
// functions below too, and the host compiler warns on the pragma (-Wunknown-pragmas).
#ifdef __CUDA_ARCH__
#define ATTN_BWD_UNROLL _Pragma("unroll")
#else
#define ATTN_BWD_UNROLL
#endif

namespace {

namespace pg = trident::playground;
namespace tk = trident::kernels;

// ---- variant 2: flash-style backward --------------------------------------------------------

constexpr int kHeadSize = 64;  // hs: a thread's rows (q, dO, accumulators) live in registers
constexpr int kTile = 64;      // queries per query tile = keys per key tile = threads per block
// Row stride of the shared arrays in which thread j reads its OWN row j (the dK/dV kernel's
// k and v): with 65 floats per row, thread j's channel c sits in bank (65 j + c) % 32, so the
// 32 threads of a warp hit 32 different banks. Arrays that all threads read at the same
// address (the broadcast tiles) keep the dense stride kHeadSize.
constexpr int kPadded = kHeadSize + 1;

// Parts of a qkv row.
constexpr int kPartQ = 0;
constexpr int kPartK = 1;
constexpr int kPartV = 2;

// ---- index mapping (host and device) ----

// qkv[b, t, part*C + h*hs + c] for c = 0: the first channel of head h's q, k or v of token t.
__host__ __device__ __forceinline__ std::size_t qkv_index(int b, int t, int part, int h, int T,
                                                          int C) {
  return (static_cast<std::size_t>(b) * T + t) * (3 * static_cast<std::size_t>(C)) +
         static_cast<std::size_t>(part) * C + static_cast<std::size_t>(h) * kHeadSize;
}

// out[b, t, h*hs + c] for c = 0 (out, dout: [B, T, C]).
__host__ __device__ __forceinline__ std::size_t row_index(int b, int t, int h, int T, int C) {
  return (static_cast<std::size_t>(b) * T + t) * C + static_cast<std::size_t>(h) * kHeadSize;
}

// L[b, h, t] and D[b, h, t]: [B, NH, T], one float per (batch, head, query row).
__host__ __device__ __forceinline__ std::size_t stat_index(int b, int h, int t, int T, int NH) {
  return (static_cast<std::size_t>(b) * NH + h) * T + t;
}

// ---- tile loads: element i of a 64-row x 64-channel tile (row r = i / 64, channel c = i % 64);
// the block's threads take i = threadIdx.x, + kTile, ... so consecutive threads read consecutive
// channels of one row (coalesced). Rows past T are zeros (they are never used: masked).

// tile[r*stride + c] = head h's `part` of token t0 + r, channel c.
__host__ __device__ __forceinline__ void load_qkv_tile_element(float* tile, int stride,
                                                               const float* qkv, int b, int t0,
                                                               int part, int h, int T, int C,
                                                               int i) {
  const int r = i / kHeadSize;
  const int c = i % kHeadSize;
  const int t = t0 + r;
  tile[r * stride + c] = t < T ? qkv[qkv_index(b, t, part, h, T, C) + c] : 0.0f;
}

// tile[r*stride + c] = x[b, t0 + r, h*hs + c] for x in [B, T, C] (dout).
__host__ __device__ __forceinline__ void load_row_tile_element(float* tile, int stride,
                                                               const float* x, int b, int t0,
                                                               int h, int T, int C, int i) {
  const int r = i / kHeadSize;
  const int c = i % kHeadSize;
  const int t = t0 + r;
  tile[r * stride + c] = t < T ? x[row_index(b, t, h, T, C) + c] : 0.0f;
}

// tile[r] = stat[b, h, t0 + r] (L or D), r = 0..kTile-1; 0 past T.
__host__ __device__ __forceinline__ void load_stat_element(float* tile, const float* stat, int b,
                                                           int h, int t0, int T, int NH, int r) {
  const int t = t0 + r;
  tile[r] = t < T ? stat[stat_index(b, h, t, T, NH)] : 0.0f;
}

// dst[c] += factor * acc[c], c < 64: the one read-modify-write of each dqkv element.
__host__ __device__ __forceinline__ void accumulate_row(float* dst, const float* acc,
                                                        float factor) {
ATTN_BWD_UNROLL
  for (int c = 0; c < kHeadSize; c++) dst[c] += factor * acc[c];
}

// ---- the forward with L (preparation of variant 2; untimed) ----
//
// As attention_forward.cu's variant 2: one block per (64-query tile, head, batch element),
// one thread per query t, K/V tiles through shared memory, online softmax with running max m,
// running sum l = sum exp(s - m) and running o = sum exp(s - m) v. At the end out = o / l and
// L = m + log(l) = log sum_t2 exp(s_t2): the log-sum-exp of the row, all that the backward
// needs to rebuild P[t,t2] = exp(s_t2 - L).

// One key tile [k0, k0+64) for query t: updates m, l, o. k_tile, v_tile: [64][kHeadSize].
// Keys k0 + j > t are masked (the tile above the diagonal is never visited, and k0 <= t, so
// the tile has a finite max).
__host__ __device__ __forceinline__ void forward_tile_update(const float* q, const float* k_tile,
                                                             const float* v_tile, int k0, int t,
                                                             float scale, float& m, float& l,
                                                             float* o) {
  float s[kTile];
  float tile_max = -INFINITY;
ATTN_BWD_UNROLL
  for (int j = 0; j < kTile; j++) {
    float dot = 0.0f;
ATTN_BWD_UNROLL
    for (int c = 0; c < kHeadSize; c++) dot += q[c] * k_tile[j * kHeadSize + c];
    s[j] = k0 + j <= t ? scale * dot : -INFINITY;
    tile_max = fmaxf(tile_max, s[j]);
  }
  const float m_new = fmaxf(m, tile_max);
  const float correction = expf(m - m_new);  // 0 on the first tile (m = -inf)
  l *= correction;
ATTN_BWD_UNROLL
  for (int c = 0; c < kHeadSize; c++) o[c] *= correction;
ATTN_BWD_UNROLL
  for (int j = 0; j < kTile; j++) {
    const float p = expf(s[j] - m_new);  // 0 for masked keys
    l += p;
ATTN_BWD_UNROLL
    for (int c = 0; c < kHeadSize; c++) o[c] += p * v_tile[j * kHeadSize + c];
  }
  m = m_new;
}

// out row t = o / l; L[b,h,t] = m + log(l) (l >= 1: the max term is exp(0)).
__host__ __device__ __forceinline__ void forward_finish(float* out, float* lse, const float* o,
                                                        float m, float l, int b, int t, int h,
                                                        int T, int C, int NH) {
  const float inv_l = 1.0f / l;
  float* y = out + row_index(b, t, h, T, C);
ATTN_BWD_UNROLL
  for (int c = 0; c < kHeadSize; c++) y[c] = o[c] * inv_l;
  lse[stat_index(b, h, t, T, NH)] = m + logf(l);
}

__global__ void __launch_bounds__(kTile)
    flash_forward_lse_kernel(float* __restrict__ out, float* __restrict__ lse,
                             const float* __restrict__ qkv, int T, int C, int NH, float scale) {
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
  const float* q_row = qkv + qkv_index(b, active ? t : 0, kPartQ, h, T, C);
ATTN_BWD_UNROLL
  for (int c = 0; c < kHeadSize; c++) {
    q[c] = active ? q_row[c] : 0.0f;
    o[c] = 0.0f;
  }
  float m = -INFINITY;
  float l = 0.0f;

  const int last_query = min(q0 + kTile, T) - 1;
  for (int k0 = 0; k0 <= last_query; k0 += kTile) {
    __syncthreads();  // everyone is done with the previous tile
    for (int i = tid; i < kTile * kHeadSize; i += kTile) {
      load_qkv_tile_element(k_tile, kHeadSize, qkv, b, k0, kPartK, h, T, C, i);
      load_qkv_tile_element(v_tile, kHeadSize, qkv, b, k0, kPartV, h, T, C, i);
    }
    __syncthreads();  // the tile is complete
    if (active) forward_tile_update(q, k_tile, v_tile, k0, t, scale, m, l, o);
  }
  if (active) forward_finish(out, lse, o, m, l, b, t, h, T, C, NH);
}

// ---- (a) D = rowsum(dO * O) per (batch, head, query) ----

// D[b,h,t] = sum_c dout[b,t,h*hs+c] * out[b,t,h*hs+c]. In real arithmetic this equals
// sum_t2 P[t,t2] dP[t,t2] (dP[t,t2] = dout[t] . v[t2], out[t] = sum_t2 P[t,t2] v[t2]).
__host__ __device__ __forceinline__ float row_delta(const float* dout, const float* out, int b,
                                                    int t, int h, int T, int C) {
  const std::size_t at = row_index(b, t, h, T, C);
  float sum = 0.0f;
ATTN_BWD_UNROLL
  for (int c = 0; c < kHeadSize; c++) sum += dout[at + c] * out[at + c];
  return sum;
}

// Thread index -> (b, h, t) in D's own [B, NH, T] order (so the store is coalesced).
__global__ void flash_delta_kernel(float* __restrict__ delta, const float* __restrict__ dout,
                                   const float* __restrict__ out, int B, int T, int C, int NH) {
  const std::size_t index = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= static_cast<std::size_t>(B) * NH * T) return;
  const int t = static_cast<int>(index % T);
  const int h = static_cast<int>((index / T) % NH);
  const int b = static_cast<int>(index / (static_cast<std::size_t>(T) * NH));
  delta[index] = row_delta(dout, out, b, t, h, T, C);
}

// ---- (b) dK and dV: one block per (64-key tile, head, batch element), one thread per key ----
//
// Thread j of the block for key tile k0 owns key `key` = k0 + j (inactive when key >= T).
// Its k and v rows stay in shared memory (padded rows: conflict-free), its accumulators dK, dV
// (64 + 64 floats) in registers. The block walks the query tiles q0 = k0, k0 + 64, ... < T
// (tiles before k0 hold only queries t < k0 <= key: all masked by causality). Per query tile
// it stages Q, dO (dense [64][64], read by all threads at the same address: broadcast), L and D
// in shared memory; then each thread, for each query t = q0 + i of the tile with
// key <= t < T:
//   s  = scale * (q_t . k_key)            the score S[t, key]
//   p  = exp(s - L_t)                      P[t, key], recomputed
//   dV += p * dO_t                         (dV = P^T dO)
//   dp = dO_t . v_key                      dP[t, key]
//   ds = p * (dp - D_t)                    dS[t, key] without the scale
//   dK += ds * q_t                         (dK = scale dS^T Q: scale applied once at the end)
// scale = 1/8 is a power of two, so applying it at the end rounds exactly as per term would.

__host__ __device__ __forceinline__ void dkdv_tile_update(const float* k_row, const float* v_row,
                                                          const float* q_tile,
                                                          const float* do_tile,
                                                          const float* lse_tile,
                                                          const float* delta_tile, int q0,
                                                          int key, int T, float scale, float* dk,
                                                          float* dv) {
  for (int i = 0; i < kTile; i++) {
    const int t = q0 + i;
    if (t < key || t >= T) continue;  // causal (key <= t), real query (t < T)
    const float* q_t = q_tile + i * kHeadSize;
    const float* do_t = do_tile + i * kHeadSize;
    float qk = 0.0f;
    float dp = 0.0f;
ATTN_BWD_UNROLL
    for (int c = 0; c < kHeadSize; c++) {
      qk += q_t[c] * k_row[c];
      dp += do_t[c] * v_row[c];
    }
    const float p = expf(scale * qk - lse_tile[i]);
    const float ds = p * (dp - delta_tile[i]);
ATTN_BWD_UNROLL
    for (int c = 0; c < kHeadSize; c++) {
      dv[c] += p * do_t[c];
      dk[c] += ds * q_t[c];
    }
  }
}

// Floats of dynamic shared memory of the dK/dV kernel: own k and v (padded), Q and dO tiles,
// L and D tiles. 16,640 floats = 66,560 bytes: above the 48 KiB of static shared memory, hence
// dynamic, with the opt-in attribute set by the launcher.
constexpr int kDkdvSharedFloats = 2 * kTile * kPadded + 2 * kTile * kHeadSize + 2 * kTile;

__global__ void __launch_bounds__(kTile)
    flash_dkdv_kernel(float* __restrict__ dqkv, const float* __restrict__ qkv,
                      const float* __restrict__ dout, const float* __restrict__ lse,
                      const float* __restrict__ delta, int T, int C, int NH, float scale) {
  extern __shared__ float shared[];
  float* k_own = shared;                         // [kTile][kPadded]
  float* v_own = k_own + kTile * kPadded;        // [kTile][kPadded]
  float* q_tile = v_own + kTile * kPadded;       // [kTile][kHeadSize]
  float* do_tile = q_tile + kTile * kHeadSize;   // [kTile][kHeadSize]
  float* lse_tile = do_tile + kTile * kHeadSize; // [kTile]
  float* delta_tile = lse_tile + kTile;          // [kTile]

  const int k0 = static_cast<int>(blockIdx.x) * kTile;
  const int h = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int tid = static_cast<int>(threadIdx.x);
  const int key = k0 + tid;
  const bool active = key < T;

  for (int i = tid; i < kTile * kHeadSize; i += kTile) {
    load_qkv_tile_element(k_own, kPadded, qkv, b, k0, kPartK, h, T, C, i);
    load_qkv_tile_element(v_own, kPadded, qkv, b, k0, kPartV, h, T, C, i);
  }
  float dk[kHeadSize];
  float dv[kHeadSize];
ATTN_BWD_UNROLL
  for (int c = 0; c < kHeadSize; c++) {
    dk[c] = 0.0f;
    dv[c] = 0.0f;
  }
  // k0 < T, so the loop runs at least once and its first __syncthreads publishes k_own, v_own.
  for (int q0 = k0; q0 < T; q0 += kTile) {
    __syncthreads();  // everyone is done with the previous query tile
    for (int i = tid; i < kTile * kHeadSize; i += kTile) {
      load_qkv_tile_element(q_tile, kHeadSize, qkv, b, q0, kPartQ, h, T, C, i);
      load_row_tile_element(do_tile, kHeadSize, dout, b, q0, h, T, C, i);
    }
    load_stat_element(lse_tile, lse, b, h, q0, T, NH, tid);  // kTile threads, kTile rows
    load_stat_element(delta_tile, delta, b, h, q0, T, NH, tid);
    __syncthreads();  // the tiles are complete
    if (active) {
      dkdv_tile_update(k_own + tid * kPadded, v_own + tid * kPadded, q_tile, do_tile, lse_tile,
                       delta_tile, q0, key, T, scale, dk, dv);
    }
  }
  if (active) {
    accumulate_row(dqkv + qkv_index(b, key, kPartK, h, T, C), dk, scale);
    accumulate_row(dqkv + qkv_index(b, key, kPartV, h, T, C), dv, 1.0f);
  }
}

// ---- (c) dQ: one block per (64-query tile, head, batch element), one thread per query ----
//
// Thread i of the block for query tile q0 owns query t = q0 + i (inactive when t >= T); its q,
// dO (registers), L_t, D_t and accumulator dQ (registers). The block walks the key tiles
// k0 = 0, 64, ... up to its last query (tiles wholly above the diagonal are skipped), staging
// K and V ([64][64], broadcast reads). Per key t2 = k0 + j <= t: s, p, dp, ds as in (b), then
// dQ += ds * k_t2; at the end dq += scale * dQ.

__host__ __device__ __forceinline__ void dq_tile_update(const float* q, const float* do_t,
                                                        float lse_t, float delta_t,
                                                        const float* k_tile, const float* v_tile,
                                                        int k0, int t, float scale, float* dq) {
  for (int j = 0; j < kTile; j++) {
    if (k0 + j > t) break;  // causal; keys past t (and past T, since t < T) never count
    const float* k_j = k_tile + j * kHeadSize;
    const float* v_j = v_tile + j * kHeadSize;
    float qk = 0.0f;
    float dp = 0.0f;
ATTN_BWD_UNROLL
    for (int c = 0; c < kHeadSize; c++) {
      qk += q[c] * k_j[c];
      dp += do_t[c] * v_j[c];
    }
    const float p = expf(scale * qk - lse_t);
    const float ds = p * (dp - delta_t);
ATTN_BWD_UNROLL
    for (int c = 0; c < kHeadSize; c++) dq[c] += ds * k_j[c];
  }
}

__global__ void __launch_bounds__(kTile)
    flash_dq_kernel(float* __restrict__ dqkv, const float* __restrict__ qkv,
                    const float* __restrict__ dout, const float* __restrict__ lse,
                    const float* __restrict__ delta, int T, int C, int NH, float scale) {
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
  const float* q_row = qkv + qkv_index(b, t_safe, kPartQ, h, T, C);
  const float* do_row = dout + row_index(b, t_safe, h, T, C);
ATTN_BWD_UNROLL
  for (int c = 0; c < kHeadSize; c++) {
    q[c] = q_row[c];
    do_t[c] = do_row[c];
    dq[c] = 0.0f;
  }
  const float lse_t = lse[stat_index(b, h, t_safe, T, NH)];
  const float delta_t = delta[stat_index(b, h, t_safe, T, NH)];

  const int last_query = min(q0 + kTile, T) - 1;
  for (int k0 = 0; k0 <= last_query; k0 += kTile) {
    __syncthreads();
    for (int i = tid; i < kTile * kHeadSize; i += kTile) {
      load_qkv_tile_element(k_tile, kHeadSize, qkv, b, k0, kPartK, h, T, C, i);
      load_qkv_tile_element(v_tile, kHeadSize, qkv, b, k0, kPartV, h, T, C, i);
    }
    __syncthreads();
    if (active) dq_tile_update(q, do_t, lse_t, delta_t, k_tile, v_tile, k0, t, scale, dq);
  }
  if (active) accumulate_row(dqkv + qkv_index(b, t, kPartQ, h, T, C), dq, scale);
}

// ---- launchers ----

bool flash_supported(int C, int NH) { return NH > 0 && C % NH == 0 && C / NH == kHeadSize; }

float flash_scale() { return 1.0f / std::sqrt(static_cast<float>(kHeadSize)); }  // as the twin

int tiles_of(int T) { return (T + kTile - 1) / kTile; }

// out[B,T,C] and lse[B,NH,T] from qkv; requires flash_supported(C, NH).
void flash_forward_lse(float* out, float* lse, const float* qkv, int B, int T, int C, int NH,
                       cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(tiles_of(T)), static_cast<unsigned>(NH),
                  static_cast<unsigned>(B));
  flash_forward_lse_kernel<<<grid, kTile, 0, stream>>>(out, lse, qkv, T, C, NH, flash_scale());
  PG_CHECK_LAUNCH();
}

// dqkv += gradient, from qkv, dout and the forward's out and lse: the arguments of
// Backend::attention_backward, in its order. scratch holds D [B,NH,T], B*NH*T floats (what a
// flash backend's attention_scratch_size would return).
void flash_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                    const float* out, const float* lse, int B, int T, int C, int NH,
                    cudaStream_t stream) {
  float* delta = scratch;
  const std::size_t rows = static_cast<std::size_t>(B) * NH * T;
  constexpr int kDeltaThreads = 256;
  const auto delta_blocks = static_cast<unsigned>((rows + kDeltaThreads - 1) / kDeltaThreads);
  flash_delta_kernel<<<delta_blocks, kDeltaThreads, 0, stream>>>(delta, dout, out, B, T, C, NH);
  PG_CHECK_LAUNCH();

  const dim3 grid(static_cast<unsigned>(tiles_of(T)), static_cast<unsigned>(NH),
                  static_cast<unsigned>(B));
  constexpr std::size_t kDkdvBytes = kDkdvSharedFloats * sizeof(float);
  PG_CUDA_CHECK(cudaFuncSetAttribute(flash_dkdv_kernel,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(kDkdvBytes)));
  flash_dkdv_kernel<<<grid, kTile, kDkdvBytes, stream>>>(dqkv, qkv, dout, lse, delta, T, C, NH,
                                                         flash_scale());
  PG_CHECK_LAUNCH();
  flash_dq_kernel<<<grid, kTile, 0, stream>>>(dqkv, qkv, dout, lse, delta, T, C, NH,
                                              flash_scale());
  PG_CHECK_LAUNCH();
}

// ---- host side: data, reference, checks ------------------------------------------------------

// The known non-zero initial dqkv of every validated run, on both sides: multiples of 1/16 in
// [-7/32, 7/32], never 0, so a kernel that overwrites instead of accumulating (or adds twice)
// is off by about the size of the gradients themselves.
std::vector<float> initial_dqkv(std::size_t n) {
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; i++) {
    values[i] = (static_cast<float>(i % 8) - 3.5f) * 0.0625f;
  }
  return values;
}

// Channels [part*C, (part+1)*C) of every token of dqkv[B*T, 3C]: dq, dk or dv as [B*T, C].
std::vector<float> part_of(const std::vector<float>& dqkv, int part, int C) {
  const std::size_t tokens = dqkv.size() / (3 * static_cast<std::size_t>(C));
  std::vector<float> values(tokens * C);
  for (std::size_t n = 0; n < tokens; n++) {
    const float* src = dqkv.data() + n * 3 * C + static_cast<std::size_t>(part) * C;
    std::copy(src, src + C, values.begin() + static_cast<std::ptrdiff_t>(n * C));
  }
  return values;
}

// One validation shape: its inputs and the CPU twin's dqkv (initial_dqkv + gradient).
struct Case {
  int B = 0;
  int T = 0;
  std::vector<float> qkv;
  std::vector<float> dout;
  std::vector<float> initial;
  std::vector<float> ref;
};

Case make_case(int B, int T, int C, int NH, unsigned seed) {
  Case k;
  k.B = B;
  k.T = T;
  const std::size_t tokens = static_cast<std::size_t>(B) * T;
  // As attention_forward.cu: scores with a standard deviation ~1.3, a softmax neither flat nor
  // one-hot. dout uniform in [-1, 1).
  k.qkv = pg::random_floats(tokens * 3 * C, 31 + seed, -2.0f, 2.0f);
  k.dout = pg::random_floats(tokens * C, 47 + seed, -1.0f, 1.0f);
  k.initial = initial_dqkv(tokens * 3 * C);
  std::vector<float> out(tokens * C);
  std::vector<float> lse(static_cast<std::size_t>(B) * NH * T);
  std::vector<float> scratch(tk::cpu::attention_scratch_size(B, T, NH));
  tk::cpu::attention_forward(out.data(), lse.data(), scratch.data(), k.qkv.data(), B, T, C, NH);
  k.ref = k.initial;
  tk::cpu::attention_backward(k.ref.data(), scratch.data(), k.dout.data(), k.qkv.data(),
                              lse.data(), B, T, C, NH);
  return k;
}

// Device buffers of one shape: the forward state both variants keep (out, lse) and each one's
// scratch.
struct Buffers {
  int B = 0;
  int T = 0;
  pg::DeviceBuffer<float> qkv;
  pg::DeviceBuffer<float> dout;
  pg::DeviceBuffer<float> dqkv;
  pg::DeviceBuffer<float> out;      // [B, T, C]
  pg::DeviceBuffer<float> lse;      // [B, NH, T]
  pg::DeviceBuffer<float> scratch;  // variant 1: cuda::attention_scratch_size (2 B NH T^2)
  pg::DeviceBuffer<float> delta;    // variant 2's scratch: D [B, NH, T]
};

Buffers make_buffers(int B, int T, int C, int NH, const std::vector<float>& qkv,
                     const std::vector<float>& dout, const std::vector<float>& dqkv) {
  Buffers w;
  w.B = B;
  w.T = T;
  w.qkv = pg::upload(qkv);
  w.dout = pg::upload(dout);
  w.dqkv = pg::upload(dqkv);
  w.out = pg::DeviceBuffer<float>(static_cast<std::size_t>(B) * T * C);
  w.lse = pg::DeviceBuffer<float>(static_cast<std::size_t>(B) * NH * T);
  w.scratch = pg::DeviceBuffer<float>(tk::cuda::attention_scratch_size(B, T, NH));
  w.delta = pg::DeviceBuffer<float>(static_cast<std::size_t>(B) * NH * T);
  // The forward state is overwritten by prepare(): poison it so that a missing write shows.
  PG_CUDA_CHECK(cudaMemset(w.out.data(), 0xff, w.out.bytes()));
  PG_CUDA_CHECK(cudaMemset(w.lse.data(), 0xff, w.lse.bytes()));
  PG_CUDA_CHECK(cudaMemset(w.delta.data(), 0xff, w.delta.bytes()));
  PG_CUDA_CHECK(cudaDeviceSynchronize());
  return w;
}

// A variant: prepare() runs the forward that the backward needs (untimed), backward() the
// timed part; both queue on the program's stream.
struct Method {
  std::function<void(Buffers&)> prepare;
  std::function<void(Buffers&)> backward;
  bool check_repeat = false;  // run twice from the same state, require the same bits
};

// Tolerance, relative to max |ref| of each of dq, dk, dv separately (so a wrong dq cannot
// hide under a larger dv). fp32 throughout. Sources of difference from the twin: the order of
// the 64-term dot products and of the up-to-T-term sums (dQ, dK, dV; the twin's are OpenBLAS
// blocks, ours are sequential per thread), exp (the twin's exp_approx and expf: 2 ulp each),
// P = exp(S - L) rebuilt from each side's own L (the rounding of L, ~1 ulp of |L| < 16, moves
// every P of a row by ~1e-6 relative), and, for variant 2, D = dO . O (64 terms) against the
// twin's rowsum(P dP) (T terms) which cancels against dP in dS = P (dP - D). The host replay
// of variant 2's loops (same functions; T = 64, 130, 200, 256, B = 1, 2, NH = 1, 3) measured
// 1.7e-7 to 7.9e-7, so 1e-5 keeps a margin of ~12 for the GPU's FMA contraction and its own
// expf, while an index or mask error moves whole terms: the replay's injected bugs (diagonal
// dropped from the causal bound, scale missing in P, overwrite instead of +=, wrong head's L)
// gave 7e-2 and more. The reference's T-term rowsum is the twin's own error, of the same order.
constexpr double kTolerance = 1e-5;

}  // namespace

int main(int argc, char** argv) {
  const pg::Args args = pg::parse_args_or_exit(argc, argv, "playground_attention_backward");
  pg::require_gpu();
  const int B = pg::env_int("ATTN_B", 8);
  const int T = pg::env_int("ATTN_T", 1024);
  const int C = pg::env_int("ATTN_C", 768);
  const int NH = pg::env_int("ATTN_NH", 12);
  const int B_check = pg::env_int("ATTN_VALIDATE_B", 2);
  const int T_check = pg::env_int("ATTN_VALIDATE_T", 256);
  const int T_ragged = pg::env_int("ATTN_RAGGED_T", 200);
  if (C % NH != 0 || C % 4 != 0) {
    std::fprintf(stderr, "ATTN_C = %d must be a multiple of ATTN_NH = %d and of 4\n", C, NH);
    return 2;
  }
  const int hs = C / NH;
  std::printf("attention_backward B = %d, T = %d, C = %d, NH = %d (hs = %d); validated at "
              "B = %d, T = %d and %d; timed at B = %d, T = %d, %d reps (median)\n",
              B, T, C, NH, hs, B_check, T_check, T_ragged, B, T, args.reps);

  std::vector<Case> cases;
  cases.push_back(make_case(B_check, T_check, C, NH, 0));
  cases.push_back(make_case(B_check, T_ragged, C, NH, 1));

  const pg::Stream stream;
  pg::Timer timer(stream.get());
  // fp32 math: the data here is not 16-bit representable, so no TF32.
  const pg::CublasHandle cublas(stream.get(), CUBLAS_DEFAULT_MATH);

  // The timed shape: inputs as the validation's, dqkv from the same initial pattern (it keeps
  // accumulating over the timed runs; its values are not checked).
  const std::size_t timed_tokens = static_cast<std::size_t>(B) * T;
  Buffers timed =
      make_buffers(B, T, C, NH, pg::random_floats(timed_tokens * 3 * C, 31, -2.0f, 2.0f),
                   pg::random_floats(timed_tokens * C, 47, -1.0f, 1.0f),
                   initial_dqkv(timed_tokens * 3 * C));

  // Validates every case (dq, dk, dv separately; the repeat check where asked), then times the
  // backward at the timed shape after one untimed prepare().
  auto measure = [&](const Method& method) {
    return [&, method](int reps) {
      pg::Outcome outcome;
      for (const Case& k : cases) {
        Buffers w = make_buffers(k.B, k.T, C, NH, k.qkv, k.dout, k.initial);
        method.prepare(w);
        method.backward(w);
        const std::vector<float> first = pg::download(w.dqkv);
        const std::string suffix = " T=" + std::to_string(k.T);
        const char* names[3] = {"dq", "dk", "dv"};
        for (int part = 0; part < 3; part++) {
          outcome.checks.push_back(pg::validate(names[part] + suffix, part_of(first, part, C),
                                                part_of(k.ref, part, C), kTolerance));
        }
        if (method.check_repeat) {
          PG_CUDA_CHECK(cudaMemcpy(w.dqkv.data(), k.initial.data(), w.dqkv.bytes(),
                                   cudaMemcpyHostToDevice));
          PG_CUDA_CHECK(cudaDeviceSynchronize());
          method.backward(w);
          outcome.checks.push_back(
              pg::identical("dqkv run to run" + suffix, pg::download(w.dqkv), first));
        }
      }
      method.prepare(timed);
      PG_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
      outcome.median_ms = timer.median_ms(reps, [&] { method.backward(timed); });
      return outcome;
    };
  };

  const Method production{
      [&](Buffers& w) {
        tk::cuda::attention_forward(w.out.data(), w.lse.data(), w.scratch.data(), w.qkv.data(),
                                    w.B, w.T, C, NH, cublas.get(), stream.get());
      },
      [&](Buffers& w) {
        tk::cuda::attention_backward(w.dqkv.data(), w.scratch.data(), w.dout.data(),
                                     w.qkv.data(), w.lse.data(), w.B, w.T, C, NH, cublas.get(),
                                     stream.get());
      },
      false};
  const Method flash{
      [&](Buffers& w) {
        flash_forward_lse(w.out.data(), w.lse.data(), w.qkv.data(), w.B, w.T, C, NH,
                          stream.get());
      },
      [&](Buffers& w) {
        flash_backward(w.dqkv.data(), w.delta.data(), w.dout.data(), w.qkv.data(), w.out.data(),
                       w.lse.data(), w.B, w.T, C, NH, stream.get());
      },
      true};
  auto unsupported = [hs](int) {
    return pg::unsupported_shape("hs = " + std::to_string(hs) + ": this variant needs hs = 64");
  };

  using Run = std::function<pg::Outcome(int)>;
  const std::vector<pg::Variant> variants = {
      {"production cuda::attention_backward (cuBLAS + softmax bwd)", measure(production)},
      {"flash-style backward (recomputed P), fp32, 64x64 tiles",
       flash_supported(C, NH) ? Run(measure(flash)) : Run(unsupported)},
  };
  const double causal_pairs = static_cast<double>(T) * (T + 1) / 2.0;
  const double flops = 8.0 * B * NH * static_cast<double>(hs) * causal_pairs;
  return pg::run_variants(args, variants, pg::Workload{0.0, flops});
}
