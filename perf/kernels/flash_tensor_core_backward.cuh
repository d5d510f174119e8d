// Playground: causal flash attention BACKWARD on bf16 buffers with the tensor cores (WMMA
// 16x16x16, bf16 operands, fp32 accumulation), head size 64: the backward of
// flash_tensor_core.cuh's forward, under the Backend contract (dqkv = ..., overwritten, from
// dout, qkv, the forward's out and its fp32 lse). Three kernels, as the production flash backward:
//   delta  D[b,h,t] = dout[t] . out[t] over the head's 64 channels, one thread per row;
//   dK/dV  a block of 4 warps per (64-key tile, head, batch element), warp w owning keys
//          [16 w, 16 w + 16) of the tile; per query tile at or after the key tile:
//            S^T = K_w Q^T (tensor cores, fp32 into shared), P^T = exp(scale S^T - L) masked
//            (lanes 0-15, one key each; fp32 kept, a bf16 copy for the product),
//            dV_w += P^T dO, dP^T = V_w dO^T (tensor cores),
//            dS^T = scale P^T (dP^T - D) (lanes; rounded to bf16), dK_w += dS^T Q;
//          dK_w and dV_w stay in WMMA accumulators over the loop and are written into dqkv's k
//          and v channels at the end (rounded once, the old values never read);
//   dQ     a block per (64-query tile, head, batch element), warp w owning 16 queries; per key
//          tile up to the diagonal: S = Q_w K^T, P, dP = dO_w V^T, dS, dQ_w += dS K; written
//          into the q channels at the end.
// Each dqkv element is written by one thread of one block (dK/dV the k and v channels, dQ the
// q channels): no atomics, the same bits on every run.
//
// As in the forward, every step is a function of this header templated on the product policy;
// replay_backward runs the kernels' steps in their order on the host with HostProducts, so that
// `playground_attention_backward replay` checks the index arithmetic, masks and the softmax
// backward against the CPU twin without a GPU.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "perf/kernels/flash_tensor_core.cuh"  // tile shapes, load_tile, Bf16, flash::

