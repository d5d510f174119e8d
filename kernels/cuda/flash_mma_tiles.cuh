// The tile machinery of the tensor-core flash kernels (flash_attention_mma.cu: the forward;
// flash_attention_mma_backward.cu: the backward): the tile sizes, the copies of 64-row tiles into
// shared memory, the warp's fragment products on mma.sync, the softmax's exp2 and the quad
// reductions, the backward's softmax lines, walks and stores, and the launch helpers. Device code
// for those files and the wgmma kernels built on them (flash_wgmma_tiles.cuh).
//
// The softmax's instructions: the tensor cores take one product per 16 x 8 x 16 block, while the
// softmax spends instructions on each of the block's scores, so at head size 64 those, not the
// products, can set the pace (FlashAttention-2's observation). Each score gets one fma (the
// scale, and the row's max or L, folded into exp2's argument) and one ex2 (exp2_ftz); the causal
// and end-of-sequence tests run only in the tiles that need them (the diagonal and a last,
// partial tile), the walks calling their step in two instantiations, masked and not.
//
// Tiles in flight: each operand that changes along a walk has two shared buffers. At the top of
// step j every warp is past one barrier: tile j is whole in its buffer, and no warp still reads
// the other one, so tile j + 1 is issued into it and copies while the warps multiply tile j (by
// cp.async, kernels/cuda/async_copy.cuh; or through registers, TileCopy::kSynchronous). One
// barrier per tile; the block's own rows (the forward's Q; the backward's K and V, or Q and dO)
// pass through buffer 1 before the walk first needs it.
//
// What rounds where (all fp32 otherwise): the products read the stored 16-bit q, k, v and dout;
// P and dS are rounded to the storage format to enter the tensor cores (the scalar kernels keep
// them fp32), as every tensor-core flash attention does; out and dqkv are rounded once.
// The emulation (tests/emulation) runs these kernels with host models of mma.sync, ldmatrix and
// cp.async on every CI run; tests/gpu checks them against the CPU twin on a GPU (all passed on
// one H100 on 2026-11-23, before dQ in the key walk, which has run only on the emulation).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/async_copy.cuh"          // async_copy::copy, wait_all
#include "kernels/cuda/flash_attention_math.h"  // qkv_index, row_index, stat_index, kPart*, kTile
#include "kernels/cuda/flash_attention_mma.cuh" // TileCopy, FlashBlockOrder
#include "kernels/cuda/warp_mma.cuh"            // mma::mma_16x8x16, mma::load_matrix_x4, mma::pack
#include "kernels/precision.h"                  // Precision
#include "kernels/stored_element.h"             // stored::Bf16, Fp16

