// Flash attention's backward on Hopper's warpgroup products (FlashMmaOptions::backward_products =
// FlashProducts::kWarpgroup, not the default: untimed), hs = 64: the mma.sync backward
// (flash_attention_mma_backward.cu) with its products made by wgmma (kernels/cuda/warpgroup_mma.cuh;
// the forms and tiles: flash_wgmma_tiles.cuh). One block is one warpgroup, each warp 16 of the
// block's 64 rows, the softmax lines the mma.sync kernels' own (flash_mma_tiles.cuh).
//   dK, dV (a block per 64 keys, walking the query tiles at or after the diagonal):
//     S^T = K Q^T, dP^T = V dO^T  (scores: the block's K and V tiles as A, the query tile's Q
//                                  and dO as B), one group;
//     dV += P^T dO, dK += dS^T Q  (accumulate: P^T and dS^T from registers, dO and Q as B), one
//                                  group, with dQ's share when dQ is made in this walk
//                                  (FlashDq::kInKeyWalk): dS^T stored to shared memory, then
//                                  dS K (transposed: dS^T and the K tile both MN-major), added
//                                  into the fp32 sums in turn (flash_dq_sums.cuh).
//   dQ (FlashDq::kSeparateWalk; a block per 64 queries, walking the key tiles up to the diagonal):
//     S = Q K^T, dP = dO V^T      (scores: the block's Q and dO as A, the key tile's K and V);
//     dQ += dS K                  (accumulate: the K tile read again, now as k-rows).
// Why: the backward is most of attention's time (16.2 of 20.8 ms at GPT-2 774M, H100,
// docs/performance.md), and mma.sync makes every warp load its own copy of each B fragment from
// shared memory; wgmma reads B once for the warpgroup. Two schedules (FlashMmaOptions::
// backward_schedule): each product group waited for at once, or, with dQ in its own walk, each
// walked tile's softmax beside the previous tile's accumulating products (kOverlapped: the scores
// of tile j issued with tile j - 1's dV and dK, or dQ, behind them; wait<1>, the softmax of tile
// j, wait<0>). The sums run in the same order either way: the same bits. What this does not do
// yet (FlashAttention-3 does): producer warps with TMA, two warpgroups a block.
//
// Six 64-row swizzled tiles a block (the own two, two buffers of the walked two; a seventh for
// dS^T with dQ in the walk) on 1024 bytes, and the dK/dV walk's L and D of two query tiles:
// 51,200 bytes (dK/dV), 59,392 (dK/dV with dQ) and 50,176 (dQ) of dynamic shared memory, over
// the 48 KiB a block gets unasked, so the launcher opts in. Overlapped, three buffers of the
// walked tiles: 68,096 (dK/dV) and 66,560 bytes (dQ).
//
// Every warp takes part in every product (they belong to the warpgroup), even one whose rows all
// lie past T: those rows read zero-filled tiles and masked scores, P = 0 and dS = 0, and are
// never stored. On the emulation the same bits as the mma.sync backward with the same dQ option
// (the two models add each 16-wide k-step in the same order); tests/gpu's
// FlashMmaOptions.Warpgroup* hold them within the format's rounding on a GPU.
#include <cuda_runtime.h>

#include <cmath>
#include <stdexcept>

#include "kernels/cuda/cuda_check.h"             // CUDA_CHECK, CUDA_CHECK_LAUNCH
#include "kernels/cuda/flash_attention_mma.cuh"  // FlashMmaOptions
#include "kernels/cuda/flash_dq_sums.cuh"        // DqSums, start_dq_sums, key_tile_by_ticket, add_dq_share
#include "kernels/cuda/flash_wgmma_tiles.cuh"    // swizzled tiles, issue_scores/accumulate, Place, softmax helpers

