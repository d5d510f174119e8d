// Flash attention on the tensor cores for 16-bit buffers, hs = 64, in the manner of
// FlashAttention-2 (Dao, 2023): each warp owns 16 rows of a 64-row tile and keeps its scores,
// probabilities and accumulators in mma.sync's register fragments (kernels/cuda/warp_mma.cuh),
// so that the T x T matrices exist only 16 x 64 at a time, in registers. (The forward takes 32
// rows a warp of a 128-row tile by default, FlashMmaOptions: each K and V fragment then feeds
// two products; 4 to 10% faster on one H100 than 16 rows, which it may still be asked for.)
//
// Forward: one block of 4 warps per (64-query tile, head, batch element; 128 at 32 rows a warp), the last query tiles
// (the longest rows of key tiles) launched first: per head, or over all heads
// (FlashMmaOptions::block_order). Q's fragments are loaded once; per key tile of 64 keys at or
// below the diagonal, K and V go through shared memory and each warp computes
//   S = Q K^T (8 x 4 mma), the causal mask, the online softmax (row max over the 4 lanes that
//   share a row, by shuffles; scores in log2 units so that exp is one exp2), O *= exp(m_old -
//   m_new), then O += P V with P rounded to the storage format as the A operand (8 x 4 mma).
// At the end out = O / l (rounded once) and lse = m + log l over the unrounded probabilities.
//
// The backward: flash_attention_mma_backward.cu; the tiles, copies and fragment products both
// use: flash_mma_tiles.cuh.
#include "kernels/cuda/flash_attention_mma.cuh"

#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.h"       // CUDA_CHECK_LAUNCH
#include "kernels/cuda/flash_mma_tiles.cuh" // the tiles, copies and fragment products

namespace trident::kernels::cuda {

namespace {

using namespace flash_mma;

// The forward block's shared tiles, two buffers of each (tile j in buffer j % 2): 36,864 bytes,
// under the 48 KiB of static shared memory.
struct alignas(16) ForwardTiles {
  uint16_t k[2][kTileElements];  // buffer 1 holds Q first
  uint16_t v[2][kTileElements];
};

template <class S, TileCopy kCopy, int kRowSets, FlashBlockOrder kOrder>
__global__ void __launch_bounds__(kThreads)
    mma_forward_kernel(uint16_t* __restrict__ out, float* __restrict__ lse, const uint16_t* __restrict__ qkv, int T,
                       int C, int NH, float scale) {
  static_assert(kRowSets == 1 || kRowSets == 2, "16 or 32 query rows per warp: Q passes through buffer 1's two tiles");
  constexpr int kRows = kTile * kRowSets;  // the block's queries
  __shared__ ForwardTiles tiles;
  const Place at = place<kOrder>();
  const int q0 = query_tile_of<kOrder>(at) * kRows;
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
  if (options.forward_products == FlashProducts::kWarpgroup) {
    if (!flash_attention_wgmma_available()) {
      throw std::invalid_argument(
          "flash_attention_mma_forward: warpgroup products (wgmma) need a build for sm_90a (CMAKE_CUDA_ARCHITECTURES "
          "with 90) and a compute capability 9.0 GPU");
    }
    flash_attention_wgmma_forward(out, lse, qkv, B, T, C, NH, scale, stream, options);
    return;
  }
  auto* out_s = static_cast<uint16_t*>(out.get());
  const auto* qkv_s = static_cast<const uint16_t*>(qkv.get());
  with_kernel_choices(qkv.storage(), options.copy, options.block_order, [&](auto policy, auto copying, auto ordering) {
    using S = decltype(policy);
    using Copy = decltype(copying);
    using Order = decltype(ordering);
    if (options.forward_rows_per_warp == 32) {
      mma_forward_kernel<S, Copy::value, 2, Order::value>
          <<<tile_grid(B, T, NH, Order::value, 2 * kTile), kThreads, 0, stream>>>(out_s, lse, qkv_s, T, C, NH, scale);
    } else {
      mma_forward_kernel<S, Copy::value, 1, Order::value>
          <<<tile_grid(B, T, NH, Order::value), kThreads, 0, stream>>>(out_s, lse, qkv_s, T, C, NH, scale);
    }
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trident::kernels::cuda