namespace trident::kernels::cuda::flash_mma {

using flash::kHeadSize;
using flash::kTile;
using flash::qkv_index;
using flash::row_index;
using flash::stat_index;

constexpr int kWarps = kTile / 16;  // 16 rows of the tile per warp
constexpr int kThreads = 32 * kWarps;
// Shared rows of 72 elements (144 bytes): every row starts on 16 bytes, as ldmatrix needs, and
// the 8 rows of one 8 x 8 matrix start 16 bytes apart modulo 128, so a matrix load touches each
// bank once.
constexpr int kLd = kHeadSize + 8;
constexpr int kTileElements = kTile * kLd;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

static_assert(kHeadSize == 64 && kTile == 64, "the fragment loops below are written for 64 x 64 tiles");

// One thread's share of a tile copy: 16 bytes (or one float) from global `from` to shared `to`,
// zeros when !valid (`from` is then not read).
template <TileCopy kCopy>
__device__ __forceinline__ void copy_16(uint16_t* to, const uint16_t* from, bool valid) {
  if constexpr (kCopy == TileCopy::kAsynchronous) {
    async_copy::copy<16>(to, from, valid);
  } else {
#ifdef __CUDA_ARCH__
    *reinterpret_cast<uint4*>(to) = valid ? *reinterpret_cast<const uint4*>(from) : make_uint4(0, 0, 0, 0);
#else
    if (valid) {
      std::memcpy(to, from, 8 * sizeof(uint16_t));
    } else {
      std::memset(to, 0, 8 * sizeof(uint16_t));
    }
#endif
  }
}
template <TileCopy kCopy>
__device__ __forceinline__ void copy_4(float* to, const float* from, bool valid) {
  if constexpr (kCopy == TileCopy::kAsynchronous) {
    async_copy::copy<4>(to, from, valid);
  } else {
    *to = valid ? *from : 0.0f;
  }
}
// Until every thread's copies have landed and are visible to the whole block: each thread waits
// for its own, then the barrier. Every warp has also finished reading whatever it read before.
template <TileCopy kCopy>
__device__ __forceinline__ void wait_for_tiles() {
  if constexpr (kCopy == TileCopy::kAsynchronous) async_copy::wait_all();
  __syncthreads();
}

// Rows [row0, row0 + 64) of a [B, T, ...] buffer whose row t of batch element b starts at
// first + (b T + t) stride, 64 elements each, into tile (row stride kLd): 16 bytes per thread and
// step; rows at or past T are zeros (masked later, never used), their addresses kept inside the
// buffer (row 0) all the same.
// `offset(r, c)`: where in the tile row r's channels [c, c + 8) go (kLd-padded rows here; the
// wgmma forward's swizzled rows, flash_attention_wgmma.cu). kLoaders threads share the copy
// (tid below it): the block's, kThreads, or two warpgroups' in the wgmma forward at 128 queries.
template <TileCopy kCopy, int kLoaders = kThreads, class Offset>
__device__ __forceinline__ void load_tile_rows(uint16_t* tile, Offset offset, const uint16_t* first,
                                               std::size_t stride, int b, int row0, int T, int tid) {
  constexpr int kChunks = kHeadSize / 8;
  for (int id = tid; id < kTile * kChunks; id += kLoaders) {
    const int r = id / kChunks;
    const int c = (id % kChunks) * 8;
    const int t = row0 + r;
    const bool valid = t < T;
    copy_16<kCopy>(tile + offset(r, c), first + (static_cast<std::size_t>(b) * T + (valid ? t : 0)) * stride + c,
                   valid);
  }
}
template <TileCopy kCopy>
__device__ __forceinline__ void load_tile(uint16_t* tile, const uint16_t* first, std::size_t stride, int b, int row0,
                                          int T, int tid) {
  load_tile_rows<kCopy>(tile, [](int r, int c) { return r * kLd + c; }, first, stride, b, row0, T, tid);
}

// K and V of key tile [k0, k0 + 64) into k_tile and v_tile.
template <TileCopy kCopy>
__device__ __forceinline__ void load_key_tile(uint16_t* k_tile, uint16_t* v_tile, const uint16_t* qkv, int b, int h,
                                              int k0, int T, int C, int tid) {
  const std::size_t stride = 3 * static_cast<std::size_t>(C);
  load_tile<kCopy>(k_tile, qkv + qkv_index(0, 0, flash::kPartK, h, T, C), stride, b, k0, T, tid);
  load_tile<kCopy>(v_tile, qkv + qkv_index(0, 0, flash::kPartV, h, T, C), stride, b, k0, T, tid);
}

// L and D of query rows [q0, q0 + 64) of head h, batch element b, into lse_to[64] and
// delta_to[64] (shared; zeros past T): what the dK/dV walks read by column. kLoaders threads.
template <TileCopy kCopy, int kLoaders = kThreads>
__device__ __forceinline__ void load_tile_stats(float* lse_to, float* delta_to, const float* lse,
                                                const float* delta, int b, int h, int q0, int T, int NH, int tid) {
  for (int i = tid; i < 2 * kTile; i += kLoaders) {
    const int r = i % kTile;
    const bool valid = q0 + r < T;
    const std::size_t from = stat_index(b, h, valid ? q0 + r : 0, T, NH);
    if (i < kTile) {
      copy_4<kCopy>(&lse_to[r], lse + from, valid);
    } else {
      copy_4<kCopy>(&delta_to[r], delta + from, valid);
    }
  }
}

// Two adjacent 16-bit outputs (4-byte aligned: even channel, even C).
__device__ __forceinline__ void store_pair(uint16_t* at, uint32_t pair) {
#ifdef __CUDA_ARCH__
  *reinterpret_cast<uint32_t*>(at) = pair;
#else
  std::memcpy(at, &pair, sizeof pair);
#endif
}

// A-operand fragments of rows [first, first + 16) of a tile, all 64 columns (4 k-steps of 16).
__device__ __forceinline__ void load_row_fragments(uint32_t (&a)[4][4], const uint16_t* tile, int first, int lane) {
  for (int ks = 0; ks < 4; ks++) {
    mma::load_matrix_x4<false>(a[ks], tile + (first + lane % 16) * kLd + 16 * ks + 8 * (lane / 16));
  }
}

// The products below run for R sets of 16 rows of A at once (acc and a point to R of each):
// every B fragment loaded from shared memory feeds R products, and each set's sums run in the
// same order whatever R, so R changes no bit.

// acc[j] (+)= A M^T for the 8 column blocks j of 8 rows of M (a tile of 64 rows, row-major: its
// rows are acc's columns), k over the 64 channels: Q K^T, K Q^T, dO V^T, V dO^T.
template <class S, int R>
__device__ __forceinline__ void multiply_by_rows_transposed(float (*acc)[8][4], const uint32_t (*a)[4][4],
                                                            const uint16_t* m, int lane) {
  for (int j = 0; j < 8; j++) {
    for (int half = 0; half < 2; half++) {  // channels [32 half, 32 half + 32): two k-steps
      uint32_t rows[4];
      mma::load_matrix_x4<false>(rows, m + (8 * j + lane % 8) * kLd + 32 * half + 8 * (lane / 8));
      const uint32_t b0[2] = {rows[0], rows[1]};
      const uint32_t b1[2] = {rows[2], rows[3]};
#pragma unroll
      for (int set = 0; set < R; set++) {
        mma::mma_16x8x16<S>(acc[set][j], a[set][2 * half], b0);
        mma::mma_16x8x16<S>(acc[set][j], a[set][2 * half + 1], b1);
      }
    }
  }
}

// The A fragment of k-step ks (columns [16 ks, 16 ks + 16)) made from accumulator blocks 2 ks and
// 2 ks + 1: the accumulator layout of two adjacent 8-column blocks is the A layout of one 16-wide
// k-step, so P and dS go from one product into the next without leaving registers.
template <class S>
__device__ __forceinline__ void accumulator_as_a(uint32_t (&a)[4], const float (&acc)[8][4], int ks) {
  a[0] = mma::pack<S>(acc[2 * ks][0], acc[2 * ks][1]);
  a[1] = mma::pack<S>(acc[2 * ks][2], acc[2 * ks][3]);
  a[2] = mma::pack<S>(acc[2 * ks + 1][0], acc[2 * ks + 1][1]);
  a[3] = mma::pack<S>(acc[2 * ks + 1][2], acc[2 * ks + 1][3]);
}

// acc[j] += A M for the 8 column blocks j of M (64 rows by 64 channels, row-major), k over M's
// 64 rows: P V, P^T dO, dS^T Q, dS K. `values` holds A as an accumulator (8 blocks of 8 columns),
// rounded to S here.
template <class S, int R>
__device__ __forceinline__ void multiply_by_rows(float (*acc)[8][4], const float (*values)[8][4], const uint16_t* m,
                                                 int lane) {
  for (int ks = 0; ks < 4; ks++) {
    uint32_t a[R][4];
#pragma unroll
    for (int set = 0; set < R; set++) accumulator_as_a<S>(a[set], values[set], ks);
    for (int jp = 0; jp < 4; jp++) {  // column blocks 2 jp and 2 jp + 1
      uint32_t cols[4];
      const int row = 16 * ks + lane % 8 + 8 * ((lane / 8) % 2);  // lanes 8-15 and 24-31: rows 8-15
      mma::load_matrix_x4<true>(cols, m + row * kLd + 16 * jp + 8 * (lane / 16));
      const uint32_t b0[2] = {cols[0], cols[1]};
      const uint32_t b1[2] = {cols[2], cols[3]};
#pragma unroll
      for (int set = 0; set < R; set++) {
        mma::mma_16x8x16<S>(acc[set][2 * jp], a[set], b0);
        mma::mma_16x8x16<S>(acc[set][2 * jp + 1], a[set], b1);
      }
    }
  }
}

// acc[j] += A M as multiply_by_rows, with A (rows [first, first + 16) of a 64 x 64 operand) read
// from shared memory where it is stored transposed: `at` holds A^T row-major (A's k index as its
// rows), as the dK/dV walk stores dS^T. ldmatrix with .trans turns each 8 x 8 piece back: the
// fragment's 4 matrices (rows 0-7 and 8-15 of A, by k 0-7 and 8-15) are at's rows 16 ks + 0-7
// or 8-15, columns first + 0 or 8.
template <class S>
__device__ __forceinline__ void multiply_transposed_by_rows(float (&acc)[8][4], const uint16_t* at, int first,
                                                            const uint16_t* m, int lane) {
  for (int ks = 0; ks < 4; ks++) {
    uint32_t a[4];
    mma::load_matrix_x4<true>(a, at + (16 * ks + lane % 8 + 8 * (lane / 16)) * kLd + first + 8 * ((lane / 8) % 2));
    for (int jp = 0; jp < 4; jp++) {  // column blocks 2 jp and 2 jp + 1, as multiply_by_rows
      uint32_t cols[4];
      const int row = 16 * ks + lane % 8 + 8 * ((lane / 8) % 2);
      mma::load_matrix_x4<true>(cols, m + row * kLd + 16 * jp + 8 * (lane / 16));
      const uint32_t b0[2] = {cols[0], cols[1]};
      const uint32_t b1[2] = {cols[2], cols[3]};
      mma::mma_16x8x16<S>(acc[2 * jp], a, b0);
      mma::mma_16x8x16<S>(acc[2 * jp + 1], a, b1);
    }
  }
}

// The column of accumulator element i of block j for a lane with t4 = lane % 4 (its row is
// g = lane / 4 for i < 2, g + 8 for i >= 2).
__device__ __forceinline__ int fragment_column(int j, int i, int t4) { return 8 * j + 2 * t4 + (i & 1); }

// 2^x on the special-function unit alone (PTX ex2.approx.ftz: within 2 ulp, results below 2^-126
// flushed to zero). exp2f without fast-math wraps the same instruction in a range test and two
// multiplies, to keep results below 2^-126 as subnormals; such a probability is under 2^-126 of
// its row's sum (the row's largest is about 1) and cannot change a 16-bit output. The softmax
// takes one exp a score, as often as the tensor cores take a product (FlashAttention-2: the
// other instructions, not the products, set the pace at head size 64), so each instruction
// around it counts. The emulation computes exp2f on the host.
__device__ __forceinline__ float exp2_ftz(float x) {
#ifdef __CUDA_ARCH__
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}

// The sum over the 4 lanes that hold one row's accumulator elements.
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

// The backward's softmax lines, shared by the mma.sync and wgmma kernels (the same accumulator
// layout, so the same code gives the same bits). kMasked adds the per-score causal and end tests,
// which only a walk's diagonal tile and a last, partial one need.
//
// dK/dV walk, query tile [q0, q0 + 64) against this warp's keys key[0] (rows g) and key[1]
// (rows g + 8): S^T into P^T = exp(S^T - L) and dP^T into dS^T = P^T (dP^T - D), in place, with
// the tile's L and D by column (tile_lse, tile_delta: shared, 64 each).
template <bool kMasked>
__device__ __forceinline__ void key_rows_softmax_backward(float (&pt)[8][4], float (&dst)[8][4], int q0,
                                                          const int (&key)[2], int T, int t4, float scale_log2,
                                                          const float* tile_lse, const float* tile_delta) {
  if constexpr (kMasked) {
    for (int j = 0; j < 8; j++) {
      for (int i = 0; i < 4; i++) {
        const int t = q0 + fragment_column(j, i, t4);
        if (t < key[i / 2] || t >= T) pt[j][i] = -INFINITY;  // causal (key <= t), a real query
      }
    }
  }
  for (int j = 0; j < 8; j++) {
    for (int i = 0; i < 4; i++) {
      const int column = fragment_column(j, i, t4);
      pt[j][i] = exp2_ftz(fmaf(pt[j][i], scale_log2, -tile_lse[column] * kLog2e));  // masked: 0
      dst[j][i] = pt[j][i] * (dst[j][i] - tile_delta[column]);
    }
  }
}

// dQ walk: L (in log2 units) and D of this warp's query rows row[0] and row[1] (zeros past T).
__device__ __forceinline__ void load_row_stats(float (&row_lse)[2], float (&row_delta)[2], const float* lse,
                                               const float* delta, const int (&row)[2], int b, int h, int T,
                                               int NH) {
  for (int r = 0; r < 2; r++) {
    row_lse[r] = row[r] < T ? lse[stat_index(b, h, row[r], T, NH)] * kLog2e : 0.0f;
    row_delta[r] = row[r] < T ? delta[stat_index(b, h, row[r], T, NH)] : 0.0f;
  }
}
// dQ walk, key tile [k0, k0 + 64) against rows row[0] and row[1]: S into dS = P (dP - D) in
// place, P = exp(S - L).
template <bool kMasked>
__device__ __forceinline__ void query_rows_softmax_backward(float (&ds)[8][4], const float (&dp)[8][4], int k0,
                                                            const int (&row)[2], int T, int t4, float scale_log2,
                                                            const float (&row_lse)[2], const float (&row_delta)[2]) {
  if constexpr (kMasked) {
    for (int j = 0; j < 8; j++) {
      for (int i = 0; i < 4; i++) {
        const int k = k0 + fragment_column(j, i, t4);
        if (k > row[i / 2] || k >= T) ds[j][i] = -INFINITY;  // P = exp2(-inf) = 0
      }
    }
  }
  for (int j = 0; j < 8; j++) {
    for (int i = 0; i < 4; i++) {
      ds[j][i] = exp2_ftz(fmaf(ds[j][i], scale_log2, -row_lse[i / 2])) * (dp[j][i] - row_delta[i / 2]);
    }
  }
}

// Stores the lane's part of one row of an accumulator (r = 0: row g, 1: row g + 8) into dst,
// times `factor`, rounded to S.
template <class S>
__device__ __forceinline__ void store_accumulator_row(uint16_t* dst, const float (&acc)[8][4], int r, int t4,
                                                      float factor) {
  for (int j = 0; j < 8; j++) {
    store_pair(dst + 8 * j + 2 * t4, mma::pack<S>(acc[j][2 * r] * factor, acc[j][2 * r + 1] * factor));
  }
}

// The backward walks' order of tiles, step(start, slot, masked) for each with its shared buffer
// (0, 1, 0, ...) and masked a std::true_type where the causal and end tests are needed. A block
// of kGroups warpgroups (the wgmma kernels: 1 or 2) holds kGroups tiles of keys (dK/dV) or
// queries (dQ), so its walk has kGroups diagonal tiles, all masked: the second only where it
// holds a key or query before T (last_key, last_query: the block's last before T).
// dK/dV, keys from k0: the diagonal query tiles; then whole tiles, every query real and after
// every key of the block; then a partial last tile.
template <int kGroups = 1, class Step>
__device__ __forceinline__ void walk_query_tiles(int k0, int last_key, int T, Step&& step) {
  step(k0, 0, std::true_type{});
  int q0 = k0 + kTile, slot = 1;
  if constexpr (kGroups == 2) {
    if (q0 <= last_key) {
      step(q0, slot, std::true_type{});
      q0 += kTile;
      slot ^= 1;
    }
  }
  for (; q0 + kTile <= T; q0 += kTile, slot ^= 1) step(q0, slot, std::false_type{});
  if (q0 < T) step(q0, slot, std::true_type{});
}
template <class Step>
__device__ __forceinline__ void walk_query_tiles(int k0, int T, Step&& step) {
  walk_query_tiles<1>(k0, k0, T, step);
}
// dQ, queries from q0: the key tiles before them, every key real and before every row of the
// block; then the diagonal tiles.
template <int kGroups = 1, class Step>
__device__ __forceinline__ void walk_key_tiles(int q0, int last_query, Step&& step) {
  int k0 = 0, slot = 0;
  for (; k0 < q0; k0 += kTile, slot ^= 1) step(k0, slot, std::false_type{});
  step(k0, slot, std::true_type{});
  if constexpr (kGroups == 2) {
    if (k0 + kTile <= last_query) step(k0 + kTile, slot ^ 1, std::true_type{});
  }
}
template <class Step>
__device__ __forceinline__ void walk_key_tiles(int q0, Step&& step) {
  walk_key_tiles<1>(q0, q0, step);
}

// The same walks over a ring of kBuffers tile buffers, each step also told whether a tile came
// before it (`behind`, std::true_type from the second tile on): the overlapped wgmma kernels
// issue that tile's products behind this one's scores (WarpgroupSchedule::kOverlapped).
template <int kBuffers, int kGroups = 1, class Step>
__device__ __forceinline__ void walk_query_tiles_in_ring(int k0, int last_key, int T, Step&& step) {
  step(k0, 0, std::true_type{}, std::false_type{});
  int q0 = k0 + kTile, slot = 1 % kBuffers;
  if constexpr (kGroups == 2) {
    if (q0 <= last_key) {
      step(q0, slot, std::true_type{}, std::true_type{});
      q0 += kTile;
      slot = (slot + 1) % kBuffers;
    }
  }
  for (; q0 + kTile <= T; q0 += kTile, slot = (slot + 1) % kBuffers) {
    step(q0, slot, std::false_type{}, std::true_type{});
  }
  if (q0 < T) step(q0, slot, std::true_type{}, std::true_type{});
}
template <int kBuffers, int kGroups = 1, class Step>
__device__ __forceinline__ void walk_key_tiles_in_ring(int q0, int last_query, Step&& step) {
  if (q0 == 0) {
    step(0, 0, std::true_type{}, std::false_type{});  // the first tile is the diagonal
    if constexpr (kGroups == 2) {
      if (kTile <= last_query) step(kTile, 1 % kBuffers, std::true_type{}, std::true_type{});
    }
    return;
  }
  step(0, 0, std::false_type{}, std::false_type{});
  int k0 = kTile, slot = 1 % kBuffers;
  for (; k0 < q0; k0 += kTile, slot = (slot + 1) % kBuffers) step(k0, slot, std::false_type{}, std::true_type{});
  step(k0, slot, std::true_type{}, std::true_type{});
  if constexpr (kGroups == 2) {
    if (k0 + kTile <= last_query) step(k0 + kTile, (slot + 1) % kBuffers, std::true_type{}, std::true_type{});
  }
}

// The backward's stores of this warp's rows (those before T): dK (times scale) and dV of keys
// key[0] and key[1]; dQ (times scale) of queries row[0] and row[1].
template <class S>
__device__ __forceinline__ void store_key_rows(uint16_t* dqkv, const float (&dk)[8][4], const float (&dv)[8][4],
                                               const int (&key)[2], int b, int h, int T, int C, int t4, float scale) {
  for (int r = 0; r < 2; r++) {
    if (key[r] >= T) continue;
    store_accumulator_row<S>(dqkv + qkv_index(b, key[r], flash::kPartK, h, T, C), dk, r, t4, scale);
    store_accumulator_row<S>(dqkv + qkv_index(b, key[r], flash::kPartV, h, T, C), dv, r, t4, 1.0f);
  }
}
template <class S>
__device__ __forceinline__ void store_query_rows(uint16_t* dqkv, const float (&dq)[8][4], const int (&row)[2], int b,
                                                 int h, int T, int C, int t4, float scale) {
  for (int r = 0; r < 2; r++) {
    if (row[r] >= T) continue;
    store_accumulator_row<S>(dqkv + qkv_index(b, row[r], flash::kPartQ, h, T, C), dq, r, t4, scale);
  }
}

// Where a thread is: the block's tile by the length of its walk (rank 0 walks the most tiles),
// its head and batch element, the thread, its warp and lane, and the lane's fragment coordinates
// g = lane / 4, t4 = lane % 4.
struct Place {
  int rank, h, b, tid, warp, lane, g, t4;
};
// The GPU starts a grid's blocks in the order of their index, x fastest. kHeadByHead's grid is
// (tiles, NH, B): each head's tiles from the longest walk down, the heads in turn. kLongestFirst's
// is (NH, B, tiles): every head's longest walk before any head's next, so that the grid ends on
// its shortest blocks (kernels/backend_options.h, FlashBlockOrder). Either way the block reads its place
// from blockIdx itself, which the compiler may read again rather than hold in registers (an
// order chosen at run time, the place divided out of the linear index, held them: 50 more
// registers in dQ and spills in the forward, ptxas for sm_90; as template parameters, the
// registers of either order are those the kernels had before the choice).
template <FlashBlockOrder kOrder>
__device__ __forceinline__ Place place() {
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % 32;
  const int x = static_cast<int>(blockIdx.x), y = static_cast<int>(blockIdx.y), z = static_cast<int>(blockIdx.z);
  if constexpr (kOrder == FlashBlockOrder::kHeadByHead) {
    return Place{x, y, z, tid, tid / 32, lane, lane / 4, lane % 4};
  } else {
    return Place{z, x, y, tid, tid / 32, lane, lane / 4, lane % 4};
  }
}
// The tiles per (head, batch element) in the grid.
template <FlashBlockOrder kOrder>
__device__ __forceinline__ int tiles_per_head() {
  return static_cast<int>(kOrder == FlashBlockOrder::kHeadByHead ? gridDim.x : gridDim.z);
}
// The tile of a query-tile kernel (the forward, dQ: the last tiles walk the most key tiles) and of
// a key-tile kernel (dK/dV: the first tiles walk the most query tiles).
template <FlashBlockOrder kOrder>
__device__ __forceinline__ int query_tile_of(const Place& at) {
  return tiles_per_head<kOrder>() - 1 - at.rank;
}
__device__ __forceinline__ int key_tile_of(const Place& at) { return at.rank; }

// One block per `rows` queries or keys (kTile, or the forward's 128 rows), head and batch element,
// in the grid of `order` (place).
inline dim3 tile_grid(int B, int T, int NH, FlashBlockOrder order, int rows = kTile) {
  const auto tiles = static_cast<unsigned>((T + rows - 1) / rows);
  const auto heads = static_cast<unsigned>(NH), batch = static_cast<unsigned>(B);
  return order == FlashBlockOrder::kHeadByHead ? dim3(tiles, heads, batch) : dim3(heads, batch, tiles);
}

// Calls f(order) with the order as a constant, decltype(order)::value.
template <class F>
void with_block_order(FlashBlockOrder order, F&& f) {
  if (order == FlashBlockOrder::kLongestFirst) {
    f(std::integral_constant<FlashBlockOrder, FlashBlockOrder::kLongestFirst>{});
  } else {
    f(std::integral_constant<FlashBlockOrder, FlashBlockOrder::kHeadByHead>{});
  }
}

// Calls f(policy, copying) for the 16-bit storage of the operands (the caller checked it is
// 16-bit) and the tile copy, decltype(copying)::value being the TileCopy as a constant.
template <class F>
void with_policies(Precision storage, TileCopy copy, F&& f) {
  auto with_copy = [&](auto policy) {
    if (copy == TileCopy::kAsynchronous) {
      f(policy, std::integral_constant<TileCopy, TileCopy::kAsynchronous>{});
    } else {
      f(policy, std::integral_constant<TileCopy, TileCopy::kSynchronous>{});
    }
  };
  if (storage == Precision::kBf16) {
    with_copy(stored::Bf16{});
  } else {
    with_copy(stored::Fp16{});
  }
}

// Calls f(policy, copying, ordering) with all three of the above as constants: what the two
// forwards' launchers (mma.sync and wgmma) and the wgmma backward's instantiate their kernels over.
template <class F>
void with_kernel_choices(Precision storage, TileCopy copy, FlashBlockOrder order, F&& f) {
  with_policies(storage, copy, [&](auto policy, auto copying) {
    with_block_order(order, [&](auto ordering) { f(policy, copying, ordering); });
  });
}

}  // namespace trident::kernels::cuda::flash_mma
