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
#include <string>

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
// The dK/dV kernel's tiles: K and V (one each a warpgroup), the buffers of Q and dO, (dQ in the
// walk) dS^T; then L and D, as many buffers each.
__host__ __device__ constexpr int dkdv_tiles(FlashDq dq, WarpgroupSchedule schedule, int groups) {
  return 2 * groups + 2 * walk_buffers(schedule) + (dq == FlashDq::kInKeyWalk ? 1 : 0);
}
constexpr std::size_t dkdv_shared_bytes(FlashDq dq, WarpgroupSchedule schedule, int groups) {
  return wg::kTileAlignment + dkdv_tiles(dq, schedule, groups) * kSwizzledTileBytes +
         2 * walk_buffers(schedule) * kTile * sizeof(float);
}
// The dQ kernel's: Q (one a warpgroup), the buffers of K and V, dO (one a warpgroup).
constexpr std::size_t dq_shared_bytes(WarpgroupSchedule schedule, int groups) {
  return wg::kTileAlignment + (2 * groups + 2 * walk_buffers(schedule)) * kSwizzledTileBytes;
}

// A block of kGroups warpgroups (FlashMmaOptions::backward_warpgroups) takes keys [k0, k0 + 64
// kGroups), warpgroup w those from k0 + 64 w, every warpgroup walking the block's query tiles from
// the same shared Q, dO, L and D buffers; the second warpgroup's first tile (the first's
// diagonal) lies wholly before its keys: every score masked, P and dS zero, dK and dV keep
// their bits. dQ in the key walk takes one warpgroup (its turns are a key tile's).
template <class S, TileCopy kCopy, FlashDq kDq, FlashBlockOrder kOrder, WarpgroupSchedule kSchedule, int kGroups>
__global__ void __launch_bounds__(kGroups * kThreads)
    wgmma_dkdv_kernel(uint16_t* __restrict__ dqkv, const uint16_t* __restrict__ qkv, const uint16_t* __restrict__ dout,
                      const float* __restrict__ lse, const float* __restrict__ delta, int T, int C, int NH,
                      float scale, DqSums dq_sums) {
  constexpr bool kDqInWalk = kDq == FlashDq::kInKeyWalk;
  constexpr bool kOverlapped = kSchedule == WarpgroupSchedule::kOverlapped;
  constexpr int kBuffers = walk_buffers(kSchedule);
  static_assert(!kDqInWalk || kOrder == FlashBlockOrder::kHeadByHead, "dQ in the key walk orders its blocks by ticket");
  static_assert(!kDqInWalk || !kOverlapped, "the overlapped schedule walks with dQ apart");
  static_assert(kGroups == 1 || !kDqInWalk, "dQ in the key walk takes one warpgroup a block");
  constexpr int kLoaders = kGroups * kThreads;
  extern __shared__ float walk_shared[];  // dkdv_shared_bytes(kDq, kSchedule, kGroups)
  uint16_t* const k_tiles = wg::align_tiles(reinterpret_cast<uint16_t*>(walk_shared));  // kGroups
  uint16_t* const v_tiles = k_tiles + kGroups * kSwizzledTileElements;                    // kGroups
  uint16_t* const q_tiles = v_tiles + kGroups * kSwizzledTileElements;                    // kBuffers
  uint16_t* const do_tiles = q_tiles + kBuffers * kSwizzledTileElements;  // kBuffers
  uint16_t* const ds_tile = do_tiles + kBuffers * kSwizzledTileElements;  // dQ in the walk: dS^T [64 keys][64 queries]
  float* const lse_tiles =  // [kBuffers][kTile]
      reinterpret_cast<float*>(k_tiles + dkdv_tiles(kDq, kSchedule, kGroups) * kSwizzledTileElements);
  float* const delta_tiles = lse_tiles + kBuffers * kTile;                                     // [kBuffers][kTile]
  Place at = place<kOrder>();
  int tile = key_tile_of(at);  // key tile 0 walks every query tile: first
  if constexpr (kDqInWalk) {
    __shared__ unsigned ticket;
    tile = key_tile_by_ticket(at, ticket, dq_sums, NH);  // flash_dq_sums.cuh: the order of the adds
  }
  const int k0 = tile * kGroups * kTile;  // the block's first key
  const int h = at.h, b = at.b, tid = at.tid, g = at.g, t4 = at.t4;
  const int group = block_warpgroup<kGroups>(at), warp = warpgroup_warp<kGroups>(at);
  const uint16_t* const k_tile = k_tiles + group * kSwizzledTileElements;
  const uint16_t* const v_tile = v_tiles + group * kSwizzledTileElements;
  const std::size_t stride = 3 * static_cast<std::size_t>(C);
  const uint16_t* q_first = qkv + qkv_index(0, 0, flash::kPartQ, h, T, C);
  const uint16_t* do_first = dout + row_index(0, 0, h, T, C);
  auto load_queries = [&](int q0, int slot) {
    load_swizzled_tile<kCopy, kLoaders>(q_tiles + slot * kSwizzledTileElements, q_first, stride, b, q0, T, tid);
    load_swizzled_tile<kCopy, kLoaders>(do_tiles + slot * kSwizzledTileElements, do_first, static_cast<std::size_t>(C),
                                        b, q0, T, tid);
    load_tile_stats<kCopy, kLoaders>(lse_tiles + slot * kTile, delta_tiles + slot * kTile, lse, delta, b, h, q0, T, NH,
                                     tid);
  };
  for (int w = 0; w < kGroups; w++) {
    load_swizzled_key_tile<kCopy, kLoaders>(k_tiles + w * kSwizzledTileElements, v_tiles + w * kSwizzledTileElements,
                                            qkv, b, h, k0 + w * kTile, T, C, tid);
  }
  load_queries(k0, 0);

  const float scale_log2 = scale * kLog2e;
  const int first_key = k0 + kTile * group + 16 * warp + g;
  const int key[2] = {first_key, first_key + 8};
  const int last_key = min(k0 + kGroups * kTile, T) - 1;
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
    walk_query_tiles_in_ring<kBuffers, kGroups>(k0, last_key, T, query_tile);
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
    walk_query_tiles<kGroups>(k0, last_key, T,
                              [&](int q0, int slot, auto masked) { query_tile(q0, slot, masked, std::false_type{}); });
  }
  store_key_rows<S>(dqkv, dk, dv, key, b, h, T, C, t4, scale);
}

