// Flash attention, the per-thread math: what one thread of each kernel of
// kernels/cuda/flash_attention.cu does between two __syncthreads, with the index arithmetic.
// Plain C++ that nvcc compiles for the device and any C++ compiler for the host, so that a host
// program can replay the kernels' loops with these very functions
// (tests/unit/kernels/flash_attention_replay_test.cpp checks them against the CPU twin on every
// build, GPU or not).
//
// Layout (the Backend contract, kernels/backend.h): qkv[B,T,3C] with q in channels [0,C), k in
// [C,2C), v in [2C,3C), head h owning channels [h*hs, (h+1)*hs), hs = kHeadSize = 64;
// out, dout [B,T,C]; the row statistics L (log-sum-exp) and D (rowsum(dO * O)) [B,NH,T].
//
// Storage: the functions that touch qkv, out, dout and dqkv are templated on their storage policy
// S (kernels/stored_element.h): fp32, or bf16/fp16 buffers read as they are into the fp32 tiles
// and registers, each stored value rounded once (out and dqkv, the latter overwritten, never read).
// Everything in between is fp32, as are L and D. Callers name S: fn<S>(...).
#pragma once

#include <cmath>    // expf, logf, fmaxf, INFINITY (the C functions, as CUDA names them)
#include <cstddef>

#include "kernels/cuda/shared_slices.h"  // SharedSlices, shared_slice_bytes
#include "kernels/stored_element.h"       // stored::Fp32, Bf16, Fp16

#if defined(__CUDACC__)
#define TRIDENT_FLASH_HD __host__ __device__ __forceinline__
#else
#define TRIDENT_FLASH_HD inline
#endif
// `#pragma unroll` (and `unroll 4`) for the device pass only: the host compiler warns on it
// (-Wunknown-pragmas).
#ifdef __CUDA_ARCH__
#define TRIDENT_FLASH_UNROLL _Pragma("unroll")
#define TRIDENT_FLASH_UNROLL_4 _Pragma("unroll 4")
#else
#define TRIDENT_FLASH_UNROLL
#define TRIDENT_FLASH_UNROLL_4
#endif

