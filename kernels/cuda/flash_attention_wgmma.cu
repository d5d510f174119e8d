// Flash attention's forward on Hopper's warpgroup products (FlashProducts::kWarpgroup,
// not the default: untimed), hs = 64: the mma.sync forward (flash_attention_mma.cu) with its two
// products per key tile made by wgmma (kernels/cuda/warpgroup_mma.cuh) instead of 64 mma.sync a
// warp. One block is one warpgroup: 4 warps, 64 queries, each warp 16 rows (the accumulators'
// layout is mma.sync's, so the softmax below is the mma.sync forward's, line for line).
//   S = Q K^T:  A = the Q tile, B = the K tile, both in shared memory, K-major (4 k-steps);
//   O += P V:   A = P in registers (each warp its 16 rows, the accumulator turned into A
//               fragments in registers as before), B = the V tile, MN-major (its rows are k).
// Why it may be faster: each mma.sync loads its B fragment into each warp's registers from
// shared memory (256 bytes an instruction, the 4 warps 4 times over), where wgmma reads B once
// for the warpgroup, from shared memory directly (warpgroup_mma.cuh says more). What it does not
// do yet (FlashAttention-3 does): overlap one tile's softmax with the next tile's products (each
// product group is waited for at once here), producer warps with TMA, 128 queries a block.
// Those come after a sitting has timed this against the mma.sync forward
// (perf/kernels/attention_forward) and WarpgroupMatrixProducts has passed on the GPU.
//
// The tiles live in shared memory with the 128-byte swizzle, copied and made visible to wgmma
// as flash_wgmma_tiles.cuh says. Same arithmetic as the mma.sync forward at 16 rows a warp (each
// score a sum over k in 16-wide steps, in order), so on the emulation the same bits; on a GPU the
// tensor cores' order inside a step is theirs, so tests/gpu holds the two within the format's
// rounding (FlashMmaOptions.Warpgroup*).
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/cuda/cuda_check.h"          // CUDA_CHECK_LAUNCH
#include "kernels/cuda/flash_attention_mma.cuh"  // FlashMmaOptions
#include "kernels/cuda/flash_wgmma_tiles.cuh"  // swizzled tiles, issue_scores/accumulate, Place, softmax helpers