// kGroups warpgroups a block as the forward's (WarpgroupRows): each its 64 queries, all walking
// the block's key tiles from the same K and V buffers. (Two warpgroups held to 2 blocks an SM,
// 128 registers, spill 24 to 520 bytes: left at one block of 8 warps, 143 to 174 registers.)
template <class S, TileCopy kCopy, FlashBlockOrder kOrder, WarpgroupSchedule kSchedule, int kGroups>
__global__ void __launch_bounds__(kGroups * kThreads)
    wgmma_dq_kernel(uint16_t* __restrict__ dqkv, const uint16_t* __restrict__ qkv, const uint16_t* __restrict__ dout,
                    const float* __restrict__ lse, const float* __restrict__ delta, int T, int C, int NH,
                    float scale) {
  constexpr bool kOverlapped = kSchedule == WarpgroupSchedule::kOverlapped;
  constexpr int kBuffers = walk_buffers(kSchedule);
  extern __shared__ float walk_shared[];  // dq_shared_bytes(kSchedule, kGroups)
  const Place at = place<kOrder>();
  const WarpgroupRows rows = warpgroup_rows<kGroups>(at, query_tile_of<kOrder>(at), T);
  const int q0 = rows.q0;
  const int h = at.h, b = at.b, tid = at.tid, t4 = at.t4;
  // Q (one a warpgroup), K and V kBuffers each, then dO (one a warpgroup).
  const QueryTileBuffers<kCopy, kGroups> tiles(reinterpret_cast<uint16_t*>(walk_shared), kBuffers, qkv, b, h, T, C,
                                               tid);
  uint16_t* const do_tiles = tiles.v_tiles + kBuffers * kSwizzledTileElements;
  tiles.start(q0);
  for (int w = 0; w < kGroups; w++) {
    load_swizzled_tile<kCopy, kGroups * kThreads>(do_tiles + w * kSwizzledTileElements, dout + row_index(0, 0, h, T, C),
                                                  static_cast<std::size_t>(C), b, q0 + w * kTile, T, tid);
  }
  const uint16_t* const q_tile = tiles.q_tile_of(rows.group);
  const uint16_t* const do_tile = do_tiles + rows.group * kSwizzledTileElements;

  const float scale_log2 = scale * kLog2e;
  const int(&row)[2] = rows.row;
  float row_lse[2];
  float row_delta[2];
  load_row_stats(row_lse, row_delta, lse, delta, row, b, h, T, NH);
  float dq[8][4] = {};
  uint32_t dsa[4][4] = {};                     // dS as A fragments (overlapped: of the previous tile)
  const uint16_t* previous_k = tiles.k_tile(0);  // overlapped: the previous tile's K
  const int last_query = rows.last_query;
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
    issue_scores<S>(ds, q_tile, k_tile);
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
    walk_key_tiles_in_ring<kBuffers, kGroups>(q0, last_query, key_tile);
    wg::fence_operands(dq);  // the last tile's dQ product
    wg::fence();
    issue_accumulate<S>(dq, dsa, previous_k);
    wg::commit();
    wg::wait<0>();
    wg::fence_operands(dq);
  } else {
    walk_key_tiles<kGroups>(q0, last_query,
                   [&](int k0, int slot, auto masked) { key_tile(k0, slot, masked, std::false_type{}); });
  }
  store_query_rows<S>(dqkv, dq, row, b, h, T, C, t4, scale);
}

