// Flash attention's backward on the tensor cores for 16-bit buffers, hs = 64 (the forward and
// the layout of the warps: flash_attention_mma.cu; the shared tile machinery: flash_mma_tiles.cuh).
//
// As the scalar kernels (flash_attention.cu): D = rowsum(dout * out) first (there),
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
#include "kernels/cuda/flash_attention_mma.cuh"

#include <stdexcept>

#include "kernels/cuda/cuda_check.h"        // CUDA_CHECK, CUDA_CHECK_LAUNCH
#include "kernels/cuda/flash_dq_sums.cuh"   // DqSums, start_dq_sums, key_tile_by_ticket, add_dq_share
#include "kernels/cuda/flash_mma_tiles.cuh" // the tiles, copies and fragment products
#include "kernels/cuda/shared_slices.h"     // SharedSlices, shared_slice_bytes

namespace trident::kernels::cuda {

namespace {

using namespace flash_mma;

// The backward blocks' shared tiles, two buffers of each (tile j in buffer j % 2): 37,888 bytes,
// under the 48 KiB of static shared memory.
struct alignas(16) BackwardTiles {
  uint16_t first[2][kTileElements];   // dK/dV: Q of a query tile (own K first); dQ: K of a key tile (own Q first)
  uint16_t second[2][kTileElements];  // dK/dV: dO of the query tile (own V first); dQ: V (own dO first)
  float lse[2][kTile];                // dK/dV: the query tile's L and D
  float delta[2][kTile];
};

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
  load_tile_stats<kCopy>(tiles.lse[slot], tiles.delta[slot], lse, delta, b, h, q0, T, NH, tid);
}

// The dK/dV kernel's dynamic shared memory with dQ in the key walk: its own K tile (kept for
// dS K; the static buffers take the query tiles) and the dS^T tile, each a slice of its own.
constexpr std::size_t kTileFloats = kTileElements * sizeof(uint16_t) / sizeof(float);
constexpr std::size_t kDqWalkSharedBytes = 2 * shared_slice_bytes(kTileFloats);

template <class S, TileCopy kCopy, FlashDq kDq, FlashBlockOrder kOrder>
__global__ void __launch_bounds__(kThreads)
    mma_dkdv_kernel(uint16_t* __restrict__ dqkv, const uint16_t* __restrict__ qkv, const uint16_t* __restrict__ dout,
                    const float* __restrict__ lse, const float* __restrict__ delta, int T, int C, int NH, float scale,
                    DqSums dq_sums) {
  constexpr bool kDqInWalk = kDq == FlashDq::kInKeyWalk;
  static_assert(!kDqInWalk || kOrder == FlashBlockOrder::kHeadByHead, "dQ in the key walk orders its blocks by ticket");
  __shared__ BackwardTiles tiles;
  extern __shared__ float walk_shared[];  // kDqInWalk only: kDqWalkSharedBytes
  Place at = place<kOrder>();
  int tile = key_tile_of(at);  // key tile 0 walks every query tile: first
  if constexpr (kDqInWalk) {
    __shared__ unsigned ticket;
    tile = key_tile_by_ticket(at, ticket, dq_sums, NH);  // flash_dq_sums.cuh: the order of the adds
  }
  const int k0 = tile * kTile;
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
      key_rows_softmax_backward<decltype(masked)::value>(pt, dst, q0, key, T, t4, scale_log2, tiles.lse[slot],
                                                         tiles.delta[slot]);
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

      add_dq_share<S>(dq, dq_sums, dqkv, tile, q0, at, T, C, NH, scale);
    }
  };
  walk_query_tiles(k0, T, query_tile);
  store_key_rows<S>(dqkv, dk, dv, key, b, h, T, C, t4, scale);
}