namespace trident::kernels::cuda::flash {

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
TRIDENT_FLASH_HD std::size_t qkv_index(int b, int t, int part, int h, int T, int C) {
  return (static_cast<std::size_t>(b) * T + t) * (3 * static_cast<std::size_t>(C)) +
         static_cast<std::size_t>(part) * C + static_cast<std::size_t>(h) * kHeadSize;
}

// out[b, t, h*hs + c] for c = 0 (out, dout: [B, T, C]).
TRIDENT_FLASH_HD std::size_t row_index(int b, int t, int h, int T, int C) {
  return (static_cast<std::size_t>(b) * T + t) * C + static_cast<std::size_t>(h) * kHeadSize;
}

// L[b, h, t] and D[b, h, t]: [B, NH, T], one float per (batch, head, query row).
TRIDENT_FLASH_HD std::size_t stat_index(int b, int h, int t, int T, int NH) {
  return (static_cast<std::size_t>(b) * NH + h) * T + t;
}

// ---- tile loads: element i of a 64-row x 64-channel tile (row r = i / 64, channel c = i % 64);
// the block's threads take i = threadIdx.x, + kTile, ... so consecutive threads read consecutive
// channels of one row (coalesced). Rows past T are zeros (they are never used: masked).

// tile[r*stride + c] = head h's `part` of token t0 + r, channel c.
template <class S>
TRIDENT_FLASH_HD void load_qkv_tile_element(float* tile, int stride, const typename S::Element* qkv, int b, int t0,
                                            int part, int h, int T, int C, int i) {
  const int r = i / kHeadSize;
  const int c = i % kHeadSize;
  const int t = t0 + r;
  tile[r * stride + c] = t < T ? S::load(qkv[qkv_index(b, t, part, h, T, C) + c]) : 0.0f;
}

// tile[r*stride + c] = x[b, t0 + r, h*hs + c] for x in [B, T, C] (dout).
template <class S>
TRIDENT_FLASH_HD void load_row_tile_element(float* tile, int stride, const typename S::Element* x, int b, int t0,
                                            int h, int T, int C, int i) {
  const int r = i / kHeadSize;
  const int c = i % kHeadSize;
  const int t = t0 + r;
  tile[r * stride + c] = t < T ? S::load(x[row_index(b, t, h, T, C) + c]) : 0.0f;
}

// Thread `tid`'s share of the K and V tiles of keys k0 .. k0+63 (elements tid, tid + kTile, ...:
// the block's kTile threads together load both tiles), rows `stride` floats apart.
template <class S>
TRIDENT_FLASH_HD void load_kv_tiles(float* k_tile, float* v_tile, int stride, const typename S::Element* qkv, int b,
                                    int k0, int h, int T, int C, int tid) {
  for (int i = tid; i < kTile * kHeadSize; i += kTile) {
    load_qkv_tile_element<S>(k_tile, stride, qkv, b, k0, kPartK, h, T, C, i);
    load_qkv_tile_element<S>(v_tile, stride, qkv, b, k0, kPartV, h, T, C, i);
  }
}

// row[c] = src[c], c < 64, as fp32: a thread's own q or dO row into its registers.
template <class S>
TRIDENT_FLASH_HD void load_row(float* row, const typename S::Element* src) {
TRIDENT_FLASH_UNROLL
  for (int c = 0; c < kHeadSize; c++) row[c] = S::load(src[c]);
}

// tile[r] = stat[b, h, t0 + r] (L or D), r = 0..kTile-1; 0 past T.
TRIDENT_FLASH_HD void load_stat_element(float* tile, const float* stat, int b, int h, int t0, int T, int NH,
                                        int r) {
  const int t = t0 + r;
  tile[r] = t < T ? stat[stat_index(b, h, t, T, NH)] : 0.0f;
}

// dst[c] = factor * acc[c], c < 64: the one write of each dqkv element (attention_backward
// overwrites dqkv, so the old values are never read).
template <class S>
TRIDENT_FLASH_HD void store_row(typename S::Element* dst, const float* acc, float factor) {
TRIDENT_FLASH_UNROLL
  for (int c = 0; c < kHeadSize; c++) dst[c] = S::store(factor * acc[c]);
}

// ---- the forward, which also keeps L ----
//
// One block per (64-query tile, head, batch element),
// one thread per query t, K/V tiles through shared memory, online softmax with running max m,
// running sum l = sum exp(s - m) and running o = sum exp(s - m) v. At the end out = o / l and
// L = m + log(l) = log sum_t2 exp(s_t2): the log-sum-exp of the row, all that the backward
// needs to rebuild P[t,t2] = exp(s_t2 - L).

// One key tile [k0, k0+64) for query t: updates m, l, o. k_tile, v_tile: [64][kHeadSize].
// Keys k0 + j > t are masked (the tile above the diagonal is never visited, and k0 <= t, so
// the tile has a finite max).
// The key loops unroll 4 keys at a time, not all 64: s then lives in local memory (256 bytes a
// thread, in L1), and four dot products are in flight at once. Unrolled whole (64 x 64 FMAs
// twice, in each of three storages) the file took nvcc 73 s to compile (sm_90), 6 s so; the
// arithmetic and its order are the same either way, so are the bits. 16-bit buffers take the
// tensor-core forward (flash_attention_mma.cu): this one is fp32 flash's.
TRIDENT_FLASH_HD void forward_tile_update(const float* q, const float* k_tile, const float* v_tile, int k0,
                                          int t, float scale, float& m, float& l, float* o) {
  float s[kTile];
  float tile_max = -INFINITY;
TRIDENT_FLASH_UNROLL_4
  for (int j = 0; j < kTile; j++) {
    float dot = 0.0f;
TRIDENT_FLASH_UNROLL
    for (int c = 0; c < kHeadSize; c++) dot += q[c] * k_tile[j * kHeadSize + c];
    s[j] = k0 + j <= t ? scale * dot : -INFINITY;
    tile_max = fmaxf(tile_max, s[j]);
  }
  const float m_new = fmaxf(m, tile_max);
  const float correction = expf(m - m_new);  // 0 on the first tile (m = -inf)
  l *= correction;
TRIDENT_FLASH_UNROLL
  for (int c = 0; c < kHeadSize; c++) o[c] *= correction;
TRIDENT_FLASH_UNROLL_4
  for (int j = 0; j < kTile; j++) {
    const float p = expf(s[j] - m_new);  // 0 for masked keys
    l += p;
TRIDENT_FLASH_UNROLL
    for (int c = 0; c < kHeadSize; c++) o[c] += p * v_tile[j * kHeadSize + c];
  }
  m = m_new;
}

// out row t = o / l; L[b,h,t] = m + log(l) (l >= 1: the max term is exp(0)).
template <class S>
TRIDENT_FLASH_HD void forward_finish(typename S::Element* out, float* lse, const float* o, float m, float l, int b,
                                     int t, int h, int T, int C, int NH) {
  const float inv_l = 1.0f / l;
  typename S::Element* y = out + row_index(b, t, h, T, C);
TRIDENT_FLASH_UNROLL
  for (int c = 0; c < kHeadSize; c++) y[c] = S::store(o[c] * inv_l);
  lse[stat_index(b, h, t, T, NH)] = m + logf(l);
}

// ---- (a) D = rowsum(dO * O) per (batch, head, query) ----

// D[b,h,t] = sum_c dout[b,t,h*hs+c] * out[b,t,h*hs+c]. In real arithmetic this equals
// sum_t2 P[t,t2] dP[t,t2] (dP[t,t2] = dout[t] . v[t2], out[t] = sum_t2 P[t,t2] v[t2]).
// (With 16-bit storage, out is the stored, rounded output: the one backward's dO is taken against.)
template <class S>
TRIDENT_FLASH_HD float row_delta(const typename S::Element* dout, const typename S::Element* out, int b, int t, int h,
                                 int T, int C) {
  const std::size_t at = row_index(b, t, h, T, C);
  float sum = 0.0f;
TRIDENT_FLASH_UNROLL
  for (int c = 0; c < kHeadSize; c++) sum += S::load(dout[at + c]) * S::load(out[at + c]);
  return sum;
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

TRIDENT_FLASH_HD void dkdv_tile_update(const float* k_row, const float* v_row, const float* q_tile,
                                       const float* do_tile, const float* lse_tile, const float* delta_tile,
                                       int q0, int key, int T, float scale, float* dk, float* dv) {
  for (int i = 0; i < kTile; i++) {
    const int t = q0 + i;
    if (t < key || t >= T) continue;  // causal (key <= t), real query (t < T)
    const float* q_t = q_tile + i * kHeadSize;
    const float* do_t = do_tile + i * kHeadSize;
    float qk = 0.0f;
    float dp = 0.0f;
TRIDENT_FLASH_UNROLL
    for (int c = 0; c < kHeadSize; c++) {
      qk += q_t[c] * k_row[c];
      dp += do_t[c] * v_row[c];
    }
    const float p = expf(scale * qk - lse_tile[i]);
    const float ds = p * (dp - delta_tile[i]);
TRIDENT_FLASH_UNROLL
    for (int c = 0; c < kHeadSize; c++) {
      dv[c] += p * do_t[c];
      dk[c] += ds * q_t[c];
    }
  }
}

// The dK/dV kernel's dynamic shared memory: own k and v (padded), Q and dO tiles, L and D tiles,
// carved in this order (shared_slices.h). On a GPU 16,640 floats = 66,560 bytes: above the
// 48 KiB of static shared memory, hence dynamic, with the opt-in attribute set by the launcher.
struct DkdvTiles {
  float* k_own;       // [kTile][kPadded]
  float* v_own;       // [kTile][kPadded]
  float* q_tile;      // [kTile][kHeadSize]
  float* do_tile;     // [kTile][kHeadSize]
  float* lse_tile;    // [kTile]
  float* delta_tile;  // [kTile]
};

TRIDENT_FLASH_HD DkdvTiles carve_dkdv_tiles(float* shared) {
  SharedSlices slices(shared);
  DkdvTiles tiles{};
  tiles.k_own = slices.take(kTile * kPadded);
  tiles.v_own = slices.take(kTile * kPadded);
  tiles.q_tile = slices.take(kTile * kHeadSize);
  tiles.do_tile = slices.take(kTile * kHeadSize);
  tiles.lse_tile = slices.take(kTile);
  tiles.delta_tile = slices.take(kTile);
  return tiles;
}

constexpr std::size_t kDkdvSharedBytes = 2 * shared_slice_bytes(kTile * kPadded) +
                                         2 * shared_slice_bytes(kTile * kHeadSize) + 2 * shared_slice_bytes(kTile);
static_assert(kDkdvSharedBytes % sizeof(float) == 0, "the dK/dV shared memory is whole floats");
static_assert(kSharedSliceGuardBytes > 0 || kDkdvSharedBytes == 66560, "unguarded, the slices are packed");

// ---- (c) dQ: one block per (64-query tile, head, batch element), one thread per query ----
//
// Thread i of the block for query tile q0 owns query t = q0 + i (inactive when t >= T); its q,
// dO (registers), L_t, D_t and accumulator dQ (registers). The block walks the key tiles
// k0 = 0, 64, ... up to its last query (tiles wholly above the diagonal are skipped), staging
// K and V ([64][64], broadcast reads). Per key t2 = k0 + j <= t: s, p, dp, ds as in (b), then
// dQ += ds * k_t2; at the end dq += scale * dQ.

TRIDENT_FLASH_HD void dq_tile_update(const float* q, const float* do_t, float lse_t, float delta_t,
                                     const float* k_tile, const float* v_tile, int k0, int t, float scale,
                                     float* dq) {
  for (int j = 0; j < kTile; j++) {
    if (k0 + j > t) break;  // causal; keys past t (and past T, since t < T) never count
    const float* k_j = k_tile + j * kHeadSize;
    const float* v_j = v_tile + j * kHeadSize;
    float qk = 0.0f;
    float dp = 0.0f;
TRIDENT_FLASH_UNROLL
    for (int c = 0; c < kHeadSize; c++) {
      qk += q[c] * k_j[c];
      dp += do_t[c] * v_j[c];
    }
    const float p = expf(scale * qk - lse_t);
    const float ds = p * (dp - delta_t);
TRIDENT_FLASH_UNROLL
    for (int c = 0; c < kHeadSize; c++) dq[c] += ds * k_j[c];
  }
}
}  // namespace trident::kernels::cuda::flash