namespace trident::playground::flash_tc {

// The backward kernels' shared memory: four bf16 tiles (the block's own rows of two parts and
// the streamed tile of two parts), per warp an fp32 score/probability scratch, an fp32 dP
// scratch, bf16 copies of P and dS, and the 64 L and D values of the query rows in play.
struct BackwardTiles {
  uint16_t* own_a;     // dK/dV: the block's K rows; dQ: its Q rows
  uint16_t* own_b;     // dK/dV: its V rows;        dQ: its dO rows
  uint16_t* stream_a;  // dK/dV: the query tile's Q; dQ: the key tile's K
  uint16_t* stream_b;  // dK/dV: the query tile's dO; dQ: the key tile's V
  uint16_t* p;         // bf16 P (dK/dV: P^T) per warp
  uint16_t* ds;        // bf16 scale * dS per warp
  float* s;            // fp32 S, then P, per warp; at the end the accumulators on their way out
  float* dp;           // fp32 dP per warp
  float* lse;          // the 64 query rows' L (dK/dV: the streamed tile's; dQ: the block's own)
  float* delta;        // and their D
};

constexpr std::size_t kBackwardSharedBytes = 6 * kTileHalfBytes + 2 * kTileFloatBytes + 2 * kTile * sizeof(float);

TRIDENT_FLASH_HD BackwardTiles carve_backward(unsigned char* base) {
  BackwardTiles t;
  t.own_a = reinterpret_cast<uint16_t*>(base);
  t.own_b = reinterpret_cast<uint16_t*>(base + kTileHalfBytes);
  t.stream_a = reinterpret_cast<uint16_t*>(base + 2 * kTileHalfBytes);
  t.stream_b = reinterpret_cast<uint16_t*>(base + 3 * kTileHalfBytes);
  t.p = reinterpret_cast<uint16_t*>(base + 4 * kTileHalfBytes);
  t.ds = reinterpret_cast<uint16_t*>(base + 5 * kTileHalfBytes);
  t.s = reinterpret_cast<float*>(base + 6 * kTileHalfBytes);
  t.dp = reinterpret_cast<float*>(base + 6 * kTileHalfBytes + kTileFloatBytes);
  t.lse = reinterpret_cast<float*>(base + 6 * kTileHalfBytes + 2 * kTileFloatBytes);
  t.delta = t.lse + kTile;
  return t;
}

// Head h's channels of an [B, T, C] buffer (out, dout).
TRIDENT_FLASH_HD void load_row_tile(uint16_t* dst, const uint16_t* rows, int b, int row0, int h, int T, int C,
                                    int tid) {
  load_rows(dst, rows + flash::row_index(0, 0, h, T, C), static_cast<std::size_t>(C), b, row0, T, tid);
}

// L and D of query rows [q0, q0 + 64) (0 past T: such rows are masked out).
TRIDENT_FLASH_HD void load_row_stats(const BackwardTiles& tiles, const float* lse, const float* delta, int b, int h,
                                     int q0, int T, int NH, int tid) {
  for (int j = tid; j < kTile; j += kThreads) {
    const int t = q0 + j;
    const std::size_t at = (static_cast<std::size_t>(b) * NH + h) * T + t;
    tiles.lse[j] = t < T ? lse[at] : 0.0f;
    tiles.delta[j] = t < T ? delta[at] : 0.0f;
  }
}

// D[b,h,t] = dout[t] . out[t] over head h's channels (the delta kernel's thread for row `row`
// of the B * NH * T rows in [b, h, t] order).
TRIDENT_FLASH_HD void delta_row(float* delta, const uint16_t* dout, const uint16_t* out, std::size_t row, int T, int C,
                                int NH) {
  const int t = static_cast<int>(row % T);
  const int h = static_cast<int>((row / T) % NH);
  const int b = static_cast<int>(row / (static_cast<std::size_t>(T) * NH));
  const std::size_t at = flash::row_index(b, t, h, T, C);
  float sum = 0.0f;
  for (int c = 0; c < kHs; ++c) sum += Bf16::load(dout[at + c]) * Bf16::load(out[at + c]);
  delta[row] = sum;
}

// ---- the lanes' steps: one row of the warp's 16 (lane r) ----

// dK/dV: key = k0 + 16 w + r against queries [q0, q0 + 64): P^T = exp(scale S^T - L), kept in
// s (fp32) and p (bf16); queries before the key (causal) or past T, and keys past T, give 0.
TRIDENT_FLASH_HD void probabilities_of_key(const BackwardTiles& tiles, int w, int r, int k0, int q0, int T,
                                           float scale) {
  const int key = k0 + w * kRows + r;
  float* s = tiles.s + (w * kRows + r) * kLdFloat;
  uint16_t* p = tiles.p + (w * kRows + r) * kLdHalf;
  for (int j = 0; j < kTile; ++j) {
    const int t = q0 + j;
    const float prob = t >= key && t < T && key < T ? expf(scale * s[j] - tiles.lse[j]) : 0.0f;
    s[j] = prob;
    p[j] = Bf16::store(prob);
  }
}

// dQ: query t = q0 + 16 w + r against keys [k0, k0 + 64).
TRIDENT_FLASH_HD void probabilities_of_query(const BackwardTiles& tiles, int w, int r, int q0, int k0, int T,
                                             float scale) {
  const int t = q0 + w * kRows + r;
  float* s = tiles.s + (w * kRows + r) * kLdFloat;
  uint16_t* p = tiles.p + (w * kRows + r) * kLdHalf;
  const float lse = tiles.lse[w * kRows + r];
  for (int j = 0; j < kTile; ++j) {
    const int key = k0 + j;
    const float prob = key <= t && key < T && t < T ? expf(scale * s[j] - lse) : 0.0f;
    s[j] = prob;
    p[j] = Bf16::store(prob);
  }
}

// dS = scale P (dP - D) as bf16, for the row's 64 pairs. D of pair j: per query, so the
// streamed tile's D[j] in dK/dV (the row is a key) and the row's own D in dQ (the row is a query).
TRIDENT_FLASH_HD void score_gradients(const BackwardTiles& tiles, int w, int r, bool row_is_key, float scale) {
  const float* prob = tiles.s + (w * kRows + r) * kLdFloat;
  const float* dp = tiles.dp + (w * kRows + r) * kLdFloat;
  uint16_t* ds = tiles.ds + (w * kRows + r) * kLdHalf;
  const float own_delta = tiles.delta[w * kRows + r];
  for (int j = 0; j < kTile; ++j) {
    const float d = row_is_key ? tiles.delta[j] : own_delta;
    ds[j] = Bf16::store(scale * prob[j] * (dp[j] - d));
  }
}

// dqkv[b, t, part, h, :] = the warp's accumulated row r (in s after store_accumulator), t < T.
TRIDENT_FLASH_HD void write_row_into(uint16_t* dqkv, const BackwardTiles& tiles, int w, int r, int b, int row0, int part,
                                   int h, int T, int C) {
  const int t = row0 + w * kRows + r;
  if (t >= T) return;
  const float* acc = tiles.s + (w * kRows + r) * kLdFloat;
  uint16_t* to = dqkv + flash::qkv_index(b, t, part, h, T, C);
  for (int c = 0; c < kHs; ++c) to[c] = Bf16::store(acc[c]);
}

// ---- the kernels' bodies, for one block, written once for the device and the replay ----
//
// `Block` supplies the block's structure: for_threads(f) runs f(tid) for every thread,
// for_warps(f) f(w) for every warp, for_rows(f) f(w, r) for lanes 0-15 of every warp, and
// barrier() / warp_barrier(). On the device each thread runs its own part and the barriers are
// __syncthreads / __syncwarp; the host runs the loops in sequence.

// Accumulators are reached through `dk(w)`, `dv(w)`, `dq(w)`: on the device the thread's own
// (a fixed variable, so the fragments stay in registers), on the host warp w's.
template <class A>
struct OwnAccumulator {  // the device: every w gives this thread's accumulator
  A* acc;
  TRIDENT_FLASH_HD A& operator()(int) const { return *acc; }
};
template <class A>
struct WarpAccumulators {  // the host: warp w's of an array of kWarps
  A* acc;
  TRIDENT_FLASH_HD A& operator()(int w) const { return acc[w]; }
};

// The k-tile's dK and dV: block (k0, h, b).
template <class Products, class Block, class Acc>
TRIDENT_FLASH_HD void dkdv_block(Block& block, const BackwardTiles& tiles, uint16_t* dqkv, const uint16_t* qkv,
                                 const uint16_t* dout, const float* lse, const float* delta, int b, int h, int k0, int T,
                                 int C, int NH, float scale, Acc dk, Acc dv) {
  block.for_threads([&](int tid) {
    load_tile(tiles.own_a, qkv, b, k0, flash::kPartK, h, T, C, tid);
    load_tile(tiles.own_b, qkv, b, k0, flash::kPartV, h, T, C, tid);
  });
  block.for_warps([&](int w) {
    Products::zero(dk(w));
    Products::zero(dv(w));
  });
  for (int q0 = k0; q0 < T; q0 += kTile) {
    block.barrier();  // the previous query tile is no longer read
    block.for_threads([&](int tid) {
      load_tile(tiles.stream_a, qkv, b, q0, flash::kPartQ, h, T, C, tid);
      load_row_tile(tiles.stream_b, dout, b, q0, h, T, C, tid);
      load_row_stats(tiles, lse, delta, b, h, q0, T, NH, tid);
    });
    block.barrier();
    block.for_warps([&](int w) {
      Products::a_bt(tiles.s + w * kRows * kLdFloat, tiles.own_a + w * kRows * kLdHalf, tiles.stream_a);  // S^T
    });
    block.warp_barrier();
    block.for_rows([&](int w, int r) { probabilities_of_key(tiles, w, r, k0, q0, T, scale); });
    block.warp_barrier();
    block.for_warps([&](int w) {
      Products::add_ab(dv(w), tiles.p + w * kRows * kLdHalf, tiles.stream_b);                               // P^T dO
      Products::a_bt(tiles.dp + w * kRows * kLdFloat, tiles.own_b + w * kRows * kLdHalf, tiles.stream_b);  // V dO^T
    });
    block.warp_barrier();
    block.for_rows([&](int w, int r) { score_gradients(tiles, w, r, true, scale); });
    block.warp_barrier();
    block.for_warps([&](int w) { Products::add_ab(dk(w), tiles.ds + w * kRows * kLdHalf, tiles.stream_a); });  // dS^T Q
  }
  block.warp_barrier();
  block.for_warps([&](int w) { Products::store(tiles.s + w * kRows * kLdFloat, dk(w)); });
  block.warp_barrier();
  block.for_rows([&](int w, int r) { write_row_into(dqkv, tiles, w, r, b, k0, flash::kPartK, h, T, C); });
  block.warp_barrier();
  block.for_warps([&](int w) { Products::store(tiles.s + w * kRows * kLdFloat, dv(w)); });
  block.warp_barrier();
  block.for_rows([&](int w, int r) { write_row_into(dqkv, tiles, w, r, b, k0, flash::kPartV, h, T, C); });
}

// The q-tile's dQ: block (q0, h, b).
template <class Products, class Block, class Acc>
TRIDENT_FLASH_HD void dq_block(Block& block, const BackwardTiles& tiles, uint16_t* dqkv, const uint16_t* qkv,
                               const uint16_t* dout, const float* lse, const float* delta, int b, int h, int q0, int T,
                               int C, int NH, float scale, Acc dq) {
  block.for_threads([&](int tid) {
    load_tile(tiles.own_a, qkv, b, q0, flash::kPartQ, h, T, C, tid);
    load_row_tile(tiles.own_b, dout, b, q0, h, T, C, tid);
    load_row_stats(tiles, lse, delta, b, h, q0, T, NH, tid);
  });
  block.for_warps([&](int w) { Products::zero(dq(w)); });
  for (int k0 = 0; k0 <= q0; k0 += kTile) {
    block.barrier();
    block.for_threads([&](int tid) {
      load_tile(tiles.stream_a, qkv, b, k0, flash::kPartK, h, T, C, tid);
      load_tile(tiles.stream_b, qkv, b, k0, flash::kPartV, h, T, C, tid);
    });
    block.barrier();
    block.for_warps([&](int w) {
      Products::a_bt(tiles.s + w * kRows * kLdFloat, tiles.own_a + w * kRows * kLdHalf, tiles.stream_a);   // Q K^T
      Products::a_bt(tiles.dp + w * kRows * kLdFloat, tiles.own_b + w * kRows * kLdHalf, tiles.stream_b);  // dO V^T
    });
    block.warp_barrier();
    block.for_rows([&](int w, int r) {
      probabilities_of_query(tiles, w, r, q0, k0, T, scale);
      score_gradients(tiles, w, r, false, scale);
    });
    block.warp_barrier();
    block.for_warps([&](int w) { Products::add_ab(dq(w), tiles.ds + w * kRows * kLdHalf, tiles.stream_a); });  // dS K
  }
  block.warp_barrier();
  block.for_warps([&](int w) { Products::store(tiles.s + w * kRows * kLdFloat, dq(w)); });
  block.warp_barrier();
  block.for_rows([&](int w, int r) { write_row_into(dqkv, tiles, w, r, b, q0, flash::kPartQ, h, T, C); });
}

#if defined(__CUDACC__)
// One thread's view of the block on the device.
struct DeviceBlock {
  int tid, w, lane;
  template <class F>
  __device__ void for_threads(F f) { f(tid); }
  template <class F>
  __device__ void for_warps(F f) { f(w); }
  template <class F>
  __device__ void for_rows(F f) {
    if (lane < kRows) f(w, lane);
  }
  __device__ void barrier() { __syncthreads(); }
  __device__ void warp_barrier() { __syncwarp(); }
};

__global__ void delta_kernel(float* delta, const uint16_t* dout, const uint16_t* out, std::size_t rows, int T, int C,
                             int NH) {
  const std::size_t row = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row < rows) delta_row(delta, dout, out, row, T, C, NH);
}

