// Playground: causal flash attention forward on bf16 buffers with the tensor cores (WMMA
// 16x16x16, bf16 operands, fp32 accumulation), head size 64. A candidate for
// kernels/cuda/flash_attention.cu, whose kernels compute in scalar fp32 (one query row per
// thread, 64 threads per block).
//
// One block of 128 threads (4 warps) per (64-query tile, head, batch element); warp w owns the
// tile's query rows [16 w, 16 w + 16). Per key tile of 64 keys at or below the diagonal:
//   1. all threads load the K and V tiles (bf16) into shared memory;
//   2. each warp: S_w = Q_w K^T on the tensor cores, stored as fp32 into the warp's S scratch;
//   3. lanes 0-15 of each warp, one query row each: the online softmax (the scaled, causally
//      masked scores; the running max m and sum l in registers), the probabilities written as
//      bf16 into the warp's P scratch, the warp's fp32 O rows rescaled by exp(m_old - m_new);
//   4. each warp: O_w += P_w V on the tensor cores (O_w kept in shared memory, fp32, because the
//      WMMA accumulator's element layout is unspecified and the rescale needs rows).
// Then out = O / l rounded to bf16, lse = m + log l. P is rounded to bf16 for the product with
// V (as flash-attention implementations do); l sums the unrounded fp32 probabilities, so lse,
// from which backward rebuilds P, is the fp32 one.
//
// Every step is a function of this header, templated on the matrix-product policy (`Products`): the
// kernel calls them between its barriers with WmmaProducts (device), and replay_forward calls
// the same functions in the same order, thread by thread and warp by warp, with HostProducts (plain
// loops over the same shared tiles), so that the index arithmetic, the masks and the softmax are
// checked against the CPU twin on a machine without a GPU (`playground_attention_forward
// replay`). What the replay cannot check: WMMA's own loads and stores (layout, alignment), which
// the GPU run of the variant validates.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cuda/flash_attention_math.h"  // flash::qkv_index, row_index, kPart*, TRIDENT_FLASH_HD
#include "kernels/stored_element.h"             // stored::Bf16

#if defined(__CUDACC__)
#include <cuda_bf16.h>  // __nv_bfloat16
#include <mma.h>        // nvcuda::wmma
#endif