template <class S, TileCopy kCopy, FlashBlockOrder kOrder>
__global__ void __launch_bounds__(kThreads)
    mma_dq_kernel(uint16_t* __restrict__ dqkv, const uint16_t* __restrict__ qkv, const uint16_t* __restrict__ dout,
                  const float* __restrict__ lse, const float* __restrict__ delta, int T, int C, int NH, float scale) {
  __shared__ BackwardTiles tiles;
  const Place at = place<kOrder>();
  const int q0 = query_tile_of<kOrder>(at) * kTile;
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
  load_row_stats(row_lse, row_delta, lse, delta, row, b, h, T, NH);
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
    query_rows_softmax_backward<decltype(masked)::value>(ds, dp, k0, row, T, t4, scale_log2, row_lse, row_delta);
    multiply_by_rows<S, 1>(&dq, &ds, tiles.first[slot], lane);
  };
  walk_key_tiles(q0, key_tile);
  store_query_rows<S>(dqkv, dq, row, b, h, T, C, t4, scale);
}

}  // namespace

std::size_t flash_attention_mma_dq_sums_floats(int B, int T, int NH) {
  return flash_attention_scratch_floats(B, T, NH, FlashDq::kInKeyWalk) - flash_attention_dq_sums_offset(B, T, NH);
}

void flash_attention_mma_backward(ActPtr dqkv, ConstActPtr dout, ConstActPtr qkv, const float* lse,
                                  const float* delta, float* dq_sums, int B, int T, int C, int NH, float scale,
                                  cudaStream_t stream, const FlashMmaOptions& options) {
  if (B == 0 || T == 0) return;
  const bool dq_in_walk = options.dq == FlashDq::kInKeyWalk;
  if (dq_in_walk && dq_sums == nullptr) {
    throw std::invalid_argument("flash_attention_mma_backward: dQ in the key walk needs dq_sums");
  }
  if (options.backward_products == FlashProducts::kWarpgroup) {
    if (!flash_attention_wgmma_available()) {
      throw std::invalid_argument(
          "flash_attention_mma_backward: warpgroup products (wgmma) need a build for sm_90a (CMAKE_CUDA_ARCHITECTURES "
          "with 90) and a compute capability 9.0 GPU");
    }
    flash_attention_wgmma_backward(dqkv, dout, qkv, lse, delta, dq_sums, B, T, C, NH, scale, stream, options);
    return;
  }
  DqSums sums;
  if (dq_in_walk) sums = start_dq_sums(dq_sums, B, T, NH, stream);
  with_policies(qkv.storage(), options.copy, [&](auto policy, auto copying) {
    using S = decltype(policy);
    using Copy = decltype(copying);
    auto* dqkv_s = static_cast<uint16_t*>(dqkv.get());
    const auto* dout_s = static_cast<const uint16_t*>(dout.get());
    const auto* qkv_s = static_cast<const uint16_t*>(qkv.get());
    if (dq_in_walk) {
      // 37,888 static bytes and these: over the 48 KiB a block gets unasked, so opted in.
      constexpr FlashBlockOrder kByTicket = FlashBlockOrder::kHeadByHead;  // the grid's shape; tickets order it
      CUDA_CHECK(cudaFuncSetAttribute(mma_dkdv_kernel<S, Copy::value, FlashDq::kInKeyWalk, kByTicket>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kDqWalkSharedBytes)));
      mma_dkdv_kernel<S, Copy::value, FlashDq::kInKeyWalk, kByTicket><<<tile_grid(B, T, NH, kByTicket), kThreads,
                                                                        kDqWalkSharedBytes, stream>>>(
          dqkv_s, qkv_s, dout_s, lse, delta, T, C, NH, scale, sums);
      return;
    }
    with_block_order(options.block_order, [&](auto ordering) {
      using Order = decltype(ordering);
      const dim3 grid = tile_grid(B, T, NH, Order::value);
      mma_dkdv_kernel<S, Copy::value, FlashDq::kSeparateWalk, Order::value><<<grid, kThreads, 0, stream>>>(
          dqkv_s, qkv_s, dout_s, lse, delta, T, C, NH, scale, sums);
      CUDA_CHECK_LAUNCH();
      mma_dq_kernel<S, Copy::value, Order::value><<<grid, kThreads, 0, stream>>>(dqkv_s, qkv_s, dout_s, lse, delta,
                                                                                 T, C, NH, scale);
    });
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trident::kernels::cuda
