// Flash attention on the tensor cores for 16-bit buffers, hs = 64, in the manner of
// FlashAttention-2 (Dao, 2023): each warp owns 16 rows of a 64-row tile and keeps its scores,
// probabilities and accumulators in mma.sync's register fragments (kernels/cuda/warp_mma.cuh),
// so that the T x T matrices exist only 16 x 64 at a time, in registers. (The forward takes 32
// rows a warp of a 128-row tile by default, FlashMmaOptions: each K and V fragment then feeds
// two products; 4 to 10% faster on one H100 than 16 rows, which it may still be asked for.)
//
// Forward: one block of 4 warps per (64-query tile, head, batch element; 128 at 32 rows a warp), the last query tiles
// (the longest rows of key tiles) launched first. Q's fragments are loaded once; per key tile of
// 64 keys at or below the diagonal, K and V go through shared memory and each warp computes
//   S = Q K^T (8 x 4 mma), the causal mask, the online softmax (row max over the 4 lanes that
//   share a row, by shuffles; scores in log2 units so that exp is one exp2), O *= exp(m_old -
//   m_new), then O += P V with P rounded to the storage format as the A operand (8 x 4 mma).
// At the end out = O / l (rounded once) and lse = m + log l over the unrounded probabilities.
// Backward, as the scalar kernels (flash_attention.cu): D = rowsum(dout * out) first (there),
// then two kernels and no atomics, so every dqkv element is written once, in a fixed order:
//   dK, dV: one block per 64-key tile, warps owning 16 keys; per query tile at or after the
//           diagonal: S^T = K Q^T, P^T = exp(S^T - L), dP^T = V dO^T, dS^T = P^T (dP^T - D),
//           dV += P^T dO, dK += dS^T Q (P^T and dS^T rounded to the storage format as operands);
//   dQ:     one block per 64-query tile; per key tile up to the diagonal: S, P, dP = dO V^T,
//           dS = P (dP - D), dQ += dS K.
// dK and dQ take the scale once at the end (1/8, a power of two: exact).
// Or (FlashMmaOptions::dq = FlashDq::kInKeyWalk, not yet the default) dQ in the dK/dV walk, with 5
// products a tile pair instead of 7, as FlashAttention-2 but without its atomicAdd of dQ: per
// query tile the dK/dV kernel also stores dS^T in shared memory (as rounded for dK), and each warp
// computes its 16 queries' share dS K over the block's 64 keys; the key tiles then add their
// shares into fp32 sums of dQ in turn (kernels/cuda/ordered_turns.cuh): the diagonal's key tile
// first (it stores), key tile 0 last (it writes dQ, scaled and rounded once). Blocks take their
// key tile from a ticket, per (batch, head) the last key tile first, which is also the order in
// which the walks reach each query tile, so a turn is seldom waited for. Its own K stays in a
// shared tile for dS K (18 KiB of dynamic shared memory beside the static 37 KiB). ptxas (sm_90):
// 255 registers and 24 to 32 bytes of spills, where the two-kernel dK/dV has 254 and none.
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
// Not yet run on a GPU: the emulation (tests/emulation) runs these kernels with host models of
// mma.sync, ldmatrix and cp.async on every CI run; tests/gpu checks them against the CPU twin on a GPU.
#include "kernels/cuda/flash_attention_mma.cuh"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cuda/async_copy.cuh"          // async_copy::copy, wait_all
#include "kernels/cuda/cuda_check.h"            // CUDA_CHECK_LAUNCH
#include "kernels/cuda/flash_attention_math.h"  // qkv_index, row_index, stat_index, kPart*, kTile
#include "kernels/cuda/ordered_turns.cuh"       // turns::take_ticket, wait_for_turn, pass_turn
#include "kernels/cuda/shared_slices.h"         // SharedSlices, shared_slice_bytes
#include "kernels/cuda/warp_mma.cuh"            // mma::mma_16x8x16, mma::load_matrix_x4, mma::pack
#include "kernels/stored_element.h"             // stored::Bf16, Fp16, with_policy

