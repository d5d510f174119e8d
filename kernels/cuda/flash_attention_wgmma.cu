// Flash attention's forward on Hopper's warpgroup products (FlashProducts::kWarpgroup,
// not the default: untimed), hs = 64: the mma.sync forward (flash_attention_mma.cu) with its two
// products per key tile made by wgmma (kernels/cuda/warpgroup_mma.cuh) instead of 64 mma.sync a
// warp. A block is one warpgroup (4 warps, 64 queries, each warp 16 rows; the accumulators'
// layout is mma.sync's, so the softmax below is the mma.sync forward's, line for line), or two
// (FlashMmaOptions::forward_warpgroups = 2: 128 queries sharing each K and V tile, as the mma.sync
// forward's default 32 rows a warp shares them; WarpgroupRows below).
//   S = Q K^T:  A = the Q tile, B = the K tile, both in shared memory, K-major (4 k-steps);
//   O += P V:   A = P in registers (each warp its 16 rows, the accumulator turned into A
//               fragments in registers as before), B = the V tile, MN-major (its rows are k).
// Why it may be faster: each mma.sync loads its B fragment into each warp's registers from
// shared memory (256 bytes an instruction, the 4 warps 4 times over), where wgmma reads B once
// for the warpgroup, from shared memory directly (warpgroup_mma.cuh says more). Two schedules
// (FlashMmaOptions::forward_schedule): each product group waited for at once, or one tile's
// softmax beside the previous tile's P V (wgmma_forward_overlapped_kernel, below). What it does not
// do yet (FlashAttention-3 does): producer warps with TMA, two warpgroups taking turns by named
// barriers. Those come after a sitting has timed these against the mma.sync forward
// (perf/kernels/attention_forward) and WarpgroupMatrixProducts has passed on the GPU.
//
// The tiles live in shared memory with the 128-byte swizzle, copied and made visible to wgmma
// as flash_wgmma_tiles.cuh says. Same arithmetic as the mma.sync forward at 16 rows a warp (each
// score a sum over k in 16-wide steps, in order), so on the emulation the same bits; on a GPU the
// tensor cores' order inside a step is theirs, so tests/gpu holds the two within the format's
// rounding (FlashMmaOptions.Warpgroup*).
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"          // CUDA_CHECK_LAUNCH
#include "kernels/cuda/flash_attention_mma.cuh"  // FlashMmaOptions
#include "kernels/cuda/flash_wgmma_tiles.cuh"  // swizzled tiles, issue_scores/accumulate, Place, softmax helpers

