// Flash attention on the tensor cores for 16-bit buffers, hs = 64, in the manner of
// FlashAttention-2 (Dao, 2023): each warp owns 16 rows of a 64-row tile and keeps its scores,
// probabilities and accumulators in mma.sync's register fragments (kernels/cuda/warp_mma.cuh),
// so that the T x T matrices exist only 16 x 64 at a time, in registers.
//
// Forward: one block of 4 warps per (64-query tile, head, batch element), the last query tiles
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
//
// What rounds where (all fp32 otherwise): the products read the stored 16-bit q, k, v and dout;
// P and dS are rounded to the storage format to enter the tensor cores (the scalar kernels keep
// them fp32), as every tensor-core flash attention does; out and dqkv are rounded once.
// Not yet run on a GPU: the emulation (tests/emulation) runs these kernels with a host model of
// mma.sync and ldmatrix on every CI run; tests/gpu checks them against the CPU twin on a GPU.
#include "kernels/cuda/flash_attention_mma.cuh"

#include <cstdint>
#include <cstring>

#include "kernels/cuda/cuda_check.h"            // CUDA_CHECK_LAUNCH
#include "kernels/cuda/flash_attention_math.h"  // qkv_index, row_index, stat_index, kPart*, kTile
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

// The blocks' shared tiles (37,376 bytes: under the 48 KiB of static shared memory).
struct alignas(16) ForwardTiles {
  uint16_t q[kTileElements];
  uint16_t k[kTileElements];
  uint16_t v[kTileElements];
};
struct alignas(16) BackwardTiles {
  uint16_t first[kTileElements];   // dK/dV: own K; dQ: Q
  uint16_t second[kTileElements];  // dK/dV: own V; dQ: dO
  uint16_t third[kTileElements];   // dK/dV: Q of the query tile; dQ: K of the key tile
  uint16_t fourth[kTileElements];  // dK/dV: dO of the query tile; dQ: V of the key tile
  float lse[kTile];                // dK/dV: the query tile's L (log2 units) and D
  float delta[kTile];
};

// Rows [row0, row0 + 64) of a [B, T, ...] buffer whose row t of batch element b starts at
// first + (b T + t) stride, 64 elements each, into tile (row stride kLd): 16 bytes per thread and
// step; rows at or past T are zeros (masked later, never used).
__device__ __forceinline__ void load_tile(uint16_t* tile, const uint16_t* first, std::size_t stride, int b, int row0,
                                          int T, int tid) {
  constexpr int kChunks = kHeadSize / 8;
  for (int id = tid; id < kTile * kChunks; id += kThreads) {
    const int r = id / kChunks;
    const int c = (id % kChunks) * 8;
    const int t = row0 + r;
    uint16_t* to = tile + r * kLd + c;
    const uint16_t* from = first + (static_cast<std::size_t>(b) * T + t) * stride + c;
#ifdef __CUDA_ARCH__
    *reinterpret_cast<uint4*>(to) = t < T ? *reinterpret_cast<const uint4*>(from) : make_uint4(0, 0, 0, 0);
#else
    if (t < T) {
      std::memcpy(to, from, 8 * sizeof(uint16_t));
    } else {
      std::memset(to, 0, 8 * sizeof(uint16_t));
    }
#endif
  }
}

// K and V of key tile [k0, k0 + 64) into k_tile and v_tile, between barriers: every warp is
// done with the previous tiles before, and the new ones are whole after.
__device__ __forceinline__ void load_key_tile(uint16_t* k_tile, uint16_t* v_tile, const uint16_t* qkv, int b, int h,
                                              int k0, int T, int C, int tid) {
  const std::size_t stride = 3 * static_cast<std::size_t>(C);
  __syncthreads();
  load_tile(k_tile, qkv + qkv_index(0, 0, flash::kPartK, h, T, C), stride, b, k0, T, tid);
  load_tile(v_tile, qkv + qkv_index(0, 0, flash::kPartV, h, T, C), stride, b, k0, T, tid);
  __syncthreads();
}

// Two adjacent 16-bit outputs (4-byte aligned: even channel, even C).
__device__ __forceinline__ void store_pair(uint16_t* at, uint32_t pair) {
#ifdef __CUDA_ARCH__
  *reinterpret_cast<uint32_t*>(at) = pair;
#else
  std::memcpy(at, &pair, sizeof pair);
#endif
}

// A-operand fragments of rows [16 w, 16 w + 16) of a tile, all 64 columns (4 k-steps of 16).
__device__ __forceinline__ void load_row_fragments(uint32_t (&a)[4][4], const uint16_t* tile, int warp, int lane) {
  for (int ks = 0; ks < 4; ks++) {
    mma::load_matrix_x4<false>(a[ks], tile + (16 * warp + lane % 16) * kLd + 16 * ks + 8 * (lane / 16));
  }
}