namespace trident::playground::flash_tc {

namespace flash = trident::kernels::cuda::flash;
using Bf16 = trident::kernels::stored::Bf16;

constexpr int kTile = 64;      // queries per block = keys per key tile
constexpr int kHs = 64;        // head size
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = kTile / kWarps;  // query rows per warp: 16, one WMMA fragment high
constexpr int kFrag = 16;              // WMMA's m = n = k
// Row strides of the shared tiles, in elements. WMMA needs a multiple of 8 (16-bit) or 4 (fp32)
// and a 32-byte aligned start for every fragment; 72 and 68 keep both, and pad the rows off the
// 32-bank period.
constexpr int kLdHalf = kHs + 8;    // Q, K, V, P (bf16 bits)
constexpr int kLdFloat = kHs + 4;   // S, O (fp32)

constexpr std::size_t kTileHalfBytes = static_cast<std::size_t>(kTile) * kLdHalf * 2;    // Q, K, V, P
constexpr std::size_t kTileFloatBytes = static_cast<std::size_t>(kTile) * kLdFloat * 4;  // S, O
constexpr std::size_t kSharedBytes = 4 * kTileHalfBytes + 2 * kTileFloatBytes;           // 71,680
static_assert(kTileHalfBytes % 32 == 0 && kTileFloatBytes % 32 == 0, "fragments need 32-byte alignment");

// The block's shared memory, carved from one aligned array. S, P and O hold each warp's 16 rows
// at rows [16 w, 16 w + 16).
struct Tiles {
  uint16_t* q;
  uint16_t* k;
  uint16_t* v;
  uint16_t* p;
  float* s;
  float* o;
};

TRIDENT_FLASH_HD Tiles carve(unsigned char* base) {
  Tiles t;
  t.q = reinterpret_cast<uint16_t*>(base);
  t.k = reinterpret_cast<uint16_t*>(base + kTileHalfBytes);
  t.v = reinterpret_cast<uint16_t*>(base + 2 * kTileHalfBytes);
  t.p = reinterpret_cast<uint16_t*>(base + 3 * kTileHalfBytes);
  t.s = reinterpret_cast<float*>(base + 4 * kTileHalfBytes);
  t.o = reinterpret_cast<float*>(base + 4 * kTileHalfBytes + kTileFloatBytes);
  return t;
}

// The softmax state of one query row (lane r < 16 of a warp).
struct RowState {
  float m;  // running max of the scaled scores
  float l;  // running sum of exp(score - m)
};

// ---- step 1: tile loads (every thread) ----

// Rows [row0, row0 + 64) of a buffer whose row t of batch element b starts at
// first + (b T + t) stride, 64 channels each, into dst (stride kLdHalf): 8 channels (16 bytes)
// per chunk, chunks tid, tid + 128, ...; rows at or past T are zero.
TRIDENT_FLASH_HD void load_rows(uint16_t* dst, const uint16_t* first, std::size_t stride, int b, int row0, int T,
                                int tid) {
  constexpr int kChunksPerRow = kHs / 8;
  for (int id = tid; id < kTile * kChunksPerRow; id += kThreads) {
    const int r = id / kChunksPerRow;
    const int c = (id % kChunksPerRow) * 8;
    uint16_t* to = dst + r * kLdHalf + c;
    const int t = row0 + r;
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

// Head h's `part` (q, k or v) of qkv[B, T, 3C].
TRIDENT_FLASH_HD void load_tile(uint16_t* dst, const uint16_t* qkv, int b, int row0, int part, int h, int T, int C,
                                int tid) {
  load_rows(dst, qkv + flash::qkv_index(0, 0, part, h, T, C), 3 * static_cast<std::size_t>(C), b, row0, T, tid);
}

// ---- step 3: the online softmax of one query row (lanes 0-15 of warp w) ----

TRIDENT_FLASH_HD void init_row(const Tiles& tiles, int w, int r, RowState& state) {
  state.m = -INFINITY;
  state.l = 0.0f;
  float* o = tiles.o + (w * kRows + r) * kLdFloat;
  for (int c = 0; c < kHs; ++c) o[c] = 0.0f;
}

// Query t = q0 + 16 w + r against keys [k0, k0 + 64): keys past t (causal) or past T are out.
// Every visited tile has k0 <= q0 <= t, so key k0 is always in and the max is finite.
TRIDENT_FLASH_HD void softmax_step(const Tiles& tiles, int w, int r, int q0, int k0, int T, float scale,
                                   RowState& state) {
  const int t = q0 + w * kRows + r;
  const float* s = tiles.s + (w * kRows + r) * kLdFloat;
  uint16_t* p = tiles.p + (w * kRows + r) * kLdHalf;
  float* o = tiles.o + (w * kRows + r) * kLdFloat;
  float tile_max = -INFINITY;
  for (int j = 0; j < kTile; ++j) {
    const int key = k0 + j;
    if (key <= t && key < T) tile_max = fmaxf(tile_max, scale * s[j]);
  }
  const float m_new = fmaxf(state.m, tile_max);
  const float alpha = expf(state.m - m_new);  // 0 on the first tile (m = -inf)
  float sum = 0.0f;
  for (int j = 0; j < kTile; ++j) {
    const int key = k0 + j;
    const float prob = key <= t && key < T ? expf(scale * s[j] - m_new) : 0.0f;
    p[j] = Bf16::store(prob);
    sum += prob;
  }
  state.l = state.l * alpha + sum;
  state.m = m_new;
  for (int c = 0; c < kHs; ++c) o[c] *= alpha;
}

// out[b, t, h] = O / l as bf16 and lse[b, h, t] = m + log l, for rows t < T.
TRIDENT_FLASH_HD void finish_row(const Tiles& tiles, int w, int r, const RowState& state, uint16_t* out, float* lse,
                                 int b, int h, int q0, int T, int C, int NH) {
  const int t = q0 + w * kRows + r;
  if (t >= T) return;
  const float* o = tiles.o + (w * kRows + r) * kLdFloat;
  uint16_t* row = out + flash::row_index(b, t, h, T, C);
  const float inv_l = 1.0f / state.l;
  for (int c = 0; c < kHs; ++c) row[c] = Bf16::store(o[c] * inv_l);
  lse[(static_cast<std::size_t>(b) * NH + h) * T + t] = state.m + logf(state.l);
}

// ---- steps 2 and 4: the warps' matrix products (forward and backward) ----
//
// On 16-row slices of the shared tiles: a (16 x 64, row-major, stride kLdHalf) times b (64 rows
// of 64, stride kLdHalf), into fp32 (stride kLdFloat) or into an accumulator that stays with
// the warp. a_bt: dst = a b^T (b's rows are the columns: S = Q K^T, dP = dO V^T, ...);
// add_ab: acc += a b (O += P V, dV += P^T dO, ...).

// Host twin of WmmaProducts: the same products on the same tiles in plain loops, fp32
// accumulation in index order (the tensor cores' order differs, by rounding only). Host and
// device qualified only so that the host-and-device step functions instantiate cleanly with it.
struct HostProducts {
  struct Accumulator {
    float v[kRows * kHs];
  };
  // dst[16 x 64] (fp32, stride kLdFloat) = A[16 x 64] B^T, B's 64 rows of 64 stored row-major.
  TRIDENT_FLASH_HD static void a_bt(float* dst, const uint16_t* a, const uint16_t* b) {
    for (int i = 0; i < kRows; ++i) {
      for (int j = 0; j < kTile; ++j) {
        float acc = 0.0f;
        for (int d = 0; d < kHs; ++d) acc += Bf16::load(a[i * kLdHalf + d]) * Bf16::load(b[j * kLdHalf + d]);
        dst[i * kLdFloat + j] = acc;
      }
    }
  }
  TRIDENT_FLASH_HD static void zero(Accumulator& acc) {
    for (float& x : acc.v) x = 0.0f;
  }
  // acc = src[16 x 64] (fp32, stride kLdFloat).
  TRIDENT_FLASH_HD static void load(Accumulator& acc, const float* src) {
    for (int i = 0; i < kRows; ++i) {
      for (int c = 0; c < kHs; ++c) acc.v[i * kHs + c] = src[i * kLdFloat + c];
    }
  }
  // acc[16 x 64] += A[16 x 64] B, B [64 x 64] row-major.
  TRIDENT_FLASH_HD static void add_ab(Accumulator& acc, const uint16_t* a, const uint16_t* b) {
    for (int i = 0; i < kRows; ++i) {
      for (int c = 0; c < kHs; ++c) {
        float sum = acc.v[i * kHs + c];
        for (int j = 0; j < kTile; ++j) sum += Bf16::load(a[i * kLdHalf + j]) * Bf16::load(b[j * kLdHalf + c]);
        acc.v[i * kHs + c] = sum;
      }
    }
  }
  TRIDENT_FLASH_HD static void store(float* dst, const Accumulator& acc) {
    for (int i = 0; i < kRows; ++i) {
      for (int c = 0; c < kHs; ++c) dst[i * kLdFloat + c] = acc.v[i * kHs + c];
    }
  }
};

#if defined(__CUDACC__)
struct WmmaProducts {
  using Frag = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, kFrag, kFrag, kFrag, float>;
  struct Accumulator {
    Frag f[kHs / kFrag];
  };
  __device__ static const __nv_bfloat16* bf16(const uint16_t* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }

  // b's rows stored row-major are b^T's columns, so b^T is read column-major.
  __device__ static void a_bt(float* dst, const uint16_t* a, const uint16_t* b) {
    namespace wmma = nvcuda::wmma;
    wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::row_major> fa[kHs / kFrag];
    for (int kk = 0; kk < kHs / kFrag; ++kk) wmma::load_matrix_sync(fa[kk], bf16(a) + kk * kFrag, kLdHalf);
    for (int n = 0; n < kTile / kFrag; ++n) {
      Frag acc;
      wmma::fill_fragment(acc, 0.0f);
      for (int kk = 0; kk < kHs / kFrag; ++kk) {
        wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::col_major> fb;
        wmma::load_matrix_sync(fb, bf16(b) + n * kFrag * kLdHalf + kk * kFrag, kLdHalf);
        wmma::mma_sync(acc, fa[kk], fb, acc);
      }
      wmma::store_matrix_sync(dst + n * kFrag, acc, kLdFloat, wmma::mem_row_major);
    }
  }
  __device__ static void zero(Accumulator& acc) {
    for (Frag& f : acc.f) nvcuda::wmma::fill_fragment(f, 0.0f);
  }
  __device__ static void load(Accumulator& acc, const float* src) {
    for (int n = 0; n < kHs / kFrag; ++n) {
      nvcuda::wmma::load_matrix_sync(acc.f[n], src + n * kFrag, kLdFloat, nvcuda::wmma::mem_row_major);
    }
  }
  __device__ static void add_ab(Accumulator& acc, const uint16_t* a, const uint16_t* b) {
    namespace wmma = nvcuda::wmma;
    wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::row_major> fa[kTile / kFrag];
    for (int kk = 0; kk < kTile / kFrag; ++kk) wmma::load_matrix_sync(fa[kk], bf16(a) + kk * kFrag, kLdHalf);
    for (int n = 0; n < kHs / kFrag; ++n) {
      for (int kk = 0; kk < kTile / kFrag; ++kk) {
        wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::row_major> fb;
        wmma::load_matrix_sync(fb, bf16(b) + kk * kFrag * kLdHalf + n * kFrag, kLdHalf);
        wmma::mma_sync(acc.f[n], fa[kk], fb, acc.f[n]);
      }
    }
  }
  __device__ static void store(float* dst, const Accumulator& acc) {
    for (int n = 0; n < kHs / kFrag; ++n) {
      nvcuda::wmma::store_matrix_sync(dst + n * kFrag, acc.f[n], kLdFloat, nvcuda::wmma::mem_row_major);
    }
  }
};
#endif

// The forward's two products for warp w: S_w = Q_w K^T into its S scratch, O_w += P_w V (O in
// shared memory, fp32: the softmax rescales it by rows between the products).
template <class Products>
TRIDENT_FLASH_HD void forward_scores(const Tiles& tiles, int w) {
  Products::a_bt(tiles.s + w * kRows * kLdFloat, tiles.q + w * kRows * kLdHalf, tiles.k);
}

template <class Products>
TRIDENT_FLASH_HD void forward_accumulate_pv(const Tiles& tiles, int w) {
  typename Products::Accumulator acc;
  float* o = tiles.o + w * kRows * kLdFloat;
  Products::load(acc, o);
  Products::add_ab(acc, tiles.p + w * kRows * kLdHalf, tiles.v);
  Products::store(o, acc);
}

#if defined(__CUDACC__)
// grid (ceil(T / 64), NH, B), 128 threads, kSharedBytes of dynamic shared memory (opted in).
// Query tiles are taken last first: the causal work grows with the tile index, so the longest
// blocks start first and the short ones fill the tail.
__global__ void __launch_bounds__(kThreads) forward_kernel(uint16_t* out, float* lse, const uint16_t* qkv, int T, int C,
                                                           int NH, float scale) {
  extern __shared__ __align__(128) unsigned char shared[];
  const Tiles tiles = carve(shared);
  const int q0 = (static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x)) * kTile;
  const int h = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int tid = static_cast<int>(threadIdx.x);
  const int w = tid / 32;
  const int lane = tid % 32;
  load_tile(tiles.q, qkv, b, q0, flash::kPartQ, h, T, C, tid);
  RowState state{};
  if (lane < kRows) init_row(tiles, w, lane, state);
  for (int k0 = 0; k0 <= q0; k0 += kTile) {
    __syncthreads();  // the previous tile's K and V are no longer read (and Q is visible after the next)
    load_tile(tiles.k, qkv, b, k0, flash::kPartK, h, T, C, tid);
    load_tile(tiles.v, qkv, b, k0, flash::kPartV, h, T, C, tid);
    __syncthreads();
    forward_scores<WmmaProducts>(tiles, w);
    __syncwarp();
    if (lane < kRows) softmax_step(tiles, w, lane, q0, k0, T, scale, state);
    __syncwarp();
    forward_accumulate_pv<WmmaProducts>(tiles, w);
    __syncwarp();
  }
  if (lane < kRows) finish_row(tiles, w, lane, state, out, lse, b, h, q0, T, C, NH);
}

// out[B,T,C] (bf16 bits) and lse[B,NH,T] from qkv[B,T,3C] (bf16 bits), C = 64 NH; qkv 16-byte
// aligned. Returns the first error of the shared-memory opt-in and the launch.
inline cudaError_t forward(uint16_t* out, float* lse, const uint16_t* qkv, int B, int T, int C, int NH, float scale,
                           cudaStream_t stream) {
  if (B == 0 || T == 0) return cudaSuccess;
  const cudaError_t opt_in =
      cudaFuncSetAttribute(forward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSharedBytes));
  if (opt_in != cudaSuccess) return opt_in;
  const dim3 grid(static_cast<unsigned>((T + kTile - 1) / kTile), static_cast<unsigned>(NH), static_cast<unsigned>(B));
  forward_kernel<<<grid, kThreads, kSharedBytes, stream>>>(out, lse, qkv, T, C, NH, scale);
  return cudaGetLastError();
}
#endif

// The kernel's steps in its order on the host, block by block, thread by thread and warp by
// warp, with HostProducts: out (bf16 bits) and lse as the device would write them, up to the order of
// the products' sums.
inline void replay_forward(uint16_t* out, float* lse, const uint16_t* qkv, int B, int T, int C, int NH, float scale) {
  std::vector<unsigned char> shared(kSharedBytes + 128);
  unsigned char* base = shared.data() + (128 - reinterpret_cast<std::uintptr_t>(shared.data()) % 128) % 128;
  const Tiles tiles = carve(base);
  const int q_tiles = (T + kTile - 1) / kTile;
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int qt = 0; qt < q_tiles; ++qt) {
        const int q0 = qt * kTile;
        for (int tid = 0; tid < kThreads; ++tid) load_tile(tiles.q, qkv, b, q0, flash::kPartQ, h, T, C, tid);
        RowState state[kWarps][kRows];
        for (int w = 0; w < kWarps; ++w) {
          for (int r = 0; r < kRows; ++r) init_row(tiles, w, r, state[w][r]);
        }
        for (int k0 = 0; k0 <= q0; k0 += kTile) {
          for (int tid = 0; tid < kThreads; ++tid) {
            load_tile(tiles.k, qkv, b, k0, flash::kPartK, h, T, C, tid);
            load_tile(tiles.v, qkv, b, k0, flash::kPartV, h, T, C, tid);
          }
          for (int w = 0; w < kWarps; ++w) {
            forward_scores<HostProducts>(tiles, w);
            for (int r = 0; r < kRows; ++r) softmax_step(tiles, w, r, q0, k0, T, scale, state[w][r]);
            forward_accumulate_pv<HostProducts>(tiles, w);
          }
        }
        for (int w = 0; w < kWarps; ++w) {
          for (int r = 0; r < kRows; ++r) finish_row(tiles, w, r, state[w][r], out, lse, b, h, q0, T, C, NH);
        }
      }
    }
  }
}

}  // namespace trident::playground::flash_tc