// dQ in its own walk: the dK/dV kernel, then the dQ kernel, with one schedule and kGroups
// warpgroups a block.
template <class S, TileCopy kCopy, FlashBlockOrder kOrder, WarpgroupSchedule kSchedule, int kGroups>
void launch_separate_walks(uint16_t* dqkv_s, const uint16_t* qkv_s, const uint16_t* dout_s, const float* lse,
                           const float* delta, int B, int T, int C, int NH, float scale, cudaStream_t stream) {
  constexpr std::size_t kDkdvBytes = dkdv_shared_bytes(FlashDq::kSeparateWalk, kSchedule, kGroups);
  constexpr std::size_t kDqBytes = dq_shared_bytes(kSchedule, kGroups);
  const dim3 grid = tile_grid(B, T, NH, kOrder, kGroups * kTile);
  CUDA_CHECK(cudaFuncSetAttribute(wgmma_dkdv_kernel<S, kCopy, FlashDq::kSeparateWalk, kOrder, kSchedule, kGroups>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kDkdvBytes)));
  CUDA_CHECK(cudaFuncSetAttribute(wgmma_dq_kernel<S, kCopy, kOrder, kSchedule, kGroups>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kDqBytes)));
  wgmma_dkdv_kernel<S, kCopy, FlashDq::kSeparateWalk, kOrder, kSchedule, kGroups>
      <<<grid, kGroups * kThreads, kDkdvBytes, stream>>>(dqkv_s, qkv_s, dout_s, lse, delta, T, C, NH, scale, DqSums{});
  CUDA_CHECK_LAUNCH();
  wgmma_dq_kernel<S, kCopy, kOrder, kSchedule, kGroups>
      <<<grid, kGroups * kThreads, kDqBytes, stream>>>(dqkv_s, qkv_s, dout_s, lse, delta, T, C, NH, scale);
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
  if (options.backward_warpgroups != 1 &&
      (options.backward_warpgroups != 2 || options.dq != FlashDq::kSeparateWalk)) {
    throw std::invalid_argument("flash_attention_mma_backward: backward_warpgroups is " +
                                std::to_string(options.backward_warpgroups) +
                                "; 1, or 2 with dQ in a walk of its own");
  }
  if (options.dq == FlashDq::kInKeyWalk) {
    const DqSums sums = start_dq_sums(dq_sums, B, T, NH, stream);
    with_policies(qkv.storage(), options.copy, [&](auto policy, auto copying) {
      using S = decltype(policy);
      constexpr TileCopy kCopy = decltype(copying)::value;
      constexpr FlashBlockOrder kByTicket = FlashBlockOrder::kHeadByHead;  // the grid's shape; tickets order it
      constexpr WarpgroupSchedule kInTurn = WarpgroupSchedule::kInTurn;
      constexpr std::size_t kBytes = dkdv_shared_bytes(FlashDq::kInKeyWalk, kInTurn, 1);
      CUDA_CHECK(cudaFuncSetAttribute(wgmma_dkdv_kernel<S, kCopy, FlashDq::kInKeyWalk, kByTicket, kInTurn, 1>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kBytes)));
      wgmma_dkdv_kernel<S, kCopy, FlashDq::kInKeyWalk, kByTicket, kInTurn, 1>
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
    constexpr WarpgroupSchedule kInTurn = WarpgroupSchedule::kInTurn, kOverlap = WarpgroupSchedule::kOverlapped;
    const bool two = options.backward_warpgroups == 2;
    if (!overlapped && !two) {
      launch_separate_walks<S, kCopy, kOrder, kInTurn, 1>(dqkv_s, qkv_s, dout_s, lse, delta, B, T, C, NH, scale,
                                                          stream);
    } else if (!overlapped) {
      launch_separate_walks<S, kCopy, kOrder, kInTurn, 2>(dqkv_s, qkv_s, dout_s, lse, delta, B, T, C, NH, scale,
                                                          stream);
    } else if constexpr (kCopy == TileCopy::kAsynchronous) {  // checked above: no overlapped kernels to build else
      if (two) {
        launch_separate_walks<S, kCopy, kOrder, kOverlap, 2>(dqkv_s, qkv_s, dout_s, lse, delta, B, T, C, NH, scale,
                                                             stream);
      } else {
        launch_separate_walks<S, kCopy, kOrder, kOverlap, 1>(dqkv_s, qkv_s, dout_s, lse, delta, B, T, C, NH, scale,
                                                             stream);
      }
    }
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trident::kernels::cuda