namespace trident::kernels::cuda {

namespace {

using namespace flash_wgmma;

// Q, then K and V two buffers each, with 1024 bytes to align them: 41,984 bytes.
struct alignas(16) WarpgroupForwardShared {
  uint16_t elements[5 * kSwizzledTileElements + wg::kTileAlignment / sizeof(uint16_t)];
};

template <class S, TileCopy kCopy, FlashBlockOrder kOrder>
__global__ void __launch_bounds__(kThreads)
    wgmma_forward_kernel(uint16_t* __restrict__ out, float* __restrict__ lse, const uint16_t* __restrict__ qkv, int T,
                         int C, int NH, float scale) {
  __shared__ WarpgroupForwardShared shared;
  uint16_t* const q_tile = wg::align_tiles(shared.elements);
  uint16_t* const k_tiles = q_tile + kSwizzledTileElements;      // two buffers
  uint16_t* const v_tiles = q_tile + 3 * kSwizzledTileElements;  // two buffers
  const Place at = place<kOrder>();
  const int q0 = query_tile_of<kOrder>(at) * kTile;
  const int h = at.h, b = at.b, tid = at.tid, warp = at.warp, g = at.g, t4 = at.t4;
  auto load_keys = [&](int k0, int slot) {
    load_swizzled_key_tile<kCopy>(k_tiles + slot * kSwizzledTileElements, v_tiles + slot * kSwizzledTileElements, qkv,
                                  b, h, k0, T, C, tid);
  };
  load_swizzled_tile<kCopy>(q_tile, qkv + qkv_index(0, 0, flash::kPartQ, h, T, C), 3 * static_cast<std::size_t>(C),
                            b, q0, T, tid);
  load_keys(0, 0);

  const int row[2] = {q0 + 16 * warp + g, q0 + 16 * warp + g + 8};
  const float scale_log2 = scale * kLog2e;
  float m[2] = {-INFINITY, -INFINITY};  // running row max, log2 units
  float l[2] = {0.0f, 0.0f};            // this lane's part of the running row sum
  float o[8][4] = {};

  // One key tile of the walk (masked: the causal and end tests, for the diagonal tile and a
  // last, partial one). Every warp takes part in every tile, even one whose rows all lie past T:
  // the products belong to the whole warpgroup (such rows see finite scores, never stored).
  const int last_query = min(q0 + kTile, T) - 1;
  auto key_tile = [&](int k0, int slot, auto masked) {
    wait_for_swizzled_tiles<kCopy>();  // this key tile is whole; the other buffer is free
    if (k0 + kTile <= last_query) load_keys(k0 + kTile, slot ^ 1);
    const uint16_t* k_tile = k_tiles + slot * kSwizzledTileElements;
    const uint16_t* v_tile = v_tiles + slot * kSwizzledTileElements;

    float s[8][4] = {};  // overwritten by the first product (not accumulated into)
    wg::fence_operands(s);
    wg::fence();
    issue_scores<S>(s, q_tile, k_tile);
    wg::commit();
    wg::wait<0>();
    wg::fence_operands(s);

    if constexpr (decltype(masked)::value) {
      for (int j = 0; j < 8; j++) {
        for (int i = 0; i < 4; i++) {
          const int key = k0 + fragment_column(j, i, t4);
          if (key > row[i / 2] || key >= T) s[j][i] = -INFINITY;
        }
      }
    }
    float tile_max[2] = {-INFINITY, -INFINITY};
    for (int j = 0; j < 8; j++) {
      for (int i = 0; i < 4; i++) tile_max[i / 2] = fmaxf(tile_max[i / 2], s[j][i]);
    }
    float m_use[2];
    for (int r = 0; r < 2; r++) {
      const float m_new = fmaxf(m[r], quad_max(tile_max[r]) * scale_log2);
      m_use[r] = m_new == -INFINITY ? 0.0f : m_new;
      const float correction = exp2_ftz(m[r] - m_use[r]);
      m[r] = m_new;
      l[r] *= correction;
      for (int j = 0; j < 8; j++) {
        o[j][2 * r] *= correction;
        o[j][2 * r + 1] *= correction;
      }
    }
    for (int j = 0; j < 8; j++) {
      for (int i = 0; i < 4; i++) {
        s[j][i] = exp2_ftz(fmaf(s[j][i], scale_log2, -m_use[i / 2]));
        l[i / 2] += s[j][i];
      }
    }

    uint32_t pa[4][4];
    accumulator_as_fragments<S>(pa, s);
    wg::fence_operands(o);
    wg::fence();  // o was rescaled above: its registers are ready for the products
    issue_accumulate<S>(o, pa, v_tile);
    wg::commit();
    wg::wait<0>();
    wg::fence_operands(o);
  };
  int k0 = 0, slot = 0;
  for (; k0 < q0; k0 += kTile, slot ^= 1) key_tile(k0, slot, std::false_type{});
  for (; k0 <= last_query; k0 += kTile, slot ^= 1) key_tile(k0, slot, std::true_type{});

  for (int r = 0; r < 2; r++) {
    const float sum = quad_sum(l[r]);
    if (row[r] >= T) continue;
    store_accumulator_row<S>(out + row_index(b, row[r], h, T, C), o, r, t4, 1.0f / sum);
    if (t4 == 0) lse[stat_index(b, h, row[r], T, NH)] = m[r] * kLn2 + logf(sum);
  }
}

}  // namespace

bool flash_attention_wgmma_available() {
#if defined(TRIDENT_CUDA_EMULATION)
  return true;  // the host model (warpgroup_mma.cuh)
#elif defined(TRIDENT_HOPPER_FEATURES)
  int device = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major == 9 && minor == 0;
#else
  return false;  // no sm_90a code in this build
#endif
}

void flash_attention_wgmma_forward(ActPtr out, float* lse, ConstActPtr qkv, int B, int T, int C, int NH, float scale,
                                   cudaStream_t stream, const FlashMmaOptions& options) {
  auto* out_s = static_cast<uint16_t*>(out.get());
  const auto* qkv_s = static_cast<const uint16_t*>(qkv.get());
  with_kernel_choices(qkv.storage(), options.copy, options.block_order, [&](auto policy, auto copying, auto ordering) {
    using Order = decltype(ordering);
    wgmma_forward_kernel<decltype(policy), decltype(copying)::value, Order::value>
        <<<tile_grid(B, T, NH, Order::value), kThreads, 0, stream>>>(out_s, lse, qkv_s, T, C, NH, scale);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trident::kernels::cuda