namespace trident::kernels::cuda {

namespace {

using namespace flash_wgmma;

// The walked tiles' buffers: two, or three when a tile's products still run behind the next
// tile's scores (WarpgroupSchedule::kOverlapped: the buffer of tile j - 1 is read until tile j's
// wait<0>, so tile j + 1 goes to a third).
__host__ __device__ constexpr int walk_buffers(WarpgroupSchedule schedule) {
  return schedule == WarpgroupSchedule::kOverlapped ? 3 : 2;
}
// The dK/dV kernel's tiles: K, V, the buffers of Q and dO, (dQ in the walk) dS^T; then L and D,
// as many buffers each.
__host__ __device__ constexpr int dkdv_tiles(FlashDq dq, WarpgroupSchedule schedule) {
  return 2 + 2 * walk_buffers(schedule) + (dq == FlashDq::kInKeyWalk ? 1 : 0);
}
constexpr std::size_t dkdv_shared_bytes(FlashDq dq, WarpgroupSchedule schedule) {
  return wg::kTileAlignment + dkdv_tiles(dq, schedule) * kSwizzledTileBytes +
         2 * walk_buffers(schedule) * kTile * sizeof(float);
}
// The dQ kernel's: Q, the buffers of K and V, dO.
constexpr std::size_t dq_shared_bytes(WarpgroupSchedule schedule) {
  return wg::kTileAlignment + (2 + 2 * walk_buffers(schedule)) * kSwizzledTileBytes;
}

template <class S, TileCopy kCopy, FlashDq kDq, FlashBlockOrder kOrder, WarpgroupSchedule kSchedule>
__global__ void __launch_bounds__(kThreads)
    wgmma_dkdv_kernel(uint16_t* __restrict__ dqkv, const uint16_t* __restrict__ qkv, const uint16_t* __restrict__ dout,
                      const float* __restrict__ lse, const float* __restrict__ delta, int T, int C, int NH,
                      float scale, DqSums dq_sums) {
  constexpr bool kDqInWalk = kDq == FlashDq::kInKeyWalk;
  constexpr bool kOverlapped = kSchedule == WarpgroupSchedule::kOverlapped;
  constexpr int kBuffers = walk_buffers(kSchedule);
  static_assert(!kDqInWalk || kOrder == FlashBlockOrder::kHeadByHead, "dQ in the key walk orders its blocks by ticket");
  static_assert(!kDqInWalk || !kOverlapped, "the overlapped schedule walks with dQ apart");
  extern __shared__ float walk_shared[];  // dkdv_shared_bytes(kDq, kSchedule)
  uint16_t* const k_tile = wg::align_tiles(reinterpret_cast<uint16_t*>(walk_shared));
  uint16_t* const v_tile = k_tile + kSwizzledTileElements;
  uint16_t* const q_tiles = v_tile + kSwizzledTileElements;                // kBuffers
  uint16_t* const do_tiles = q_tiles + kBuffers * kSwizzledTileElements;  // kBuffers
  uint16_t* const ds_tile = do_tiles + kBuffers * kSwizzledTileElements;  // dQ in the walk: dS^T [64 keys][64 queries]
  float* const lse_tiles =
      reinterpret_cast<float*>(k_tile + dkdv_tiles(kDq, kSchedule) * kSwizzledTileElements);  // [kBuffers][kTile]
  float* const delta_tiles = lse_tiles + kBuffers * kTile;                                     // [kBuffers][kTile]
  Place at = place<kOrder>();
  int tile = key_tile_of(at);  // key tile 0 walks every query tile: first
  if constexpr (kDqInWalk) {
    __shared__ unsigned ticket;
    tile = key_tile_by_ticket(at, ticket, dq_sums, NH);  // flash_dq_sums.cuh: the order of the adds
  }
  const int k0 = tile * kTile;
  const int h = at.h, b = at.b, tid = at.tid, warp = at.warp, g = at.g, t4 = at.t4;
  const std::size_t stride = 3 * static_cast<std::size_t>(C);
  const uint16_t* q_first = qkv + qkv_index(0, 0, flash::kPartQ, h, T, C);
  const uint16_t* do_first = dout + row_index(0, 0, h, T, C);
  auto load_queries = [&](int q0, int slot) {
    load_swizzled_tile<kCopy>(q_tiles + slot * kSwizzledTileElements, q_first, stride, b, q0, T, tid);
    load_swizzled_tile<kCopy>(do_tiles + slot * kSwizzledTileElements, do_first, static_cast<std::size_t>(C), b, q0,
                              T, tid);
    load_tile_stats<kCopy>(lse_tiles + slot * kTile, delta_tiles + slot * kTile, lse, delta, b, h, q0, T, NH, tid);
  };
  load_swizzled_key_tile<kCopy>(k_tile, v_tile, qkv, b, h, k0, T, C, tid);
  load_queries(k0, 0);

  const float scale_log2 = scale * kLog2e;
  const int key[2] = {k0 + 16 * warp + g, k0 + 16 * warp + g + 8};
  float dk[8][4] = {};
  float dv[8][4] = {};
  uint32_t pa[4][4] = {};   // P^T as A fragments (overlapped: of the previous tile)
  uint32_t dsa[4][4] = {};  // dS^T likewise
  const uint16_t* previous_q = q_tiles;   // overlapped: the previous tile's Q and dO
  const uint16_t* previous_do = do_tiles;
  // One query tile of the walk. `masked` (std::true_type) adds the per-score causal and end
  // tests, which only the diagonal tile and a last, partial one need. Overlapped, `behind`
  // (std::true_type from the second tile on) issues the previous tile's dV and dK products behind
  // this tile's scores, and this tile's run at the next tile (or after the walk). Compile-time
  // choices, so that no branch separates the products (ptxas's C7519).
  auto query_tile = [&](int q0, int slot, auto masked, auto behind) {
    constexpr bool kBehind = decltype(behind)::value;
    wait_for_swizzled_tiles<kCopy>();  // this query tile is whole; every warp past the last reuse of the next buffer
    if (q0 + kTile < T) load_queries(q0 + kTile, (slot + 1) % kBuffers);
    const uint16_t* q_tile = q_tiles + slot * kSwizzledTileElements;
    const uint16_t* do_tile = do_tiles + slot * kSwizzledTileElements;

    float pt[8][4] = {};   // S^T, then P^T: [this warp's 16 keys][64 queries]
    float dst[8][4] = {};  // dP^T, then dS^T
    wg::fence_operands(pt);
    wg::fence_operands(dst);
    if constexpr (kOverlapped) {
      wg::fence_operands(dv);
      wg::fence_operands(dk);
    }
    wg::fence();
    issue_scores<S>(pt, k_tile, q_tile);
    issue_scores<S>(dst, v_tile, do_tile);
    wg::commit();
    if constexpr (kBehind) {
      issue_accumulate<S>(dv, pa, previous_do);
      issue_accumulate<S>(dk, dsa, previous_q);
      wg::commit();
      wg::wait<1>();  // the scores done; the previous tile's dV and dK products may still run
    } else {
      wg::wait<0>();
    }
    wg::fence_operands(pt);
    wg::fence_operands(dst);

    key_rows_softmax_backward<decltype(masked)::value>(pt, dst, q0, key, T, t4, scale_log2,
                                                       lse_tiles + slot * kTile, delta_tiles + slot * kTile);

    if constexpr (kOverlapped) {
      if constexpr (kBehind) wg::wait<0>();  // the previous tile's products done: pa, dsa and its buffer free
      wg::fence_operands(dv);
      wg::fence_operands(dk);
      accumulator_as_fragments<S>(pa, pt);
      accumulator_as_fragments<S>(dsa, dst);
      previous_q = q_tile;
      previous_do = do_tile;
      return;
    }
    accumulator_as_fragments<S>(pa, pt);
    accumulator_as_fragments<S>(dsa, dst);
    [[maybe_unused]] float dq[8][4] = {};  // dQ in the walk: this warp's 16 queries' share over the 64 keys
    if constexpr (kDqInWalk) {
      // dS^T into shared memory as the dK product rounds it, for dQ's share dS K; the previous
      // tile's product read it before this tile's first barrier.
      for (int r = 0; r < 2; r++) {
        for (int j = 0; j < 8; j++) {
          store_pair(ds_tile + wg::swizzled_offset(16 * warp + g + 8 * r, 8 * j + 2 * t4),
                     mma::pack<S>(dst[j][2 * r], dst[j][2 * r + 1]));
        }
      }
      wg::fence_shared_for_async();
      __syncthreads();  // dS^T whole, and visible to the products
      wg::fence_operands(dq);
    }
    wg::fence_operands(dv);
    wg::fence_operands(dk);
    wg::fence();
    issue_accumulate<S>(dv, pa, do_tile);
    issue_accumulate<S>(dk, dsa, q_tile);
    if constexpr (kDqInWalk) issue_transposed_by_rows<S>(dq, ds_tile, k_tile);
    wg::commit();
    wg::wait<0>();  // before the next tile's barrier lets its loads overwrite this tile's buffer
    wg::fence_operands(dv);
    wg::fence_operands(dk);
    if constexpr (kDqInWalk) {
      wg::fence_operands(dq);
      add_dq_share<S>(dq, dq_sums, dqkv, tile, q0, at, T, C, NH, scale);
    }
  };
  if constexpr (kOverlapped) {
    walk_query_tiles_in_ring<kBuffers>(k0, T, query_tile);
    // The last tile's dV and dK products.
    wg::fence_operands(dv);
    wg::fence_operands(dk);
    wg::fence();
    issue_accumulate<S>(dv, pa, previous_do);
    issue_accumulate<S>(dk, dsa, previous_q);
    wg::commit();
    wg::wait<0>();
    wg::fence_operands(dv);
    wg::fence_operands(dk);
  } else {
    walk_query_tiles(k0, T, [&](int q0, int slot, auto masked) { query_tile(q0, slot, masked, std::false_type{}); });
  }
  store_key_rows<S>(dqkv, dk, dv, key, b, h, T, C, t4, scale);
}

template <class S, TileCopy kCopy, FlashBlockOrder kOrder, WarpgroupSchedule kSchedule>
__global__ void __launch_bounds__(kThreads)
    wgmma_dq_kernel(uint16_t* __restrict__ dqkv, const uint16_t* __restrict__ qkv, const uint16_t* __restrict__ dout,
                    const float* __restrict__ lse, const float* __restrict__ delta, int T, int C, int NH,
                    float scale) {
  constexpr bool kOverlapped = kSchedule == WarpgroupSchedule::kOverlapped;
  constexpr int kBuffers = walk_buffers(kSchedule);
  extern __shared__ float walk_shared[];  // dq_shared_bytes(kSchedule)
  const Place at = place<kOrder>();
  const int q0 = query_tile_of<kOrder>(at) * kTile;
  const int h = at.h, b = at.b, tid = at.tid, warp = at.warp, g = at.g, t4 = at.t4;
  // Q, K and V kBuffers each, then dO.
  const QueryTileBuffers<kCopy> tiles(reinterpret_cast<uint16_t*>(walk_shared), kBuffers, qkv, b, h, T, C, tid);
  uint16_t* const do_tile = tiles.v_tiles + kBuffers * kSwizzledTileElements;
  tiles.start(q0);
  load_swizzled_tile<kCopy>(do_tile, dout + row_index(0, 0, h, T, C), static_cast<std::size_t>(C), b, q0, T, tid);

  const float scale_log2 = scale * kLog2e;
  const int row[2] = {q0 + 16 * warp + g, q0 + 16 * warp + g + 8};
  float row_lse[2];
  float row_delta[2];
  load_row_stats(row_lse, row_delta, lse, delta, row, b, h, T, NH);
  float dq[8][4] = {};
  uint32_t dsa[4][4] = {};                     // dS as A fragments (overlapped: of the previous tile)
  const uint16_t* previous_k = tiles.k_tile(0);  // overlapped: the previous tile's K
  const int last_query = min(q0 + kTile, T) - 1;
  // One key tile of the walk. `masked` (std::true_type) adds the per-score causal and end
  // tests, which only the diagonal tile needs. Overlapped, `behind` (std::true_type from the
  // second tile on) issues the previous tile's dQ product behind this tile's scores.
  auto key_tile = [&](int k0, int slot, auto masked, auto behind) {
    constexpr bool kBehind = decltype(behind)::value;
    wait_for_swizzled_tiles<kCopy>();  // this key tile is whole; every warp past the last reuse of the next buffer
    if (k0 + kTile <= last_query) tiles.load_keys(k0 + kTile, (slot + 1) % kBuffers);
    const uint16_t* k_tile = tiles.k_tile(slot);
    const uint16_t* v_tile = tiles.v_tile(slot);

    float ds[8][4] = {};  // S, then dS
    float dp[8][4] = {};
    wg::fence_operands(ds);
    wg::fence_operands(dp);
    if constexpr (kOverlapped) wg::fence_operands(dq);
    wg::fence();
    issue_scores<S>(ds, tiles.q_tile, k_tile);
    issue_scores<S>(dp, do_tile, v_tile);
    wg::commit();
    if constexpr (kBehind) {
      issue_accumulate<S>(dq, dsa, previous_k);
      wg::commit();
      wg::wait<1>();  // the scores done; the previous tile's dQ product may still run
    } else {
      wg::wait<0>();
    }
    wg::fence_operands(ds);
    wg::fence_operands(dp);

    query_rows_softmax_backward<decltype(masked)::value>(ds, dp, k0, row, T, t4, scale_log2, row_lse, row_delta);

    if constexpr (kOverlapped) {
      if constexpr (kBehind) wg::wait<0>();  // the previous tile's product done: dsa and its buffer free
      wg::fence_operands(dq);
      accumulator_as_fragments<S>(dsa, ds);
      previous_k = k_tile;
      return;
    }
    accumulator_as_fragments<S>(dsa, ds);
    wg::fence_operands(dq);
    wg::fence();
    issue_accumulate<S>(dq, dsa, k_tile);
    wg::commit();
    wg::wait<0>();  // before the next tile's barrier lets its loads overwrite this tile's buffer
    wg::fence_operands(dq);
  };
  if constexpr (kOverlapped) {
    walk_key_tiles_in_ring<kBuffers>(q0, q0, key_tile);  // the diagonal last
    wg::fence_operands(dq);  // the last tile's dQ product
    wg::fence();
    issue_accumulate<S>(dq, dsa, previous_k);
    wg::commit();
    wg::wait<0>();
    wg::fence_operands(dq);
  } else {
    walk_key_tiles(q0, [&](int k0, int slot, auto masked) { key_tile(k0, slot, masked, std::false_type{}); });
  }
  store_query_rows<S>(dqkv, dq, row, b, h, T, C, t4, scale);
}

// dQ in its own walk: the dK/dV kernel, then the dQ kernel, with one schedule.
template <class S, TileCopy kCopy, FlashBlockOrder kOrder, WarpgroupSchedule kSchedule>
void launch_separate_walks(uint16_t* dqkv_s, const uint16_t* qkv_s, const uint16_t* dout_s, const float* lse,
                           const float* delta, int B, int T, int C, int NH, float scale, cudaStream_t stream) {
  constexpr std::size_t kDkdvBytes = dkdv_shared_bytes(FlashDq::kSeparateWalk, kSchedule);
  constexpr std::size_t kDqBytes = dq_shared_bytes(kSchedule);
  const dim3 grid = tile_grid(B, T, NH, kOrder);
  CUDA_CHECK(cudaFuncSetAttribute(wgmma_dkdv_kernel<S, kCopy, FlashDq::kSeparateWalk, kOrder, kSchedule>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kDkdvBytes)));
  CUDA_CHECK(cudaFuncSetAttribute(wgmma_dq_kernel<S, kCopy, kOrder, kSchedule>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kDqBytes)));
  wgmma_dkdv_kernel<S, kCopy, FlashDq::kSeparateWalk, kOrder, kSchedule><<<grid, kThreads, kDkdvBytes, stream>>>(
      dqkv_s, qkv_s, dout_s, lse, delta, T, C, NH, scale, DqSums{});
  CUDA_CHECK_LAUNCH();
  wgmma_dq_kernel<S, kCopy, kOrder, kSchedule><<<grid, kThreads, kDqBytes, stream>>>(dqkv_s, qkv_s, dout_s, lse, delta,
                                                                                     T, C, NH, scale);
}

}  // namespace