// acc[j] (+)= A M^T for the 8 column blocks j of 8 rows of M (a tile of 64 rows, row-major: its
// rows are acc's columns), k over the 64 channels: Q K^T, K Q^T, dO V^T, V dO^T.
template <class S>
__device__ __forceinline__ void multiply_by_rows_transposed(float (&acc)[8][4], const uint32_t (&a)[4][4],
                                                            const uint16_t* m, int lane) {
  for (int j = 0; j < 8; j++) {
    for (int half = 0; half < 2; half++) {  // channels [32 half, 32 half + 32): two k-steps
      uint32_t rows[4];
      mma::load_matrix_x4<false>(rows, m + (8 * j + lane % 8) * kLd + 32 * half + 8 * (lane / 8));
      const uint32_t b0[2] = {rows[0], rows[1]};
      const uint32_t b1[2] = {rows[2], rows[3]};
      mma::mma_16x8x16<S>(acc[j], a[2 * half], b0);
      mma::mma_16x8x16<S>(acc[j], a[2 * half + 1], b1);
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
template <class S>
__device__ __forceinline__ void multiply_by_rows(float (&acc)[8][4], const float (&values)[8][4], const uint16_t* m,
                                                 int lane) {
  for (int ks = 0; ks < 4; ks++) {
    uint32_t a[4];
    accumulator_as_a<S>(a, values, ks);
    for (int jp = 0; jp < 4; jp++) {  // column blocks 2 jp and 2 jp + 1
      uint32_t cols[4];
      const int row = 16 * ks + lane % 8 + 8 * ((lane / 8) % 2);  // lanes 8-15 and 24-31: rows 8-15
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

template <class S>
__global__ void __launch_bounds__(kThreads)
    mma_forward_kernel(uint16_t* __restrict__ out, float* __restrict__ lse, const uint16_t* __restrict__ qkv, int T,
                       int C, int NH, float scale) {
  __shared__ ForwardTiles tiles;
  const Place at = place();
  const int q0 = last_tile_first() * kTile;
  const int h = at.h, b = at.b, tid = at.tid, warp = at.warp, lane = at.lane, g = at.g, t4 = at.t4;
  const std::size_t stride = 3 * static_cast<std::size_t>(C);

  load_tile(tiles.q, qkv + qkv_index(0, 0, flash::kPartQ, h, T, C), stride, b, q0, T, tid);
  __syncthreads();
  uint32_t qa[4][4];
  load_row_fragments(qa, tiles.q, warp, lane);

  const float scale_log2 = scale * kLog2e;
  const int row[2] = {q0 + 16 * warp + g, q0 + 16 * warp + g + 8};
  float m[2] = {-INFINITY, -INFINITY};  // running row max, log2 units
  float l[2] = {0.0f, 0.0f};            // this lane's part of the running row sum
  float o[8][4] = {};

  const int last_query = min(q0 + kTile, T) - 1;
  for (int k0 = 0; k0 <= last_query; k0 += kTile) {
    load_key_tile(tiles.k, tiles.v, qkv, b, h, k0, T, C, tid);

    float s[8][4] = {};
    multiply_by_rows_transposed<S>(s, qa, tiles.k, lane);
    float tile_max[2] = {-INFINITY, -INFINITY};
    for (int j = 0; j < 8; j++) {
      for (int i = 0; i < 4; i++) {
        const int key = k0 + fragment_column(j, i, t4);
        const int r = i / 2;
        s[j][i] = key <= row[r] && key < T ? s[j][i] * scale_log2 : -INFINITY;
        tile_max[r] = fmaxf(tile_max[r], s[j][i]);
      }
    }
    float m_use[2];
    for (int r = 0; r < 2; r++) {
      const float m_new = fmaxf(m[r], quad_max(tile_max[r]));
      m_use[r] = m_new == -INFINITY ? 0.0f : m_new;  // a row with no key yet: nothing to rescale
      const float correction = exp2f(m[r] - m_use[r]);  // 0 on the first tile (m = -inf)
      m[r] = m_new;
      l[r] *= correction;
      for (int j = 0; j < 8; j++) {
        o[j][2 * r] *= correction;
        o[j][2 * r + 1] *= correction;
      }
    }
    for (int j = 0; j < 8; j++) {
      for (int i = 0; i < 4; i++) {
        s[j][i] = exp2f(s[j][i] - m_use[i / 2]);  // masked: exp2(-inf) = 0
        l[i / 2] += s[j][i];
      }
    }
    multiply_by_rows<S>(o, s, tiles.v, lane);
  }

  for (int r = 0; r < 2; r++) {
    const float sum = quad_sum(l[r]);
    if (row[r] >= T) continue;
    store_accumulator_row<S>(out + row_index(b, row[r], h, T, C), o, r, t4, 1.0f / sum);
    if (t4 == 0) lse[stat_index(b, h, row[r], T, NH)] = m[r] * kLn2 + logf(sum);
  }
}

// The backward kernels' own operands, kept in registers for the whole walk: rows [row0, row0 + 64)
// of two buffers (first + (b T + t) stride, as load_tile) into tiles.first and tiles.second, then
// this warp's A fragments of both.
__device__ __forceinline__ void load_own_fragments(uint32_t (&first)[4][4], uint32_t (&second)[4][4],
                                                   BackwardTiles& tiles, const uint16_t* first_rows,
                                                   std::size_t first_stride, const uint16_t* second_rows,
                                                   std::size_t second_stride, int b, int row0, int T, const Place& at) {
  load_tile(tiles.first, first_rows, first_stride, b, row0, T, at.tid);
  load_tile(tiles.second, second_rows, second_stride, b, row0, T, at.tid);
  __syncthreads();
  load_row_fragments(first, tiles.first, at.warp, at.lane);
  load_row_fragments(second, tiles.second, at.warp, at.lane);
}

template <class S>
__global__ void __launch_bounds__(kThreads)
    mma_dkdv_kernel(uint16_t* __restrict__ dqkv, const uint16_t* __restrict__ qkv, const uint16_t* __restrict__ dout,
                    const float* __restrict__ lse, const float* __restrict__ delta, int T, int C, int NH, float scale) {
  __shared__ BackwardTiles tiles;
  const Place at = place();
  const int k0 = static_cast<int>(blockIdx.x) * kTile;  // key tile 0 walks every query tile: first
  const int h = at.h, b = at.b, tid = at.tid, warp = at.warp, lane = at.lane, g = at.g, t4 = at.t4;
  const std::size_t stride = 3 * static_cast<std::size_t>(C);
  const uint16_t* q_first = qkv + qkv_index(0, 0, flash::kPartQ, h, T, C);
  const uint16_t* do_first = dout + row_index(0, 0, h, T, C);

  uint32_t ka[4][4];
  uint32_t va[4][4];
  load_own_fragments(ka, va, tiles, qkv + qkv_index(0, 0, flash::kPartK, h, T, C), stride,
                     qkv + qkv_index(0, 0, flash::kPartV, h, T, C), stride, b, k0, T, at);

  const float scale_log2 = scale * kLog2e;
  const int key[2] = {k0 + 16 * warp + g, k0 + 16 * warp + g + 8};
  float dk[8][4] = {};
  float dv[8][4] = {};
  for (int q0 = k0; q0 < T; q0 += kTile) {
    __syncthreads();  // every warp is done with the previous query tile
    load_tile(tiles.third, q_first, stride, b, q0, T, tid);
    load_tile(tiles.fourth, do_first, static_cast<std::size_t>(C), b, q0, T, tid);
    for (int i = tid; i < kTile; i += kThreads) {
      const int t = q0 + i;
      tiles.lse[i] = t < T ? lse[stat_index(b, h, t, T, NH)] * kLog2e : 0.0f;
      tiles.delta[i] = t < T ? delta[stat_index(b, h, t, T, NH)] : 0.0f;
    }
    __syncthreads();

    float pt[8][4] = {};   // S^T, then P^T: [this warp's 16 keys][64 queries]
    float dst[8][4] = {};  // dP^T, then dS^T
    multiply_by_rows_transposed<S>(pt, ka, tiles.third, lane);
    multiply_by_rows_transposed<S>(dst, va, tiles.fourth, lane);
    for (int j = 0; j < 8; j++) {
      for (int i = 0; i < 4; i++) {
        const int column = fragment_column(j, i, t4);
        const int t = q0 + column;
        const bool live = t >= key[i / 2] && t < T;  // causal (key <= t), a real query
        const float p = live ? exp2f(pt[j][i] * scale_log2 - tiles.lse[column]) : 0.0f;
        pt[j][i] = p;
        dst[j][i] = p * (dst[j][i] - tiles.delta[column]);
      }
    }
    multiply_by_rows<S>(dv, pt, tiles.fourth, lane);
    multiply_by_rows<S>(dk, dst, tiles.third, lane);
  }

  for (int r = 0; r < 2; r++) {
    if (key[r] >= T) continue;
    store_accumulator_row<S>(dqkv + qkv_index(b, key[r], flash::kPartK, h, T, C), dk, r, t4, scale);
    store_accumulator_row<S>(dqkv + qkv_index(b, key[r], flash::kPartV, h, T, C), dv, r, t4, 1.0f);
  }
}

template <class S>
__global__ void __launch_bounds__(kThreads)
    mma_dq_kernel(uint16_t* __restrict__ dqkv, const uint16_t* __restrict__ qkv, const uint16_t* __restrict__ dout,
                  const float* __restrict__ lse, const float* __restrict__ delta, int T, int C, int NH, float scale) {
  __shared__ BackwardTiles tiles;
  const Place at = place();
  const int q0 = last_tile_first() * kTile;
  const int h = at.h, b = at.b, tid = at.tid, warp = at.warp, lane = at.lane, g = at.g, t4 = at.t4;
  const std::size_t stride = 3 * static_cast<std::size_t>(C);

  uint32_t qa[4][4];
  uint32_t doa[4][4];
  load_own_fragments(qa, doa, tiles, qkv + qkv_index(0, 0, flash::kPartQ, h, T, C), stride,
                     dout + row_index(0, 0, h, T, C), static_cast<std::size_t>(C), b, q0, T, at);

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
  for (int k0 = 0; k0 <= last_query; k0 += kTile) {
    load_key_tile(tiles.third, tiles.fourth, qkv, b, h, k0, T, C, tid);

    float ds[8][4] = {};  // S, then dS
    float dp[8][4] = {};
    multiply_by_rows_transposed<S>(ds, qa, tiles.third, lane);
    multiply_by_rows_transposed<S>(dp, doa, tiles.fourth, lane);
    for (int j = 0; j < 8; j++) {
      for (int i = 0; i < 4; i++) {
        const int k = k0 + fragment_column(j, i, t4);
        const int r = i / 2;
        const float p = k <= row[r] && k < T ? exp2f(ds[j][i] * scale_log2 - row_lse[r]) : 0.0f;
        ds[j][i] = p * (dp[j][i] - row_delta[r]);
      }
    }
    multiply_by_rows<S>(dq, ds, tiles.third, lane);
  }
  for (int r = 0; r < 2; r++) {
    if (row[r] >= T) continue;
    store_accumulator_row<S>(dqkv + qkv_index(b, row[r], flash::kPartQ, h, T, C), dq, r, t4, scale);
  }
}

dim3 tile_grid(int B, int T, int NH) {
  return dim3(static_cast<unsigned>((T + kTile - 1) / kTile), static_cast<unsigned>(NH), static_cast<unsigned>(B));
}

// Calls f(policy) for the 16-bit storage of the operands (the caller checked it is 16-bit).
template <class F>
void with_sixteen_bit_policy(Precision storage, F&& f) {
  if (storage == Precision::kBf16) {
    f(stored::Bf16{});
  } else {
    f(stored::Fp16{});
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
                                 cudaStream_t stream) {
  if (B == 0 || T == 0) return;
  with_sixteen_bit_policy(qkv.storage(), [&](auto policy) {
    using S = decltype(policy);
    mma_forward_kernel<S><<<tile_grid(B, T, NH), kThreads, 0, stream>>>(
        static_cast<uint16_t*>(out.get()), lse, static_cast<const uint16_t*>(qkv.get()), T, C, NH, scale);
  });
  CUDA_CHECK_LAUNCH();
}

void flash_attention_mma_backward(ActPtr dqkv, ConstActPtr dout, ConstActPtr qkv, const float* lse,
                                  const float* delta, int B, int T, int C, int NH, float scale, cudaStream_t stream) {
  if (B == 0 || T == 0) return;
  with_sixteen_bit_policy(qkv.storage(), [&](auto policy) {
    using S = decltype(policy);
    auto* dqkv_s = static_cast<uint16_t*>(dqkv.get());
    const auto* dout_s = static_cast<const uint16_t*>(dout.get());
    const auto* qkv_s = static_cast<const uint16_t*>(qkv.get());
    mma_dkdv_kernel<S><<<tile_grid(B, T, NH), kThreads, 0, stream>>>(dqkv_s, qkv_s, dout_s, lse, delta, T, C, NH,
                                                                       scale);
    CUDA_CHECK_LAUNCH();
    mma_dq_kernel<S><<<tile_grid(B, T, NH), kThreads, 0, stream>>>(dqkv_s, qkv_s, dout_s, lse, delta, T, C, NH,
                                                                     scale);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trident::kernels::cuda