__global__ void __launch_bounds__(kThreads) dkdv_kernel(uint16_t* dqkv, const uint16_t* qkv, const uint16_t* dout,
                                                        const float* lse, const float* delta, int T, int C, int NH,
                                                        float scale) {
  extern __shared__ __align__(128) unsigned char shared[];
  DeviceBlock block{static_cast<int>(threadIdx.x), static_cast<int>(threadIdx.x) / 32, static_cast<int>(threadIdx.x) % 32};
  // Key tiles first to last: the early keys meet the most queries (causal), so they start first.
  WmmaProducts::Accumulator dk, dv;
  dkdv_block<WmmaProducts>(block, carve_backward(shared), dqkv, qkv, dout, lse, delta, static_cast<int>(blockIdx.z),
                           static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x) * kTile, T, C, NH, scale,
                           OwnAccumulator<WmmaProducts::Accumulator>{&dk}, OwnAccumulator<WmmaProducts::Accumulator>{&dv});
}

__global__ void __launch_bounds__(kThreads) dq_kernel(uint16_t* dqkv, const uint16_t* qkv, const uint16_t* dout,
                                                      const float* lse, const float* delta, int T, int C, int NH,
                                                      float scale) {
  extern __shared__ __align__(128) unsigned char shared[];
  DeviceBlock block{static_cast<int>(threadIdx.x), static_cast<int>(threadIdx.x) / 32, static_cast<int>(threadIdx.x) % 32};
  // Query tiles last first: the late queries meet the most keys.
  const int q0 = (static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x)) * kTile;
  WmmaProducts::Accumulator dq;
  dq_block<WmmaProducts>(block, carve_backward(shared), dqkv, qkv, dout, lse, delta, static_cast<int>(blockIdx.z),
                         static_cast<int>(blockIdx.y), q0, T, C, NH, scale, OwnAccumulator<WmmaProducts::Accumulator>{&dq});
}