void flash_attention_wgmma_backward(ActPtr dqkv, ConstActPtr dout, ConstActPtr qkv, const float* lse,
                                    const float* delta, float* dq_sums, int B, int T, int C, int NH, float scale,
                                    cudaStream_t stream, const FlashMmaOptions& options) {
  auto* dqkv_s = static_cast<uint16_t*>(dqkv.get());
  const auto* dout_s = static_cast<const uint16_t*>(dout.get());
  const auto* qkv_s = static_cast<const uint16_t*>(qkv.get());
  const bool overlapped = options.backward_schedule == WarpgroupSchedule::kOverlapped;
  if (overlapped && (options.dq != FlashDq::kSeparateWalk || options.copy != TileCopy::kAsynchronous)) {
    throw std::invalid_argument(
        "flash_attention_mma_backward: the overlapped wgmma schedule takes dQ in a walk of its own and cp.async tile "
        "copies");
  }
  if (options.dq == FlashDq::kInKeyWalk) {
    const DqSums sums = start_dq_sums(dq_sums, B, T, NH, stream);
    with_policies(qkv.storage(), options.copy, [&](auto policy, auto copying) {
      using S = decltype(policy);
      constexpr TileCopy kCopy = decltype(copying)::value;
      constexpr FlashBlockOrder kByTicket = FlashBlockOrder::kHeadByHead;  // the grid's shape; tickets order it
      constexpr WarpgroupSchedule kInTurn = WarpgroupSchedule::kInTurn;
      constexpr std::size_t kBytes = dkdv_shared_bytes(FlashDq::kInKeyWalk, kInTurn);
      CUDA_CHECK(cudaFuncSetAttribute(wgmma_dkdv_kernel<S, kCopy, FlashDq::kInKeyWalk, kByTicket, kInTurn>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kBytes)));
      wgmma_dkdv_kernel<S, kCopy, FlashDq::kInKeyWalk, kByTicket, kInTurn>
          <<<tile_grid(B, T, NH, kByTicket), kThreads, kBytes, stream>>>(dqkv_s, qkv_s, dout_s, lse, delta, T, C, NH,
                                                                         scale, sums);
    });
    CUDA_CHECK_LAUNCH();
    return;
  }
  with_kernel_choices(qkv.storage(), options.copy, options.block_order, [&](auto policy, auto copying, auto ordering) {
    using S = decltype(policy);
    constexpr TileCopy kCopy = decltype(copying)::value;
    constexpr FlashBlockOrder kOrder = decltype(ordering)::value;
    if (!overlapped) {
      launch_separate_walks<S, kCopy, kOrder, WarpgroupSchedule::kInTurn>(dqkv_s, qkv_s, dout_s, lse, delta, B, T, C,
                                                                          NH, scale, stream);
    } else if constexpr (kCopy == TileCopy::kAsynchronous) {  // checked above: no overlapped kernels to build else
      launch_separate_walks<S, kCopy, kOrder, WarpgroupSchedule::kOverlapped>(dqkv_s, qkv_s, dout_s, lse, delta, B, T,
                                                                              C, NH, scale, stream);
    }
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trident::kernels::cuda