namespace trident::kernels::cuda {

namespace {

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
static_assert(kWarps == 4, "kernels::flash_attention_scratch_floats counts 4 dQ turn counters a query tile");

// The blocks' shared tiles, two buffers of each (tile j in buffer j % 2): 36,864 and 37,888
// bytes, under the 48 KiB of static shared memory.
struct alignas(16) ForwardTiles {
  uint16_t k[2][kTileElements];  // buffer 1 holds Q first
  uint16_t v[2][kTileElements];
};
struct alignas(16) BackwardTiles {
  uint16_t first[2][kTileElements];   // dK/dV: Q of a query tile (own K first); dQ: K of a key tile (own Q first)
  uint16_t second[2][kTileElements];  // dK/dV: dO of the query tile (own V first); dQ: V (own dO first)
  float lse[2][kTile];                // dK/dV: the query tile's L and D
  float delta[2][kTile];
};

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
template <TileCopy kCopy>
__device__ __forceinline__ void load_tile(uint16_t* tile, const uint16_t* first, std::size_t stride, int b, int row0,
                                          int T, int tid) {
  constexpr int kChunks = kHeadSize / 8;
  for (int id = tid; id < kTile * kChunks; id += kThreads) {
    const int r = id / kChunks;
    const int c = (id % kChunks) * 8;
    const int t = row0 + r;
    const bool valid = t < T;
    copy_16<kCopy>(tile + r * kLd + c, first + (static_cast<std::size_t>(b) * T + (valid ? t : 0)) * stride + c,
                   valid);
  }
}

// K and V of key tile [k0, k0 + 64) into k_tile and v_tile.
template <TileCopy kCopy>
__device__ __forceinline__ void load_key_tile(uint16_t* k_tile, uint16_t* v_tile, const uint16_t* qkv, int b, int h,
                                              int k0, int T, int C, int tid) {
  const std::size_t stride = 3 * static_cast<std::size_t>(C);
  load_tile<kCopy>(k_tile, qkv + qkv_index(0, 0, flash::kPartK, h, T, C), stride, b, k0, T, tid);
  load_tile<kCopy>(v_tile, qkv + qkv_index(0, 0, flash::kPartV, h, T, C), stride, b, k0, T, tid);
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

// Stores the lane's part of one row of an accumulator (r = 0: row g, 1: row g + 8) into dst,
// times `factor`, rounded to S.
template <class S>
__device__ __forceinline__ void store_accumulator_row(uint16_t* dst, const float (&acc)[8][4], int r, int t4,
                                                      float factor) {
  for (int j = 0; j < 8; j++) {
    store_pair(dst + 8 * j + 2 * t4, mma::pack<S>(acc[j][2 * r] * factor, acc[j][2 * r + 1] * factor));
  }
}

// Where a thread is: the block's head and batch element (grid y and z; x is the tile), the thread,
// its warp and lane, and the lane's fragment coordinates g = lane / 4, t4 = lane % 4.
struct Place {
  int h, b, tid, warp, lane, g, t4;
};
__device__ __forceinline__ Place place() {
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % 32;
  return Place{static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.z), tid, tid / 32, lane, lane / 4, lane % 4};
}
// The tile of a query-tile kernel: the last tiles (the most key tiles to walk) launched first.
__device__ __forceinline__ int last_tile_first() {
  return static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x);
}

template <class S, TileCopy kCopy, int kRowSets>
__global__ void __launch_bounds__(kThreads)
    mma_forward_kernel(uint16_t* __restrict__ out, float* __restrict__ lse, const uint16_t* __restrict__ qkv, int T,
                       int C, int NH, float scale) {
  static_assert(kRowSets == 1 || kRowSets == 2, "16 or 32 query rows per warp: Q passes through buffer 1's two tiles");
  constexpr int kRows = kTile * kRowSets;  // the block's queries
  __shared__ ForwardTiles tiles;
  const Place at = place();
  const int q0 = last_tile_first() * kRows;
  const int h = at.h, b = at.b, tid = at.tid, warp = at.warp, lane = at.lane, g = at.g, t4 = at.t4;
  const std::size_t stride = 3 * static_cast<std::size_t>(C);

  // Q through buffer 1: rows [q0, q0 + 64) in its K tile, the next 64 (kRowSets = 2) in its V tile.
  const uint16_t* q_first = qkv + qkv_index(0, 0, flash::kPartQ, h, T, C);
  load_tile<kCopy>(tiles.k[1], q_first, stride, b, q0, T, tid);
  if constexpr (kRowSets == 2) load_tile<kCopy>(tiles.v[1], q_first, stride, b, q0 + kTile, T, tid);
  load_key_tile<kCopy>(tiles.k[0], tiles.v[0], qkv, b, h, 0, T, C, tid);
  wait_for_tiles<kCopy>();
  // The warp's rows: kRowSets sets of 16, [q0 + first, q0 + first + 16) each.
  uint32_t qa[kRowSets][4][4];
  int row[kRowSets][2];
#pragma unroll
  for (int set = 0; set < kRowSets; set++) {
    const int first = 16 * (kRowSets * warp + set);
    load_row_fragments(qa[set], first < kTile ? tiles.k[1] : tiles.v[1], first % kTile, lane);
    row[set][0] = q0 + first + g;
    row[set][1] = q0 + first + g + 8;
  }
  const int first_row_of_warp = q0 + 16 * kRowSets * warp;
  const int last_row_of_warp = first_row_of_warp + 16 * kRowSets - 1;

  const float scale_log2 = scale * kLog2e;
  float m[kRowSets][2];  // running row max, log2 units
  float l[kRowSets][2];  // this lane's part of the running row sum
#pragma unroll
  for (int set = 0; set < kRowSets; set++) {
    m[set][0] = m[set][1] = -INFINITY;
    l[set][0] = l[set][1] = 0.0f;
  }
  float o[kRowSets][8][4] = {};

  // One key tile of the walk. `masked` (std::true_type) adds the per-score causal and end
  // tests, which only the tiles from the block's first query on need (the walk's last one or two).
  const int last_query = min(q0 + kRows, T) - 1;
  auto key_tile = [&](int k0, int slot, auto masked) {
    wait_for_tiles<kCopy>();  // this key tile is whole; the other buffer (the last tile, or Q) is free
    if (k0 + kTile <= last_query) {
      load_key_tile<kCopy>(tiles.k[slot ^ 1], tiles.v[slot ^ 1], qkv, b, h, k0 + kTile, T, C, tid);
    }
    // Every key after every row of this warp (with 32 rows a warp, the block's last key tile for
    // its first two warps): the whole tile masked, its products would add exact zeros. A warp
    // whose rows all lie past T (the last, partial tile) has nothing to store: it only copies.
    if (k0 > last_row_of_warp || first_row_of_warp >= T) return;

    float s[kRowSets][8][4] = {};
    multiply_by_rows_transposed<S, kRowSets>(s, qa, tiles.k[slot], lane);
#pragma unroll
    for (int set = 0; set < kRowSets; set++) {
      if constexpr (decltype(masked)::value) {
        for (int j = 0; j < 8; j++) {
          for (int i = 0; i < 4; i++) {
            const int key = k0 + fragment_column(j, i, t4);
            if (key > row[set][i / 2] || key >= T) s[set][j][i] = -INFINITY;
          }
        }
      }
      // Scores stay unscaled: max(s) scale = max(s scale) exactly (scale > 0, rounding is
      // monotone), and the scale enters exp2's argument by one fma.
      float tile_max[2] = {-INFINITY, -INFINITY};
      for (int j = 0; j < 8; j++) {
        for (int i = 0; i < 4; i++) tile_max[i / 2] = fmaxf(tile_max[i / 2], s[set][j][i]);
      }
      float m_use[2];
      for (int r = 0; r < 2; r++) {
        const float m_new = fmaxf(m[set][r], quad_max(tile_max[r]) * scale_log2);
        m_use[r] = m_new == -INFINITY ? 0.0f : m_new;  // a row with no key yet: nothing to rescale
        const float correction = exp2_ftz(m[set][r] - m_use[r]);  // 0 on the first tile (m = -inf)
        m[set][r] = m_new;
        l[set][r] *= correction;
        for (int j = 0; j < 8; j++) {
          o[set][j][2 * r] *= correction;
          o[set][j][2 * r + 1] *= correction;
        }
      }
      for (int j = 0; j < 8; j++) {
        for (int i = 0; i < 4; i++) {
          s[set][j][i] = exp2_ftz(fmaf(s[set][j][i], scale_log2, -m_use[i / 2]));  // masked: exp2(-inf) = 0
          l[set][i / 2] += s[set][j][i];
        }
      }
    }
    multiply_by_rows<S, kRowSets>(o, s, tiles.v[slot], lane);
  };
  // Tiles before q0: every key real and before every row of the block.
  int k0 = 0, slot = 0;
  for (; k0 < q0; k0 += kTile, slot ^= 1) key_tile(k0, slot, std::false_type{});
  for (; k0 <= last_query; k0 += kTile, slot ^= 1) key_tile(k0, slot, std::true_type{});

#pragma unroll
  for (int set = 0; set < kRowSets; set++) {
    for (int r = 0; r < 2; r++) {
      const float sum = quad_sum(l[set][r]);
      if (row[set][r] >= T) continue;
      store_accumulator_row<S>(out + row_index(b, row[set][r], h, T, C), o[set], r, t4, 1.0f / sum);
      if (t4 == 0) lse[stat_index(b, h, row[set][r], T, NH)] = m[set][r] * kLn2 + logf(sum);
    }
  }
}

// The backward kernels' own operands, kept in registers for the whole walk: rows [row0, row0 + 64)
// of two buffers (first + (b T + t) stride, as load_tile) copied into buffer 1 here, and after
// the wait and barrier that follow, this warp's A fragments of both (own_fragments).
template <TileCopy kCopy>
__device__ __forceinline__ void load_own_rows(BackwardTiles& tiles, const uint16_t* first_rows,
                                              std::size_t first_stride, const uint16_t* second_rows,
                                              std::size_t second_stride, int b, int row0, int T, int tid) {
  load_tile<kCopy>(tiles.first[1], first_rows, first_stride, b, row0, T, tid);
  load_tile<kCopy>(tiles.second[1], second_rows, second_stride, b, row0, T, tid);
}
__device__ __forceinline__ void own_fragments(uint32_t (&first)[4][4], uint32_t (&second)[4][4],
                                              const BackwardTiles& tiles, const Place& at) {
  load_row_fragments(first, tiles.first[1], 16 * at.warp, at.lane);
  load_row_fragments(second, tiles.second[1], 16 * at.warp, at.lane);
}

// What the dK/dV walk needs of query tile [q0, q0 + 64), into buffer `slot`: Q and dO, the
// rows' L and D (zeros past T).
template <TileCopy kCopy>
__device__ __forceinline__ void load_query_tile(BackwardTiles& tiles, int slot, const uint16_t* q_first,
                                                const uint16_t* do_first, const float* lse, const float* delta,
                                                int b, int h, int q0, int T, int C, int NH, int tid) {
  load_tile<kCopy>(tiles.first[slot], q_first, 3 * static_cast<std::size_t>(C), b, q0, T, tid);
  load_tile<kCopy>(tiles.second[slot], do_first, static_cast<std::size_t>(C), b, q0, T, tid);
  for (int i = tid; i < 2 * kTile; i += kThreads) {
    const int r = i % kTile;
    const bool valid = q0 + r < T;
    const std::size_t from = stat_index(b, h, valid ? q0 + r : 0, T, NH);
    if (i < kTile) {
      copy_4<kCopy>(&tiles.lse[slot][r], lse + from, valid);
    } else {
      copy_4<kCopy>(&tiles.delta[slot][r], delta + from, valid);
    }
  }
}

// Where dQ in the key walk (FlashDq::kInKeyWalk) adds up: the dQ sums [B, NH, T, 64] in fp32, a
// turn counter per (batch, head, query tile, warp), and the ticket counter that orders the blocks
// (kernels/cuda/ordered_turns.cuh). Null pointers with FlashDq::kSeparateWalk.
struct DqSums {
  float* sums = nullptr;
  unsigned* turns = nullptr;
  unsigned* ticket = nullptr;
};
DqSums carve_dq_sums(float* work, int B, int T, int NH) {
  const std::size_t rows = static_cast<std::size_t>(B) * NH * T;
  const std::size_t tiles = static_cast<std::size_t>(B) * NH * ((T + kTile - 1) / kTile);
  auto* turns = reinterpret_cast<unsigned*>(work + rows * kHeadSize);
  return DqSums{work, turns, turns + tiles * kWarps};
}
// The dK/dV kernel's dynamic shared memory with dQ in the key walk: its own K tile (kept for
// dS K; the static buffers take the query tiles) and the dS^T tile, each a slice of its own.
constexpr std::size_t kTileFloats = kTileElements * sizeof(uint16_t) / sizeof(float);
constexpr std::size_t kDqWalkSharedBytes = 2 * shared_slice_bytes(kTileFloats);

template <class S, TileCopy kCopy, FlashDq kDq>
__global__ void __launch_bounds__(kThreads)
    mma_dkdv_kernel(uint16_t* __restrict__ dqkv, const uint16_t* __restrict__ qkv, const uint16_t* __restrict__ dout,
                    const float* __restrict__ lse, const float* __restrict__ delta, int T, int C, int NH, float scale,
                    DqSums dq_sums) {
  constexpr bool kDqInWalk = kDq == FlashDq::kInKeyWalk;
  __shared__ BackwardTiles tiles;
  extern __shared__ float walk_shared[];  // kDqInWalk only: kDqWalkSharedBytes
  Place at = place();
  int key_tile = static_cast<int>(blockIdx.x);  // key tile 0 walks every query tile: first
  if constexpr (kDqInWalk) {
    // The blocks' order from tickets: per (batch, head) the last key tile first, so that the
    // diagonal's key tile adds first into each query tile and every adder's predecessor started
    // before it (ordered_turns.cuh).
    __shared__ unsigned ticket;
    if (at.tid == 0) ticket = turns::take_ticket(dq_sums.ticket);
    __syncthreads();
    const int tiles_per_head = static_cast<int>(gridDim.x);
    const int head = static_cast<int>(ticket / static_cast<unsigned>(tiles_per_head));
    key_tile = tiles_per_head - 1 - static_cast<int>(ticket % static_cast<unsigned>(tiles_per_head));
    at.h = head % NH;
    at.b = head / NH;
  }
  const int k0 = key_tile * kTile;
  const int h = at.h, b = at.b, tid = at.tid, warp = at.warp, lane = at.lane, g = at.g, t4 = at.t4;
  const std::size_t stride = 3 * static_cast<std::size_t>(C);
  const uint16_t* q_first = qkv + qkv_index(0, 0, flash::kPartQ, h, T, C);
  const uint16_t* do_first = dout + row_index(0, 0, h, T, C);
  // The block's own K: in buffer 1 until the walk takes it, or (dQ in the walk) a tile of its own.
  uint16_t* own_k = tiles.first[1];
  uint16_t* ds_tile = nullptr;  // dS^T: [this block's 64 keys][the query tile's 64 queries]
  if constexpr (kDqInWalk) {
    SharedSlices slices(walk_shared);
    own_k = reinterpret_cast<uint16_t*>(slices.take(kTileFloats));
    ds_tile = reinterpret_cast<uint16_t*>(slices.take(kTileFloats));
  }

  load_tile<kCopy>(own_k, qkv + qkv_index(0, 0, flash::kPartK, h, T, C), stride, b, k0, T, tid);
  load_tile<kCopy>(tiles.second[1], qkv + qkv_index(0, 0, flash::kPartV, h, T, C), stride, b, k0, T, tid);
  load_query_tile<kCopy>(tiles, 0, q_first, do_first, lse, delta, b, h, k0, T, C, NH, tid);
  wait_for_tiles<kCopy>();
  uint32_t ka[4][4];
  uint32_t va[4][4];
  load_row_fragments(ka, own_k, 16 * warp, lane);
  load_row_fragments(va, tiles.second[1], 16 * warp, lane);

  const float scale_log2 = scale * kLog2e;
  const int key[2] = {k0 + 16 * warp + g, k0 + 16 * warp + g + 8};
  float dk[8][4] = {};
  float dv[8][4] = {};
  // One query tile of the walk. `masked` (std::true_type) adds the per-score causal and end
  // tests, which only the diagonal tile and a last, partial one need.
  auto query_tile = [&](int q0, int slot, auto masked) {
    wait_for_tiles<kCopy>();  // this query tile is whole; the other buffer (the last tile, or K and V) is free
    if (q0 + kTile < T) {
      load_query_tile<kCopy>(tiles, slot ^ 1, q_first, do_first, lse, delta, b, h, q0 + kTile, T, C, NH, tid);
    }

    // Every key of this warp past T (a last, partial tile): nothing to store, and (dQ in the
    // walk) zeros for its rows of dS^T. The test is the warp's first key, the same in every
    // lane: mma.sync needs the whole warp.
    const bool keys_real = k0 + 16 * warp < T;
    if (!kDqInWalk && !keys_real) return;

    float pt[8][4] = {};   // S^T, then P^T: [this warp's 16 keys][64 queries]
    float dst[8][4] = {};  // dP^T, then dS^T
    if (keys_real) {
      multiply_by_rows_transposed<S, 1>(&pt, &ka, tiles.first[slot], lane);
      multiply_by_rows_transposed<S, 1>(&dst, &va, tiles.second[slot], lane);
      if constexpr (decltype(masked)::value) {
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
          pt[j][i] = exp2_ftz(fmaf(pt[j][i], scale_log2, -tiles.lse[slot][column] * kLog2e));  // masked: 0
          dst[j][i] = pt[j][i] * (dst[j][i] - tiles.delta[slot][column]);
        }
      }
      multiply_by_rows<S, 1>(&dv, &pt, tiles.second[slot], lane);
      multiply_by_rows<S, 1>(&dk, &dst, tiles.first[slot], lane);
    }
    if constexpr (kDqInWalk) {
      // dS^T into shared memory as the dK product rounded it, then each warp its 16 queries' dQ
      // share over the block's 64 keys: dS K.
      for (int r = 0; r < 2; r++) {
        for (int j = 0; j < 8; j++) {
          store_pair(ds_tile + (16 * warp + g + 8 * r) * kLd + 8 * j + 2 * t4,
                     mma::pack<S>(dst[j][2 * r], dst[j][2 * r + 1]));
        }
      }
      __syncthreads();  // dS^T whole (the next tile's writes come after its wait_for_tiles barrier)
      float dq[8][4] = {};
      multiply_transposed_by_rows<S>(dq, ds_tile, 16 * warp, own_k, lane);

      // Into the sums, in turn: for query tile i, the key tiles from the diagonal's (i) down to 0.
      // The diagonal's stores the sums, the others add to them, key tile 0 writes dQ itself.
      const int i = q0 / kTile;
      const bool first = key_tile == i, last = key_tile == 0;
      const std::size_t head = static_cast<std::size_t>(b) * NH + h;
      unsigned* turn = dq_sums.turns + (head * gridDim.x + i) * kWarps + warp;
      if (!first) {
        if (lane == 0) turns::wait_for_turn(turn, static_cast<unsigned>(i - key_tile));
        __syncwarp();
      }
      for (int r = 0; r < 2; r++) {
        const int t = q0 + 16 * warp + g + 8 * r;
        if (t >= T) continue;
        float* sum_row = dq_sums.sums + (head * T + t) * kHeadSize;
        for (int j = 0; j < 8; j++) {
          const int c = 8 * j + 2 * t4;
          float x = dq[j][2 * r], y = dq[j][2 * r + 1];
          if (!first) {
            float sx, sy;
            turns::load_pair(sum_row + c, sx, sy);
            x = sx + x;
            y = sy + y;
          }
          if (last) {
            store_pair(dqkv + qkv_index(b, t, flash::kPartQ, h, T, C) + c, mma::pack<S>(x * scale, y * scale));
          } else {
            turns::store_pair(sum_row + c, x, y);
          }
        }
      }
      if (!last) {
        turns::fence_stores();
        __syncwarp();
        if (lane == 0) turns::pass_turn(turn, static_cast<unsigned>(i - key_tile + 1));
      }
    }
  };
  // The diagonal tile; then whole tiles, every query real and after every key of the block; then
  // a partial last tile.
  query_tile(k0, 0, std::true_type{});
  int q0 = k0 + kTile, slot = 1;
  for (; q0 + kTile <= T; q0 += kTile, slot ^= 1) query_tile(q0, slot, std::false_type{});
  if (q0 < T) query_tile(q0, slot, std::true_type{});