// dqkv = the gradient (overwritten), all bf16 bits but lse and delta (B * NH * T floats of scratch).
// Returns the first error of the opt-ins and launches.
inline cudaError_t backward(uint16_t* dqkv, float* delta, const uint16_t* dout, const uint16_t* qkv, const uint16_t* out,
                            const float* lse, int B, int T, int C, int NH, float scale, cudaStream_t stream) {
  if (B == 0 || T == 0) return cudaSuccess;
  const std::size_t rows = static_cast<std::size_t>(B) * NH * T;
  delta_kernel<<<static_cast<unsigned>((rows + 255) / 256), 256, 0, stream>>>(delta, dout, out, rows, T, C, NH);
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return status;
  for (const void* kernel : {reinterpret_cast<const void*>(dkdv_kernel), reinterpret_cast<const void*>(dq_kernel)}) {
    status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(kBackwardSharedBytes));
    if (status != cudaSuccess) return status;
  }
  const dim3 grid(static_cast<unsigned>((T + kTile - 1) / kTile), static_cast<unsigned>(NH), static_cast<unsigned>(B));
  dkdv_kernel<<<grid, kThreads, kBackwardSharedBytes, stream>>>(dqkv, qkv, dout, lse, delta, T, C, NH, scale);
  status = cudaGetLastError();
  if (status != cudaSuccess) return status;
  dq_kernel<<<grid, kThreads, kBackwardSharedBytes, stream>>>(dqkv, qkv, dout, lse, delta, T, C, NH, scale);
  return cudaGetLastError();
}
#endif

