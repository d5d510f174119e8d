// The tile machinery of the flash kernels on Hopper's warpgroup products (wgmma,
// kernels/cuda/warpgroup_mma.cuh): flash_attention_wgmma.cu (the forward) and
// flash_attention_wgmma_backward.cu (dK/dV and dQ). Device code for those two files only; the
// rest (tile sizes, Place, the softmax's exp2, stores) is flash_mma_tiles.cuh's.
//
// One block is one warpgroup: 4 warps, each owning 16 rows of the block's 64, the accumulators'
// layout mma.sync's, so the kernels' fragment loops are those of the mma.sync kernels. Every
// product a flash attention makes at head size 64 takes one of three forms over 64 x 64 tiles:
//   scores:     acc = A B^T, both tiles K-major (their rows are acc's rows and columns, k along
//               them): S = Q K^T, dP = dO V^T, S^T = K Q^T, dP^T = V dO^T;
//   accumulate: acc += A B, A an accumulator turned into A fragments in registers, B a tile whose
//               rows are k (MN-major): O += P V, dV += P^T dO, dK += dS^T Q, dQ += dS K;
//   transposed: acc = A B, A from a tile holding A^T (MN-major), B MN-major: dQ's share dS K in
//               the dK/dV walk, from the dS^T the walk stores (FlashDq::kInKeyWalk).
// The same tile in shared memory serves several (K is B of S = Q K^T and of dQ += dS K): the
// descriptor, not the storage, says how it is read. tests/support/warpgroup_products.h checks
// the three forms against exact integers on a GPU and on the emulation.
//
// Tiles are copied by cp.async (or through registers) 16 bytes, one swizzle chunk, at a time into
// the 128-byte swizzled layout; after each wait and before the barrier, every thread's
// fence.proxy.async makes its copies visible to wgmma (which reads through the async proxy).
#pragma once

#include <cstdint>

#include "kernels/cuda/flash_mma_tiles.cuh"  // load_tile_rows, kTile, kHeadSize, TileCopy
#include "kernels/cuda/warpgroup_mma.cuh"    // wgmma::multiply_shared/registers, descriptors, fences

namespace trident::kernels::cuda::flash_wgmma {

using namespace flash_mma;
namespace wg = wgmma;

static_assert(wg::kTileRows == kTile && wg::kTileRowElements == kHeadSize, "a flash tile is a wgmma tile");
// A swizzled tile's elements and bytes (flash_mma::kTileElements counts the kLd-padded tiles).
constexpr int kSwizzledTileElements = wg::kTileElements;
constexpr std::size_t kSwizzledTileBytes = kSwizzledTileElements * sizeof(uint16_t);

// Rows [row0, row0 + 64) of a [B, T, ...] buffer (as load_tile) into a swizzled tile: 16 bytes
// (one swizzle chunk) a thread and step, kLoaders threads; rows at or past T are zeros.
template <TileCopy kCopy, int kLoaders = kThreads>
__device__ __forceinline__ void load_swizzled_tile(uint16_t* tile, const uint16_t* first, std::size_t stride, int b,
                                                   int row0, int T, int tid) {
  load_tile_rows<kCopy, kLoaders>(tile, [](int r, int c) { return wg::swizzled_offset(r, c); }, first, stride, b, row0,
                                  T, tid);
}

// K and V of key tile [k0, k0 + 64) into swizzled k_tile and v_tile (as load_key_tile).
template <TileCopy kCopy, int kLoaders = kThreads>
__device__ __forceinline__ void load_swizzled_key_tile(uint16_t* k_tile, uint16_t* v_tile, const uint16_t* qkv, int b,
                                                       int h, int k0, int T, int C, int tid) {
  const std::size_t stride = 3 * static_cast<std::size_t>(C);
  load_swizzled_tile<kCopy, kLoaders>(k_tile, qkv + qkv_index(0, 0, flash::kPartK, h, T, C), stride, b, k0, T, tid);
  load_swizzled_tile<kCopy, kLoaders>(v_tile, qkv + qkv_index(0, 0, flash::kPartV, h, T, C), stride, b, k0, T, tid);
}

// A query-tile block's tiles (the forward, dQ): its Q tiles (one a warpgroup, kGroups, each
// warpgroup's 64 queries), then its K and V buffers (`buffers` of each, key tile k0 into buffer
// `slot` by load_keys), all on `shared` aligned for wgmma; the block's kGroups warpgroups share
// the copies. Starting copies Q of queries [q0, q0 + 64 kGroups) and key tile 0 into buffer 0.
template <TileCopy kCopy, int kGroups = 1>
struct QueryTileBuffers {
  static constexpr int kLoaders = kGroups * kThreads;
  uint16_t* q_tile;  // warpgroup 0's; q_tile_of(g) for the others
  uint16_t* k_tiles;
  uint16_t* v_tiles;
  const uint16_t* qkv;
  int b, h, T, C, tid;

