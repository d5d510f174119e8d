// dQ in the key walk (FlashDq::kInKeyWalk): where the dK/dV walk's key tiles add their shares of
// dQ, in turn (kernels/cuda/ordered_turns.cuh), so that dQ has the same bits on every run. Shared
// by the mma.sync and wgmma backwards (flash_attention_mma_backward.cu,
// flash_attention_wgmma_backward.cu), whose accumulators have one layout: warp w holds the dQ
// share of queries [16 w, 16 w + 16) of the query tile.
//
// The order: per (batch, head) the last key tile takes the first ticket, so that for query tile i
// the diagonal's key tile (i) adds first (it stores the sums), then i - 1, ..., and key tile 0
// last, which writes dQ itself (scaled and rounded once). Each (query tile, warp) has a turn
// counter; every adder's predecessors took smaller tickets, so started before it, and a wait
// cannot deadlock (ordered_turns.cuh says why).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_check.h"       // CUDA_CHECK
#include "kernels/cuda/flash_mma_tiles.cuh"  // Place, tiles_per_head, store_pair, kTile, kWarps
#include "kernels/cuda/ordered_turns.cuh"  // turns::take_ticket, wait_for_turn, pass_turn, load_pair, store_pair
#include "kernels/cuda/warp_mma.cuh"       // mma::pack

namespace trident::kernels::cuda::flash_mma {

static_assert(kWarps == 4, "kernels::flash_attention_scratch_floats counts 4 dQ turn counters a query tile");

// The dQ sums [B, NH, T, 64] in fp32, a turn counter per (batch, head, query tile, warp), and the
// ticket counter that orders the blocks. Null pointers with FlashDq::kSeparateWalk.
struct DqSums {
  float* sums = nullptr;
  unsigned* turns = nullptr;
  unsigned* ticket = nullptr;
};

// The sums and counters carved from `work` (flash_attention_mma_dq_sums_floats(B, T, NH) floats),
// the counters zeroed on `stream` (the sums need no clearing: the diagonal's key tile stores
// before anyone adds).
inline DqSums start_dq_sums(float* work, int B, int T, int NH, cudaStream_t stream) {
  const std::size_t rows = static_cast<std::size_t>(B) * NH * T;
  const std::size_t tiles = static_cast<std::size_t>(B) * NH * ((T + kTile - 1) / kTile);
  auto* turns = reinterpret_cast<unsigned*>(work + rows * kHeadSize);
  const DqSums sums{work, turns, turns + tiles * kWarps};
  CUDA_CHECK(cudaMemsetAsync(sums.turns, 0, (tiles * kWarps + 1) * sizeof(unsigned), stream));
  return sums;
}

// The block's key tile from its ticket (one thread takes it into the shared `ticket`; the whole
// block calls this), and its head and batch element into `at`. The grid has kHeadByHead's shape.
__device__ __forceinline__ int key_tile_by_ticket(Place& at, unsigned& ticket, const DqSums& dq_sums, int NH) {
  if (at.tid == 0) ticket = turns::take_ticket(dq_sums.ticket);
  __syncthreads();
  const int head_tiles = tiles_per_head<FlashBlockOrder::kHeadByHead>();
  const int head = static_cast<int>(ticket / static_cast<unsigned>(head_tiles));
  at.h = head % NH;
  at.b = head / NH;
  return head_tiles - 1 - static_cast<int>(ticket % static_cast<unsigned>(head_tiles));
}

// This warp's dQ share of query tile [q0, q0 + 64) from key tile `tile` (dq: its 16 queries by the
// 64 channels, the accumulator layout) into the sums, in turn: the diagonal's key tile stores, the
// others add, key tile 0 writes dQ (times scale, rounded to S) into dqkv.
template <class S>
__device__ __forceinline__ void add_dq_share(const float (&dq)[8][4], const DqSums& dq_sums, uint16_t* dqkv,
                                             int tile, int q0, const Place& at, int T, int C, int NH, float scale) {
  const int b = at.b, h = at.h, warp = at.warp, lane = at.lane, g = at.g, t4 = at.t4;
  const int i = q0 / kTile;
  const bool first = tile == i, last = tile == 0;
  const std::size_t head = static_cast<std::size_t>(b) * NH + h;
  unsigned* turn = dq_sums.turns + (head * tiles_per_head<FlashBlockOrder::kHeadByHead>() + i) * kWarps + warp;
  if (!first) {
    if (lane == 0) turns::wait_for_turn(turn, static_cast<unsigned>(i - tile));
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
    if (lane == 0) turns::pass_turn(turn, static_cast<unsigned>(i - tile + 1));
  }
}

}  // namespace trident::kernels::cuda::flash_mma