namespace trident::kernels::cuda {

namespace {

using namespace flash_wgmma;

// One key tile's online softmax on its scores s (this warp's 16 rows; kMasked: the causal and end
// tests, for the diagonal tile and a last, partial one): the running max m and the lane's part of
// the running sum l move on, s becomes P, and correction[r] is what row r's output accumulators
// must be multiplied by before this tile's P V is added (rescale_rows).
template <bool kMasked>
__device__ __forceinline__ void online_softmax_tile(float (&s)[8][4], float (&m)[2], float (&l)[2],
                                                    float (&correction)[2], int k0, const int (&row)[2], int T,
                                                    int t4, float scale_log2) {
  if constexpr (kMasked) {
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
    correction[r] = exp2_ftz(m[r] - m_use[r]);
    m[r] = m_new;
    l[r] *= correction[r];
  }
  for (int j = 0; j < 8; j++) {
    for (int i = 0; i < 4; i++) {
      s[j][i] = exp2_ftz(fmaf(s[j][i], scale_log2, -m_use[i / 2]));
      l[i / 2] += s[j][i];
    }
  }
}

// o's rows times their corrections (online_softmax_tile).
__device__ __forceinline__ void rescale_rows(float (&o)[8][4], const float (&correction)[2]) {
  for (int r = 0; r < 2; r++) {
    for (int j = 0; j < 8; j++) {
      o[j][2 * r] *= correction[r];
      o[j][2 * r + 1] *= correction[r];
    }
  }
}

// The end of both schedules: this warp's rows of O / l into out and their L = m ln 2 + ln l.
template <class S>
__device__ __forceinline__ void store_rows(uint16_t* out, float* lse, const float (&o)[8][4], const float (&m)[2],
                                           const float (&l)[2], const int (&row)[2], int b, int h, int T, int C,
                                           int NH, int t4) {
  for (int r = 0; r < 2; r++) {
    const float sum = quad_sum(l[r]);
    if (row[r] >= T) continue;
    store_accumulator_row<S>(out + row_index(b, row[r], h, T, C), o, r, t4, 1.0f / sum);
    if (t4 == 0) lse[stat_index(b, h, row[r], T, NH)] = m[r] * kLn2 + logf(sum);
  }
}

// A block of kGroups warpgroups (1, or 2: FlashMmaOptions::forward_warpgroups) takes 64 kGroups
// queries; warpgroup w the 64 from q0 + 64 w, each warp of it 16 rows, every warpgroup walking
// the block's key tiles from the same shared K and V buffers, read from memory once for all.
// With two, warpgroup 0 also walks key tile q0 + 64, which lies wholly after its rows: every
// score masked, so P is zero, the correction 1 and O, m and l keep their bits (each row has
// seen its own key by then: m is finite); one tile in about 17 more work at T = 1024, where a
// branch would leave a warpgroup's products out of the block's straight line (WarpgroupRows,
// flash_wgmma_tiles.cuh).

// Dynamic shared memory (opt-in past 48 KB): the Q tiles, K and V two buffers each, with 1024
// bytes to align them: 41,984 bytes (one warpgroup), 50,176 (two).
// Two warpgroups ask ptxas for 2 blocks an SM (128 registers: left to itself it took 132 in the
// overlapped kernel, one block of 8 warps an SM); one warpgroup asks nothing (0), as a minimum of
// 1 or 2 blocks made ptxas take 152 to 168 registers (sm_90a, 2026-11-24). ptxas, sm_90a, with
// cp.async: one warpgroup 128 in turn and overlapped (its counts before this option), two 128 in
// turn and 125 overlapped, no spills, no C7519.
template <int kGroups>
constexpr std::size_t kInTurnSharedBytes = QueryTileBuffers<TileCopy::kAsynchronous, kGroups>::shared_bytes(2);

template <class S, TileCopy kCopy, FlashBlockOrder kOrder, int kGroups>
__global__ void __launch_bounds__(kGroups * kThreads, kGroups == 2 ? 2 : 0)
    wgmma_forward_kernel(uint16_t* __restrict__ out, float* __restrict__ lse, const uint16_t* __restrict__ qkv, int T,
                         int C, int NH, float scale) {
  extern __shared__ float in_turn_shared[];  // kInTurnSharedBytes<kGroups>
  const Place at = place<kOrder>();
  const WarpgroupRows rows = warpgroup_rows<kGroups>(at, query_tile_of<kOrder>(at), T);
  const int q0 = rows.q0;
  const int h = at.h, b = at.b, tid = at.tid, t4 = at.t4;
  const QueryTileBuffers<kCopy, kGroups> tiles(reinterpret_cast<uint16_t*>(in_turn_shared), 2, qkv, b, h, T, C, tid);
  tiles.start(q0);
  const uint16_t* q_tile = tiles.q_tile_of(rows.group);

  const int(&row)[2] = rows.row;
  const float scale_log2 = scale * kLog2e;
  float m[2] = {-INFINITY, -INFINITY};  // running row max, log2 units
  float l[2] = {0.0f, 0.0f};            // this lane's part of the running row sum
  float o[8][4] = {};

  // One key tile of the walk (masked: the causal and end tests, for the diagonal tile and a
  // last, partial one). Every warp takes part in every tile, even one whose rows all lie past T:
  // the products belong to the whole warpgroup (such rows see finite scores, never stored).
  const int last_query = rows.last_query;
  auto key_tile = [&](int k0, int slot, auto masked) {
    wait_for_swizzled_tiles<kCopy>();  // this key tile is whole; the other buffer is free
    if (k0 + kTile <= last_query) tiles.load_keys(k0 + kTile, slot ^ 1);

    float s[8][4] = {};  // overwritten by the first product (not accumulated into)
    wg::fence_operands(s);
    wg::fence();
    issue_scores<S>(s, q_tile, tiles.k_tile(slot));
    wg::commit();
    wg::wait<0>();
    wg::fence_operands(s);

    float correction[2];
    online_softmax_tile<decltype(masked)::value>(s, m, l, correction, k0, row, T, t4, scale_log2);
    rescale_rows(o, correction);

    uint32_t pa[4][4];
    accumulator_as_fragments<S>(pa, s);
    wg::fence_operands(o);
    wg::fence();  // o was rescaled above: its registers are ready for the products
    issue_accumulate<S>(o, pa, tiles.v_tile(slot));
    wg::commit();
    wg::wait<0>();
    wg::fence_operands(o);
  };
  int k0 = 0, slot = 0;
  for (; k0 < q0; k0 += kTile, slot ^= 1) key_tile(k0, slot, std::false_type{});
  for (; k0 <= last_query; k0 += kTile, slot ^= 1) key_tile(k0, slot, std::true_type{});

  store_rows<S>(out, lse, o, m, l, row, b, h, T, C, NH, t4);
}

// WarpgroupSchedule::kOverlapped: FlashAttention-3's overlap within the warpgroup. Key tile j's
// scores S_j = Q K_j^T are issued with the previous tile's O += P_{j-1} V_{j-1} behind them, the
// softmax of S_j runs as soon as S_j is done (wait<1>) while P V is still in flight, and O is
// rescaled by tile j's correction once P V is done (wait<0>). So O still goes
// O_j = O_{j-1} c_j + P_j V_j, each step the in-turn kernel's: the same bits. P V of tile j-1
// reads V_{j-1} until the wait<0> of tile j, so the tiles take three buffers (tile j in j % 3):
// the barrier that opens tile j follows every warp's wait<0> of tile j - 1, after which buffer
// (j + 1) % 3, tile j - 2's, is free for tile j + 1's copy. Dynamic shared memory (opt-in):
// the Q tiles and 3 K and V buffers, 58,368 bytes (one warpgroup), 66,560 (two).
constexpr int kOverlapBuffers = 3;
template <int kGroups>
constexpr std::size_t kOverlappedSharedBytes =
    QueryTileBuffers<TileCopy::kAsynchronous, kGroups>::shared_bytes(kOverlapBuffers);

template <class S, TileCopy kCopy, FlashBlockOrder kOrder, int kGroups>
__global__ void __launch_bounds__(kGroups * kThreads, kGroups == 2 ? 2 : 0)
    wgmma_forward_overlapped_kernel(uint16_t* __restrict__ out, float* __restrict__ lse,
                                    const uint16_t* __restrict__ qkv, int T, int C, int NH, float scale) {
  extern __shared__ float overlap_shared[];  // kOverlappedSharedBytes<kGroups>
  const Place at = place<kOrder>();
  const WarpgroupRows rows = warpgroup_rows<kGroups>(at, query_tile_of<kOrder>(at), T);
  const int q0 = rows.q0;
  const int h = at.h, b = at.b, tid = at.tid, t4 = at.t4;
  const QueryTileBuffers<kCopy, kGroups> tiles(reinterpret_cast<uint16_t*>(overlap_shared), kOverlapBuffers, qkv, b,
                                               h, T, C, tid);
  tiles.start(q0);
  const uint16_t* q_tile = tiles.q_tile_of(rows.group);

  const int(&row)[2] = rows.row;
  const float scale_log2 = scale * kLog2e;
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
  float o[8][4] = {};
  uint32_t pa[4][4] = {};                         // P of the previous tile as A fragments, for its P V
  const uint16_t* previous_v = tiles.v_tile(0);  // that tile's V

  // One key tile of the walk: `masked` (std::true_type) as in the in-turn kernel; `behind`
  // (std::true_type for every tile but the first) issues the previous tile's P V behind the
  // scores. Compile-time choices, so that no branch separates the products (a branch between
  // them makes ptxas wait for the warpgroup there, its info C7519).
  const int last_query = rows.last_query;
  auto key_tile = [&](int k0, int slot, auto masked, auto behind) {
    constexpr bool kBehind = decltype(behind)::value;
    wait_for_swizzled_tiles<kCopy>();  // tile j whole; every warp past tile j - 1's wait<0>
    if (k0 + kTile <= last_query) tiles.load_keys(k0 + kTile, (slot + 1) % kOverlapBuffers);

    float s[8][4] = {};  // overwritten by the first product (not accumulated into)
    wg::fence_operands(s);
    wg::fence_operands(o);
    wg::fence();  // o rescaled and pa written by the previous tile: ready for the products
    issue_scores<S>(s, q_tile, tiles.k_tile(slot));
    wg::commit();
    if constexpr (kBehind) {
      issue_accumulate<S>(o, pa, previous_v);
      wg::commit();
      wg::wait<1>();  // S_j done; P_{j-1} V_{j-1} may still run
    } else {
      wg::wait<0>();
    }
    wg::fence_operands(s);

    float correction[2];
    online_softmax_tile<decltype(masked)::value>(s, m, l, correction, k0, row, T, t4, scale_log2);

    if constexpr (kBehind) wg::wait<0>();  // P_{j-1} V_{j-1} done: o rescaled next, pa and V_{j-1} free
    wg::fence_operands(o);
    rescale_rows(o, correction);
    accumulator_as_fragments<S>(pa, s);
    previous_v = tiles.v_tile(slot);
  };
  walk_key_tiles_in_ring<kOverlapBuffers, kGroups>(q0, last_query, key_tile);
  // The last tile's P V.
  wg::fence_operands(o);
  wg::fence();
  issue_accumulate<S>(o, pa, previous_v);
  wg::commit();
  wg::wait<0>();
  wg::fence_operands(o);

  store_rows<S>(out, lse, o, m, l, row, b, h, T, C, NH, t4);
}

// The forward's launch for one set of choices (a function template, so that the launches name
// their kernels by template arguments alone, as the emulation's translation needs).
template <class S, TileCopy kCopy, FlashBlockOrder kOrder, int kGroups>
void launch_forward(uint16_t* out, float* lse, const uint16_t* qkv, int B, int T, int C, int NH, float scale,
                    cudaStream_t stream, WarpgroupSchedule schedule) {
  const dim3 grid = tile_grid(B, T, NH, kOrder, kGroups * kTile);
  if (schedule == WarpgroupSchedule::kOverlapped) {
    constexpr std::size_t kBytes = kOverlappedSharedBytes<kGroups>;
    CUDA_CHECK(cudaFuncSetAttribute(wgmma_forward_overlapped_kernel<S, kCopy, kOrder, kGroups>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kBytes)));
    wgmma_forward_overlapped_kernel<S, kCopy, kOrder, kGroups>
        <<<grid, kGroups * kThreads, kBytes, stream>>>(out, lse, qkv, T, C, NH, scale);
  } else {
    constexpr std::size_t kBytes = kInTurnSharedBytes<kGroups>;
    CUDA_CHECK(cudaFuncSetAttribute(wgmma_forward_kernel<S, kCopy, kOrder, kGroups>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kBytes)));
    wgmma_forward_kernel<S, kCopy, kOrder, kGroups>
        <<<grid, kGroups * kThreads, kBytes, stream>>>(out, lse, qkv, T, C, NH, scale);
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
  if (options.forward_warpgroups != 1 && options.forward_warpgroups != 2) {
    throw std::invalid_argument("flash_attention_mma_forward: forward_warpgroups is " +
                                std::to_string(options.forward_warpgroups) + ", not 1 or 2");
  }
  auto launch = [&](auto groups) {
    constexpr int kGroups = decltype(groups)::value;
    with_kernel_choices(qkv.storage(), options.copy, options.block_order,
                        [&](auto policy, auto copying, auto ordering) {
                          using S = decltype(policy);
                          constexpr TileCopy kCopy = decltype(copying)::value;
                          constexpr FlashBlockOrder kOrder = decltype(ordering)::value;
                          launch_forward<S, kCopy, kOrder, kGroups>(out_s, lse, qkv_s, B, T, C, NH, scale, stream,
                                                                    options.forward_schedule);
                        });
  };
  if (options.forward_warpgroups == 2) {
    launch(std::integral_constant<int, 2>{});
  } else {
    launch(std::integral_constant<int, 1>{});
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace trident::kernels::cuda