// The host's block: every thread, warp and row in turn; barriers are no-ops (each step already
// finished for the whole block when the next starts).
struct HostBlock {
  template <class F>
  TRIDENT_FLASH_HD void for_threads(F f) {
    for (int tid = 0; tid < kThreads; ++tid) f(tid);
  }
  template <class F>
  TRIDENT_FLASH_HD void for_warps(F f) {
    for (int w = 0; w < kWarps; ++w) f(w);
  }
  template <class F>
  TRIDENT_FLASH_HD void for_rows(F f) {
    for (int w = 0; w < kWarps; ++w) {
      for (int r = 0; r < kRows; ++r) f(w, r);
    }
  }
  TRIDENT_FLASH_HD void barrier() {}
  TRIDENT_FLASH_HD void warp_barrier() {}
};

// The three kernels in their order on the host (delta, then every dK/dV block, then every dQ
// block), with HostProducts.
inline void replay_backward(uint16_t* dqkv, float* delta, const uint16_t* dout, const uint16_t* qkv,
                            const uint16_t* out, const float* lse, int B, int T, int C, int NH, float scale) {
  const std::size_t rows = static_cast<std::size_t>(B) * NH * T;
  for (std::size_t row = 0; row < rows; ++row) delta_row(delta, dout, out, row, T, C, NH);
  std::vector<unsigned char> shared(kBackwardSharedBytes + 128);
  unsigned char* base = shared.data() + (128 - reinterpret_cast<std::uintptr_t>(shared.data()) % 128) % 128;
  const BackwardTiles tiles = carve_backward(base);
  HostBlock block;
  std::vector<HostProducts::Accumulator> acc(3 * kWarps);
  using Warps = WarpAccumulators<HostProducts::Accumulator>;
  const Warps dk{acc.data()}, dv{acc.data() + kWarps}, dq{acc.data() + 2 * kWarps};
  const int tiles_t = (T + kTile - 1) / kTile;
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int kt = 0; kt < tiles_t; ++kt) {
        dkdv_block<HostProducts>(block, tiles, dqkv, qkv, dout, lse, delta, b, h, kt * kTile, T, C, NH, scale, dk,
                                 dv);
      }
    }
  }
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int qt = 0; qt < tiles_t; ++qt) {
        dq_block<HostProducts>(block, tiles, dqkv, qkv, dout, lse, delta, b, h, qt * kTile, T, C, NH, scale, dq);
      }
    }
  }
}

}  // namespace trident::playground::flash_tc