  for (int r = 0; r < 2; r++) {
    if (key[r] >= T) continue;
    store_accumulator_row<S>(dqkv + qkv_index(b, key[r], flash::kPartK, h, T, C), dk, r, t4, scale);
    store_accumulator_row<S>(dqkv + qkv_index(b, key[r], flash::kPartV, h, T, C), dv, r, t4, 1.0f);
  }
}

template <class S, TileCopy kCopy>
__global__ void __launch_bounds__(kThreads)
    mma_dq_kernel(uint16_t* __restrict__ dqkv, const uint16_t* __restrict__ qkv, const uint16_t* __restrict__ dout,
                  const float* __restrict__ lse, const float* __restrict__ delta, int T, int C, int NH, float scale) {
  __shared__ BackwardTiles tiles;
  const Place at = place();
  const int q0 = last_tile_first() * kTile;
  const int h = at.h, b = at.b, tid = at.tid, warp = at.warp, lane = at.lane, g = at.g, t4 = at.t4;
  const std::size_t stride = 3 * static_cast<std::size_t>(C);

  load_own_rows<kCopy>(tiles, qkv + qkv_index(0, 0, flash::kPartQ, h, T, C), stride, dout + row_index(0, 0, h, T, C),
                       static_cast<std::size_t>(C), b, q0, T, tid);
  load_key_tile<kCopy>(tiles.first[0], tiles.second[0], qkv, b, h, 0, T, C, tid);
  wait_for_tiles<kCopy>();
  uint32_t qa[4][4];
  uint32_t doa[4][4];
  own_fragments(qa, doa, tiles, at);

  const float scale_log2 = scale * kLog2e;
  const int row[2] = {q0 + 16 * warp + g, q0 + 16 * warp + g + 8};
  float row_lse[2];
  float row_delta[2];
  for (int r = 0; r < 2; r++) {
    row_lse[r] = row[r] < T ? lse[stat_index(b, h, row[r], T, NH)] * kLog2e : 0.0f;
    row_delta[r] = row[r] < T ? delta[stat_index(b, h, row[r], T, NH)] : 0.0f;
  }
  float dq[8][4] = {};
  const int last_query = min(q0 + kTile, T) - 1;
  // One key tile of the walk. `masked` (std::true_type) adds the per-score causal and end
  // tests, which only the diagonal tile needs.
  auto key_tile = [&](int k0, int slot, auto masked) {
    wait_for_tiles<kCopy>();  // this key tile is whole; the other buffer (the last tile, or Q and dO) is free
    if (k0 + kTile <= last_query) {
      load_key_tile<kCopy>(tiles.first[slot ^ 1], tiles.second[slot ^ 1], qkv, b, h, k0 + kTile, T, C, tid);
    }

    // Every row of this warp past T (a last, partial tile): nothing to store. The test is the
    // warp's first row, the same in every lane: mma.sync needs the whole warp.
    if (q0 + 16 * warp >= T) return;

    float ds[8][4] = {};  // S, then dS
    float dp[8][4] = {};
    multiply_by_rows_transposed<S, 1>(&ds, &qa, tiles.first[slot], lane);
    multiply_by_rows_transposed<S, 1>(&dp, &doa, tiles.second[slot], lane);
    if constexpr (decltype(masked)::value) {
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
    multiply_by_rows<S, 1>(&dq, &ds, tiles.first[slot], lane);
  };
  // Tiles before q0: every key real and before every row of the block; then the diagonal.
  int k0 = 0, slot = 0;
  for (; k0 < q0; k0 += kTile, slot ^= 1) key_tile(k0, slot, std::false_type{});
  key_tile(k0, slot, std::true_type{});
  for (int r = 0; r < 2; r++) {
    if (row[r] >= T) continue;
    store_accumulator_row<S>(dqkv + qkv_index(b, row[r], flash::kPartQ, h, T, C), dq, r, t4, scale);
  }
}

// One block per `rows` queries or keys (kTile, or the forward's 128 rows), head and batch element.
dim3 tile_grid(int B, int T, int NH, int rows = kTile) {
  return dim3(static_cast<unsigned>((T + rows - 1) / rows), static_cast<unsigned>(NH), static_cast<unsigned>(B));
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

}  // namespace

bool flash_attention_mma_applies(std::initializer_list<ConstActPtr> operands) {
  bool any = false;
  Precision storage = Precision::kFp32;
  for (ConstActPtr p : operands) {
    if (!p) continue;
    if (p.storage() == Precision::kFp32 || (any && p.storage() != storage)) return false;
    if (reinterpret_cast<std::uintptr_t>(p.get()) % 16 != 0) return false;
    storage = p.storage();
    any = true;
  }
  return any;
}

void flash_attention_mma_forward(ActPtr out, float* lse, ConstActPtr qkv, int B, int T, int C, int NH, float scale,
                                 cudaStream_t stream, const FlashMmaOptions& options) {
  if (options.forward_rows_per_warp != 16 && options.forward_rows_per_warp != 32) {
    throw std::invalid_argument("flash_attention_mma_forward: forward_rows_per_warp is " +
                                std::to_string(options.forward_rows_per_warp) + ", not 16 or 32");
  }
  if (B == 0 || T == 0) return;
  auto* out_s = static_cast<uint16_t*>(out.get());
  const auto* qkv_s = static_cast<const uint16_t*>(qkv.get());
  with_policies(qkv.storage(), options.copy, [&](auto policy, auto copying) {
    using S = decltype(policy);
    using Copy = decltype(copying);
    if (options.forward_rows_per_warp == 32) {
      mma_forward_kernel<S, Copy::value, 2><<<tile_grid(B, T, NH, 2 * kTile), kThreads, 0, stream>>>(
          out_s, lse, qkv_s, T, C, NH, scale);
    } else {
      mma_forward_kernel<S, Copy::value, 1><<<tile_grid(B, T, NH), kThreads, 0, stream>>>(out_s, lse, qkv_s, T, C, NH,
                                                                                          scale);
    }
  });
  CUDA_CHECK_LAUNCH();
}

std::size_t flash_attention_mma_dq_sums_floats(int B, int T, int NH) {
  return flash_attention_scratch_floats(B, T, NH, FlashDq::kInKeyWalk) - flash_attention_dq_sums_offset(B, T, NH);
}

void flash_attention_mma_backward(ActPtr dqkv, ConstActPtr dout, ConstActPtr qkv, const float* lse,
                                  const float* delta, float* dq_sums, int B, int T, int C, int NH, float scale,
                                  cudaStream_t stream, const FlashMmaOptions& options) {
  if (B == 0 || T == 0) return;
  const bool dq_in_walk = options.dq == FlashDq::kInKeyWalk;
  DqSums sums;
  if (dq_in_walk) {
    if (dq_sums == nullptr) {
      throw std::invalid_argument("flash_attention_mma_backward: dQ in the key walk needs dq_sums");
    }
    sums = carve_dq_sums(dq_sums, B, T, NH);
    // The turn counters and the ticket start at zero; the sums need no clearing (the diagonal's
    // key tile stores before anyone adds).
    const std::size_t counters = static_cast<std::size_t>(sums.ticket - sums.turns) + 1;
    CUDA_CHECK(cudaMemsetAsync(sums.turns, 0, counters * sizeof(unsigned), stream));
  }
  with_policies(qkv.storage(), options.copy, [&](auto policy, auto copying) {
    using S = decltype(policy);
    using Copy = decltype(copying);
    auto* dqkv_s = static_cast<uint16_t*>(dqkv.get());
    const auto* dout_s = static_cast<const uint16_t*>(dout.get());
    const auto* qkv_s = static_cast<const uint16_t*>(qkv.get());
    if (dq_in_walk) {
      // 37,888 static bytes and these: over the 48 KiB a block gets unasked, so opted in.
      CUDA_CHECK(cudaFuncSetAttribute(mma_dkdv_kernel<S, Copy::value, FlashDq::kInKeyWalk>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kDqWalkSharedBytes)));
      mma_dkdv_kernel<S, Copy::value, FlashDq::kInKeyWalk><<<tile_grid(B, T, NH), kThreads, kDqWalkSharedBytes,
                                                             stream>>>(dqkv_s, qkv_s, dout_s, lse, delta, T, C, NH,
                                                                       scale, sums);
      return;
    }
    mma_dkdv_kernel<S, Copy::value, FlashDq::kSeparateWalk><<<tile_grid(B, T, NH), kThreads, 0, stream>>>(
        dqkv_s, qkv_s, dout_s, lse, delta, T, C, NH, scale, sums);
    CUDA_CHECK_LAUNCH();
    mma_dq_kernel<S, Copy::value><<<tile_grid(B, T, NH), kThreads, 0, stream>>>(dqkv_s, qkv_s, dout_s, lse, delta,
                                                                                T, C, NH, scale);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trident::kernels::cuda