  // The dynamic shared memory of a block with `buffers` K and V buffers.
  static constexpr std::size_t shared_bytes(int buffers) {
    return (kGroups + 2 * static_cast<std::size_t>(buffers)) * kSwizzledTileBytes +
           static_cast<std::size_t>(wg::kTileAlignment);
  }

  __device__ __forceinline__ QueryTileBuffers(uint16_t* shared, int buffers, const uint16_t* qkv_, int b_, int h_,
                                              int T_, int C_, int tid_)
      : q_tile(wg::align_tiles(shared)),
        k_tiles(q_tile + kGroups * kSwizzledTileElements),
        v_tiles(k_tiles + buffers * kSwizzledTileElements),
        qkv(qkv_), b(b_), h(h_), T(T_), C(C_), tid(tid_) {}
  __device__ __forceinline__ const uint16_t* q_tile_of(int group) const {
    return q_tile + group * kSwizzledTileElements;
  }
  __device__ __forceinline__ const uint16_t* k_tile(int slot) const { return k_tiles + slot * kSwizzledTileElements; }
  __device__ __forceinline__ const uint16_t* v_tile(int slot) const { return v_tiles + slot * kSwizzledTileElements; }
  __device__ __forceinline__ void load_keys(int k0, int slot) const {
    load_swizzled_key_tile<kCopy, kLoaders>(k_tiles + slot * kSwizzledTileElements,
                                            v_tiles + slot * kSwizzledTileElements, qkv, b, h, k0, T, C, tid);
  }
  __device__ __forceinline__ void start(int q0) const {
    for (int g = 0; g < kGroups; g++) {
      load_swizzled_tile<kCopy, kLoaders>(q_tile + g * kSwizzledTileElements,
                                          qkv + qkv_index(0, 0, flash::kPartQ, h, T, C),
                                          3 * static_cast<std::size_t>(C), b, q0 + g * kTile, T, tid);
    }
    load_keys(0, 0);
  }
};

// A thread's warpgroup in a block of kGroups, and its warp within that warpgroup; with one
// warpgroup, 0 and the block's warp, so that the compiler folds them (tid / 128 it cannot: the
// wgmma backward's one-warpgroup kernels took 10 to 30 more registers with it).
template <int kGroups>
__device__ __forceinline__ int block_warpgroup(const Place& at) {
  return kGroups == 1 ? 0 : at.tid / kThreads;
}
template <int kGroups>
__device__ __forceinline__ int warpgroup_warp(const Place& at) {
  return kGroups == 1 ? at.warp : at.warp % kWarps;
}

// Where a thread's rows are in a query-tile block of kGroups warpgroups (the forward, dQ): the
// block takes queries [q0, q0 + 64 kGroups), warpgroup w those from q0 + 64 w, each of its warps
// 16 rows; the block's key walk runs to its last query, so each warpgroup but the last also walks
// tiles wholly after its own rows (every score masked: P and dS zero, its sums' bits kept).
struct WarpgroupRows {
  int q0;          // the block's first query
  int group;       // this thread's warpgroup
  int row[2];      // this lane's query rows (its warp's g and g + 8)
  int last_query;  // the block's last query row before T
};
template <int kGroups>
__device__ __forceinline__ WarpgroupRows warpgroup_rows(const Place& at, int query_tile, int T) {
  WarpgroupRows r;
  r.q0 = query_tile * kGroups * kTile;
  r.group = block_warpgroup<kGroups>(at);
  const int first = r.q0 + kTile * r.group + 16 * warpgroup_warp<kGroups>(at) + at.g;
  r.row[0] = first;
  r.row[1] = first + 8;
  r.last_query = min(r.q0 + kGroups * kTile, T) - 1;
  return r;
}

// Until every thread's copies have landed and are visible to the warpgroup's products (the async
// proxy) and to every thread: wait, fence, barrier.
template <TileCopy kCopy>
__device__ __forceinline__ void wait_for_swizzled_tiles() {
  if constexpr (kCopy == TileCopy::kAsynchronous) async_copy::wait_all();
  wg::fence_shared_for_async();
  __syncthreads();
}

// Issues acc = A B^T (the scores form) over the 4 k-steps of head size 64, the first overwriting
// acc. The caller fences before (wg::fence) and commits and waits after: several products may
// share one group. Straight-line code between the products (no branch), so that ptxas need not
// wait for the warpgroup between them (warpgroup_mma.cuh, C7519).
template <class S>
__device__ __forceinline__ void issue_scores(float (&acc)[8][4], const uint16_t* a_tile, const uint16_t* b_tile) {
#pragma unroll
  for (int ks = 0; ks < 4; ks++) {
    wg::multiply_shared<S, wg::Major::kK, wg::Major::kK>(acc, wg::descriptor<wg::Major::kK>(a_tile, ks),
                                                         wg::descriptor<wg::Major::kK>(b_tile, ks), ks > 0);
  }
}

// Issues acc += A B (the accumulate form): a[ks] the A fragments of k-step ks (accumulator_as_a,
// written before the caller's wg::fence), B the MN-major tile whose rows are k.
template <class S>
__device__ __forceinline__ void issue_accumulate(float (&acc)[8][4], const uint32_t (&a)[4][4],
                                                 const uint16_t* b_tile) {
#pragma unroll
  for (int ks = 0; ks < 4; ks++) {
    wg::multiply_registers<S, wg::Major::kMN>(acc, a[ks], wg::descriptor<wg::Major::kMN>(b_tile, ks), true);
  }
}

// Issues acc = A B (the transposed form: dQ's share dS K in the dK/dV walk), A from a tile that
// holds it transposed (its rows are k: MN-major; dS^T), B an MN-major tile; the first k-step
// overwrites acc.
template <class S>
__device__ __forceinline__ void issue_transposed_by_rows(float (&acc)[8][4], const uint16_t* at_tile,
                                                         const uint16_t* b_tile) {
#pragma unroll
  for (int ks = 0; ks < 4; ks++) {
    wg::multiply_shared<S, wg::Major::kMN, wg::Major::kMN>(acc, wg::descriptor<wg::Major::kMN>(at_tile, ks),
                                                           wg::descriptor<wg::Major::kMN>(b_tile, ks), ks > 0);
  }
}

// An accumulator (this warp's 16 rows by 64 columns) as the A fragments of the 4 k-steps of the
// next product, rounded to S.
template <class S>
__device__ __forceinline__ void accumulator_as_fragments(uint32_t (&a)[4][4], const float (&acc)[8][4]) {
  for (int ks = 0; ks < 4; ks++) accumulator_as_a<S>(a[ks], acc, ks);
}

}  // namespace trident::kernels::cuda::flash_wgmma
