// LayerNorm: y = (x - mu) * rstd * w + b with mu = mean(x), rstd = 1/sqrt(var(x) + eps) per row,
// the CPU twin's math (kernels/cpu/layernorm.cpp).
//
// Two ways to spread the rows over threads (LayerNormRows, layernorm.cuh):
// - a warp per row (the default, rows up to kWarpRowMaxC): lane l holds the row's 16-byte packs
//   l, l + 32, ... in registers as fp32, so the row is read from memory once; the mean, then the
//   centred variance of those registers, each summed along the lane and then by a warp
//   butterfly (every lane gets the same bits); no shared memory, no barrier. Packs are loaded as
//   16 bytes when every buffer is aligned and C a whole number of packs, element by element
//   otherwise: the same values in the same order, so the same sums. The playground measured the
//   fp32 forward at 22.6 us against the block's 34.3 us (N = 8192, C = 768, H100;
//   docs/performance.md);
// - a block per row (kRowThreads threads striding over the C channels, any C): three passes
//   over the row in memory, the sums finished by block_sum.
// Both take the mean first and the centred variance second: accurate without a compensated sum.
// The fused residual variant writes the row's residual sum, then normalises it in the same
// threads: one launch and one pass over the rows instead of the elementwise add's and the
// LayerNorm's.
// Backward, with xhat = (x - mu) * rstd and g = w * dy:
//   dx += rstd * (g - mean(g) - xhat * mean(g * xhat))     row-local, as the forward's rows
//   dw += sum_rows dy * xhat,   db += sum_rows dy            column_sums.cuh: a two-stage
//                                                            reduction over row chunks (no
//                                                            atomics, deterministic)
// Splitting the row-local dx from the column sums dw/db keeps each kernel free of races. The
// other way (LayerNormParameterSums::kInRowWalk, layernorm.cuh) keeps them in one pass without
// races too: each warp adds into shared slots no other warp touches, and the block sums its warps
// after a barrier.
// Every kernel is templated on the storage of its activations and weights
// (kernels/stored_element.h): fp32, or bf16/fp16 buffers read as they are and stored rounded
// once; mean, rstd, dweight and dbias are fp32 in every storage. The fused residual variant
// stores the rounded sum and normalises what it stored, as the two separate calls would.
#include <algorithm>  // std::max
#include <cstddef>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>  // integral_constant

#include "kernels/cuda/block_reduce.cuh"  // block_sum, warp_reduce
#include "kernels/cuda/column_sums.cuh"   // add_layernorm_parameter_gradients, add_partial_sums_pair
#include "kernels/cuda/column_sums_math.h"  // columns::plan_chunks, pair_scratch_floats
#include "kernels/cuda/cuda_check.h"      // CUDA_CHECK, CUDA_CHECK_LAUNCH
#include "kernels/cuda/launch_shape.cuh"  // kRowThreads
#include "kernels/cuda/layernorm.cuh"
#include "kernels/cuda/vector_pack.h"  // Pack, load_pack, store_pack, starts_aligned
#include "kernels/stored_element.h"    // stored::with_policy, elements, common_storage

namespace trident::kernels::cuda {

namespace {

// Row n of the forward, by the whole block. Each thread reads x only at its own columns c =
// threadIdx.x + k * blockDim.x, so a row the same thread has just written needs no barrier.
template <class S, class E = typename S::Element>
__device__ void layernorm_forward_row(E* out, float* mean, float* rstd, const E* inp, const E* weight, const E* bias,
                                      int n, int C) {
  const E* x = inp + static_cast<std::size_t>(n) * C;
  E* y = out + static_cast<std::size_t>(n) * C;

  float sum = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) sum += S::load(x[c]);
  const float mu = block_sum(sum) / static_cast<float>(C);

  float sq = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const float d = S::load(x[c]) - mu;
    sq += d * d;
  }
  const float s = 1.0f / sqrtf(block_sum(sq) / static_cast<float>(C) + kLayerNormEps);

  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    y[c] = S::store((S::load(x[c]) - mu) * s * S::load(weight[c]) + S::load(bias[c]));
  }
  if (threadIdx.x == 0) {
    mean[n] = mu;
    rstd[n] = s;
  }
}

template <class S, class E = typename S::Element>
__global__ void layernorm_forward_kernel(E* out, float* mean, float* rstd, const E* inp, const E* weight,
                                         const E* bias, int C) {
  layernorm_forward_row<S>(out, mean, rstd, inp, weight, bias, blockIdx.x, C);
}

// residual = a + b on the row's columns (the same threads' columns as the normalisation), then
// the row's LayerNorm reading the residual just written.
template <class S, class E = typename S::Element>
__global__ void residual_layernorm_forward_kernel(E* residual, E* out, float* mean, float* rstd, const E* a,
                                                  const E* b, const E* weight, const E* bias, int C) {
  const std::size_t row = static_cast<std::size_t>(blockIdx.x) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    residual[row + c] = S::store(S::load(a[row + c]) + S::load(b[row + c]));
  }
  layernorm_forward_row<S>(out, mean, rstd, residual, weight, bias, blockIdx.x, C);
}

// dinp for one row per block.
template <class S, class E = typename S::Element>
__global__ void layernorm_backward_input_kernel(E* dinp, const E* dout, const E* inp, const E* weight,
                                                const float* mean, const float* rstd, int C) {
  const int n = blockIdx.x;
  const E* x = inp + static_cast<std::size_t>(n) * C;
  const E* dy = dout + static_cast<std::size_t>(n) * C;
  E* dx = dinp + static_cast<std::size_t>(n) * C;
  const float mu = mean[n];
  const float s = rstd[n];
  const float inv_c = 1.0f / static_cast<float>(C);

  float g_sum = 0.0f;
  float g_xhat_sum = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const float g = S::load(weight[c]) * S::load(dy[c]);
    g_sum += g;
    g_xhat_sum += g * (S::load(x[c]) - mu) * s;
  }
  const float g_mean = block_sum(g_sum) * inv_c;
  const float g_xhat_mean = block_sum(g_xhat_sum) * inv_c;

  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const float xhat = (S::load(x[c]) - mu) * s;
    dx[c] = S::store(S::load(dx[c]) + s * (S::load(weight[c]) * S::load(dy[c]) - g_mean - xhat * g_xhat_mean));
  }
}

// ---- a warp per row ------------------------------------------------------------------------------

inline constexpr int kWarpRowsPerBlock = 4;  // 128 threads: small blocks, as the backward's registers are many

// A lane's share of a row: the 16-byte packs lane, lane + 32, ... of the row, kValues values
// (kPacks whole packs). Pack p of lane l starts at column (l + 32 p) * kPack.
template <class E, int kValues>
struct LanePacks {
  static constexpr int kPack = Pack<E>::kCount;
  static constexpr int kPacks = kValues / kPack;
  static_assert(kValues % kPack == 0);
  __device__ static int first_column(int lane, int p) { return (lane + p * kWarpSize) * kPack; }
};

// The kPack values of row from column c0 as fp32, zero past C: one 16-byte load when
// `vectorized` (every row 16-byte aligned, C a whole number of packs), else value by value.
template <class S, class E>
__device__ void load_values(float* v, const E* row, int c0, int C, bool vectorized) {
  constexpr int kPack = Pack<E>::kCount;
  if (vectorized && c0 < C) {
    const Pack<E> pack = load_pack(row + c0);
#pragma unroll
    for (int i = 0; i < kPack; i++) v[i] = S::load(pack.values[i]);
  } else {
#pragma unroll
    for (int i = 0; i < kPack; i++) v[i] = c0 + i < C ? S::load(row[c0 + i]) : 0.0f;
  }
}

// Stores the kPack values v into row from column c0 (those before C), each rounded once.
template <class S, class E>
__device__ void store_values(E* row, const float* v, int c0, int C, bool vectorized) {
  constexpr int kPack = Pack<E>::kCount;
  if (vectorized && c0 < C) {
    Pack<E> pack;
#pragma unroll
    for (int i = 0; i < kPack; i++) pack.values[i] = S::store(v[i]);
    store_pack(row + c0, pack);
  } else {
#pragma unroll
    for (int i = 0; i < kPack; i++) {
      if (c0 + i < C) row[c0 + i] = S::store(v[i]);
    }
  }
}

// The lane's packs of row into v[kValues] as fp32, zero past C.
template <class S, int kValues, class E>
__device__ void load_lane_row(float (&v)[kValues], const E* row, int C, bool vectorized, int lane) {
  using Lane = LanePacks<E, kValues>;
#pragma unroll
  for (int p = 0; p < Lane::kPacks; p++) {
    load_values<S>(v + p * Lane::kPack, row, Lane::first_column(lane, p), C, vectorized);
  }
}

// Normalises the row the lanes hold in x into y, weight and bias read a pack at a time; lane 0
// saves mean[n] and rstd[n].
template <class S, int kValues, class E>
__device__ void normalize_lane_row(E* y, float* mean, float* rstd, const float (&x)[kValues], const E* weight,
                                   const E* bias, int n, int C, bool vectorized, int lane) {
  using Lane = LanePacks<E, kValues>;
  constexpr int kPack = Lane::kPack;
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kValues; k++) sum += x[k];  // zeros past C
  const float mu = warp_reduce(sum, SumOp{}) / static_cast<float>(C);

  float sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kValues; k++) {
    if (Lane::first_column(lane, k / kPack) + k % kPack < C) {  // a zero slot would add mu^2
      const float d = x[k] - mu;
      sq += d * d;
    }
  }
  const float s = 1.0f / sqrtf(warp_reduce(sq, SumOp{}) / static_cast<float>(C) + kLayerNormEps);

#pragma unroll
  for (int p = 0; p < Lane::kPacks; p++) {
    const int c0 = Lane::first_column(lane, p);
    if (c0 >= C) break;  // the lane's later packs start later still
    float w[kPack], b[kPack], out[kPack];
    load_values<S>(w, weight, c0, C, vectorized);
    load_values<S>(b, bias, c0, C, vectorized);
#pragma unroll
    for (int i = 0; i < kPack; i++) out[i] = (x[p * kPack + i] - mu) * s * w[i] + b[i];
    store_values<S>(y, out, c0, C, vectorized);
  }
  if (lane == 0) {
    mean[n] = mu;
    rstd[n] = s;
  }
}

// The warp's row, or -1 past the last row (the whole warp leaves together: its shuffles need
// all 32 lanes).
__device__ inline int warp_row(int N) {
  const int n = static_cast<int>(blockIdx.x) * kWarpRowsPerBlock + static_cast<int>(threadIdx.x) / kWarpSize;
  return n < N ? n : -1;
}

template <class S, int kValues, class E = typename S::Element>
__global__ void layernorm_forward_warp_kernel(E* out, float* mean, float* rstd, const E* inp, const E* weight,
                                              const E* bias, int N, int C, bool vectorized) {
  const int n = warp_row(N);
  if (n < 0) return;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const std::size_t row = static_cast<std::size_t>(n) * C;
  float x[kValues];
  load_lane_row<S>(x, inp + row, C, vectorized, lane);
  normalize_lane_row<S>(out + row, mean, rstd, x, weight, bias, n, C, vectorized, lane);
}

// residual = a + b, stored rounded; the lanes keep what they stored and normalise it.
template <class S, int kValues, class E = typename S::Element>
__global__ void residual_layernorm_forward_warp_kernel(E* residual, E* out, float* mean, float* rstd, const E* a,
                                                       const E* b, const E* weight, const E* bias, int N, int C,
                                                       bool vectorized) {
  using Lane = LanePacks<E, kValues>;
  constexpr int kPack = Lane::kPack;
  const int n = warp_row(N);
  if (n < 0) return;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const std::size_t row = static_cast<std::size_t>(n) * C;
  float x[kValues];
#pragma unroll
  for (int p = 0; p < Lane::kPacks; p++) {
    // The pack's reads of a and b come before its store: the residual may alias either.
    const int c0 = Lane::first_column(lane, p);
    float* r = x + p * kPack;
    float other[kPack];
    load_values<S>(r, a + row, c0, C, vectorized);
    load_values<S>(other, b + row, c0, C, vectorized);
#pragma unroll
    for (int i = 0; i < kPack; i++) r[i] = S::load(S::store(r[i] + other[i]));  // as layernorm_forward reads it
    store_values<S>(residual + row, r, c0, C, vectorized);  // nothing past C
  }
  normalize_lane_row<S>(out + row, mean, rstd, x, weight, bias, n, C, vectorized, lane);
}

// The warp's row n of the backward: dinp[n] += rstd * (g - mean(g) - xhat * mean(g * xhat)).
// With kSums, the lane also adds dy * xhat and dy of each value it holds into its own slots of
// dw_sums and db_sums: value k of the lane at [k * 32 + lane], so that the lanes of a warp touch
// 32 consecutive floats (no bank conflicts), and only this lane ever touches them.
template <class S, int kValues, bool kSums, class E>
__device__ void backward_lane_row(E* dinp, const E* dout, const E* inp, const E* weight, const float* mean,
                                  const float* rstd, int n, int C, bool vectorized, int lane, float* dw_sums,
                                  float* db_sums) {
  using Lane = LanePacks<E, kValues>;
  constexpr int kPack = Lane::kPack;
  const std::size_t row = static_cast<std::size_t>(n) * C;
  const float mu = mean[n];
  const float s = rstd[n];
  // xhat and g = w * dy, zero past C (x, dy and w load as zero there: g = 0, xhat = -mu * s,
  // and xhat enters the sums only times g or dy).
  float xhat[kValues], g[kValues];
  load_lane_row<S>(xhat, inp + row, C, vectorized, lane);
  load_lane_row<S>(g, dout + row, C, vectorized, lane);
  float g_sum = 0.0f;
  float g_xhat_sum = 0.0f;
#pragma unroll
  for (int p = 0; p < Lane::kPacks; p++) {
    float w[kPack];
    load_values<S>(w, weight, Lane::first_column(lane, p), C, vectorized);
#pragma unroll
    for (int i = 0; i < kPack; i++) {
      const int k = p * kPack + i;
      xhat[k] = (xhat[k] - mu) * s;
      if constexpr (kSums) {
        dw_sums[k * kWarpSize + lane] += g[k] * xhat[k];  // g is still dy here
        db_sums[k * kWarpSize + lane] += g[k];
      }
      g[k] *= w[i];
      g_sum += g[k];
      g_xhat_sum += g[k] * xhat[k];
    }
  }
  const float inv_c = 1.0f / static_cast<float>(C);
  const float g_mean = warp_reduce(g_sum, SumOp{}) * inv_c;
  const float g_xhat_mean = warp_reduce(g_xhat_sum, SumOp{}) * inv_c;

#pragma unroll
  for (int p = 0; p < Lane::kPacks; p++) {
    const int c0 = Lane::first_column(lane, p);
    if (c0 >= C) break;
    float dx[kPack];
    load_values<S>(dx, dinp + row, c0, C, vectorized);
#pragma unroll
    for (int i = 0; i < kPack; i++) {
      const int k = p * kPack + i;
      dx[i] += s * (g[k] - g_mean - xhat[k] * g_xhat_mean);
    }
    store_values<S>(dinp + row, dx, c0, C, vectorized);
  }
}

template <class S, int kValues, class E = typename S::Element>
__global__ void layernorm_backward_input_warp_kernel(E* dinp, const E* dout, const E* inp, const E* weight,
                                                     const float* mean, const float* rstd, int N, int C,
                                                     bool vectorized) {
  const int n = warp_row(N);
  if (n < 0) return;
  backward_lane_row<S, kValues, false>(dinp, dout, inp, weight, mean, rstd, n, C, vectorized,
                                       static_cast<int>(threadIdx.x) % kWarpSize, nullptr, nullptr);
}

// Bytes of a kInRowWalk block's shared sums: each warp's dw and db slots, kValues a lane.
constexpr std::size_t walk_shared_bytes(int values) {
  return static_cast<std::size_t>(kWalkWarps) * 2 * static_cast<std::size_t>(values) * kWarpSize * sizeof(float);
}

// LayerNormParameterSums::kInRowWalk: block r walks chunk r's rows, warp w the rows begin + w,
// begin + w + kWalkWarps, ... in order, each as layernorm_backward_input_warp_kernel with its sums;
// then thread t writes partial_dw[r, c] and partial_db[r, c] for columns c = t, t + blockDim, ...,
// the warps' sums added in warp order.
template <class S, int kValues, class E = typename S::Element>
__global__ void __launch_bounds__(kWalkWarps * kWarpSize)
    layernorm_backward_walk_kernel(E* dinp, float* partial_dw, float* partial_db, const E* dout, const E* inp,
                                   const E* weight, const float* mean, const float* rstd, int N, int C,
                                   int rows_per_chunk, bool vectorized) {
  constexpr int kPack = LanePacks<E, kValues>::kPack;
  constexpr int kWarpSlots = 2 * kValues * kWarpSize;  // a warp's dw slots, then its db slots
  extern __shared__ float walk_sums[];                // [kWalkWarps][kWarpSlots]
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize, lane = static_cast<int>(threadIdx.x) % kWarpSize;
  float* dw_sums = walk_sums + warp * kWarpSlots;
  float* db_sums = dw_sums + kValues * kWarpSize;
  for (int k = 0; k < kValues; k++) {  // the lane's own slots: no other thread reads them before the barrier
    dw_sums[k * kWarpSize + lane] = 0.0f;
    db_sums[k * kWarpSize + lane] = 0.0f;
  }
  const int chunk = static_cast<int>(blockIdx.x);
  const int begin = chunk * rows_per_chunk;
  const int end = min(N, begin + rows_per_chunk);
  for (int n = begin + warp; n < end; n += kWalkWarps) {
    backward_lane_row<S, kValues, true>(dinp, dout, inp, weight, mean, rstd, n, C, vectorized, lane, dw_sums,
                                        db_sums);
  }
  __syncthreads();
  for (int c = static_cast<int>(threadIdx.x); c < C; c += static_cast<int>(blockDim.x)) {
    // Column c is value k of lane l: c = (l + 32 p) kPack + i, k = p kPack + i.
    const int pack = c / kPack;
    const int slot = ((pack / kWarpSize) * kPack + c % kPack) * kWarpSize + pack % kWarpSize;
    float dw = 0.0f, db = 0.0f;
    for (int w = 0; w < kWalkWarps; w++) {
      dw += walk_sums[w * kWarpSlots + slot];
      db += walk_sums[w * kWarpSlots + kValues * kWarpSize + slot];
    }
    partial_dw[static_cast<std::size_t>(chunk) * C + c] = dw;
    partial_db[static_cast<std::size_t>(chunk) * C + c] = db;
  }
}

// How a warp-per-row launch covers N rows of C elements of E: values > 0 where they fit.
struct WarpRows {
  int values;       // per lane: warp_row_values_per_lane
  bool vectorized;  // 16-byte packs: every buffer aligned, C a whole number of packs
  dim3 grid, block;
};

template <class E>
WarpRows warp_rows(int N, int C, std::initializer_list<const void*> buffers) {
  WarpRows r{warp_row_values_per_lane(C, static_cast<int>(sizeof(E))), C % Pack<E>::kCount == 0,
             dim3((N + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock), dim3(kWarpRowsPerBlock * kWarpSize)};
  for (const void* p : buffers) r.vectorized = r.vectorized && starts_aligned(p);
  return r;
}

// The launch of a LayerNorm kernel on N rows of C elements of E in `buffers`: with rows =
// kWarpPerRow and rows that fit a warp, warp(std::integral_constant<int, values>{}, shape), the
// kernels' template argument from the runtime value; otherwise block(), a block per row.
template <class E, class WarpLaunch, class BlockLaunch>
void launch_rows(LayerNormRows rows, int N, int C, std::initializer_list<const void*> buffers, WarpLaunch warp,
                 BlockLaunch block) {
  const WarpRows shape = warp_rows<E>(N, C, buffers);
  if (rows != LayerNormRows::kWarpPerRow || shape.values == 0) {
    block();
    return;
  }
  switch (shape.values) {
    case 16: warp(std::integral_constant<int, 16>{}, shape); break;
    case 24: warp(std::integral_constant<int, 24>{}, shape); break;
    case 32: warp(std::integral_constant<int, 32>{}, shape); break;
    case 40: warp(std::integral_constant<int, 40>{}, shape); break;
    case 48: warp(std::integral_constant<int, 48>{}, shape); break;
    default: warp(std::integral_constant<int, 64>{}, shape); break;
  }
}

}  // namespace

void layernorm_forward(ActPtr out, float* mean, float* rstd, ConstActPtr inp, ConstActPtr weight, ConstActPtr bias,
                       int N, int C, cudaStream_t stream, LayerNormRows rows) {
  if (N == 0 || C == 0) return;
  stored::with_policy(stored::common_storage({out, inp, weight, bias}, "layernorm_forward"), [&](auto policy) {
    using S = decltype(policy);
    auto y = stored::elements<S>(out);
    auto x = stored::elements<S>(inp);
    auto w = stored::elements<S>(weight);
    auto b = stored::elements<S>(bias);
    launch_rows<typename S::Element>(
        rows, N, C, {y, x, w, b},
        [&](auto values, const WarpRows& r) {
          layernorm_forward_warp_kernel<S, decltype(values)::value>
              <<<r.grid, r.block, 0, stream>>>(y, mean, rstd, x, w, b, N, C, r.vectorized);
        },
        [&] { layernorm_forward_kernel<S><<<N, kRowThreads, 0, stream>>>(y, mean, rstd, x, w, b, C); });
  });
  CUDA_CHECK_LAUNCH();
}

void residual_layernorm_forward(ActPtr residual, ActPtr out, float* mean, float* rstd, ConstActPtr a, ConstActPtr b,
                                ConstActPtr weight, ConstActPtr bias, int N, int C, cudaStream_t stream,
                                LayerNormRows rows) {
  if (N == 0 || C == 0) return;
  const Precision storage =
      stored::common_storage({residual, out, a, b, weight, bias}, "residual_layernorm_forward");
  stored::with_policy(storage, [&](auto policy) {
    using S = decltype(policy);
    auto r = stored::elements<S>(residual);
    auto y = stored::elements<S>(out);
    auto a_ = stored::elements<S>(a);
    auto b_ = stored::elements<S>(b);
    auto w = stored::elements<S>(weight);
    auto bias_ = stored::elements<S>(bias);
    launch_rows<typename S::Element>(
        rows, N, C, {r, y, a_, b_, w, bias_},
        [&](auto values, const WarpRows& shape) {
          residual_layernorm_forward_warp_kernel<S, decltype(values)::value>
              <<<shape.grid, shape.block, 0, stream>>>(r, y, mean, rstd, a_, b_, w, bias_, N, C, shape.vectorized);
        },
        [&] {
          residual_layernorm_forward_kernel<S><<<N, kRowThreads, 0, stream>>>(r, y, mean, rstd, a_, b_, w, bias_, C);
        });
  });
  CUDA_CHECK_LAUNCH();
}

std::size_t layernorm_backward_scratch_floats(int C, int walk_chunks) {
  return std::max(columns::pair_scratch_floats(C), columns::pair_scratch_floats(C, walk_chunks));
}

void layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                        ConstActPtr weight, const float* mean, const float* rstd, int N, int C, float* column_scratch,
                        cudaStream_t stream, LayerNormRows rows, LayerNormParameterSums sums, int walk_chunks) {
  if (N == 0 || C == 0) return;
  if (walk_chunks < 1) {
    throw std::invalid_argument("layernorm_backward: walk_chunks is " + std::to_string(walk_chunks) + ", not >= 1");
  }
  const columns::ChunkPlan walk = columns::plan_chunks(N, walk_chunks);
  float* partial_dw = column_scratch;
  float* partial_db = column_scratch + static_cast<std::size_t>(walk.chunks) * static_cast<std::size_t>(C);
  bool walked = false;  // the parameter sums are in the partials
  stored::with_policy(stored::common_storage({dinp, dout, inp, weight}, "layernorm_backward"), [&](auto policy) {
    using S = decltype(policy);
    auto dx = stored::elements<S>(dinp);
    auto dy = stored::elements<S>(dout);
    auto x = stored::elements<S>(inp);
    auto w = stored::elements<S>(weight);
    launch_rows<typename S::Element>(
        rows, N, C, {dx, dy, x, w},
        [&](auto values, const WarpRows& r) {
          constexpr int kValues = decltype(values)::value;
          if (sums == LayerNormParameterSums::kSeparatePass) {
            layernorm_backward_input_warp_kernel<S, kValues>
                <<<r.grid, r.block, 0, stream>>>(dx, dy, x, w, mean, rstd, N, C, r.vectorized);
            return;
          }
          constexpr std::size_t kShared = walk_shared_bytes(kValues);
          if (kShared > 48 * 1024) {  // past the default: the block must opt in (C past 1536 values)
            CUDA_CHECK(cudaFuncSetAttribute(layernorm_backward_walk_kernel<S, kValues>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kShared)));
          }
          layernorm_backward_walk_kernel<S, kValues><<<walk.chunks, kWalkWarps * kWarpSize, kShared, stream>>>(
              dx, partial_dw, partial_db, dy, x, w, mean, rstd, N, C, walk.rows_per_chunk, r.vectorized);
          walked = true;
        },
        [&] { layernorm_backward_input_kernel<S><<<N, kRowThreads, 0, stream>>>(dx, dy, x, w, mean, rstd, C); });
  });
  CUDA_CHECK_LAUNCH();
  if (walked) {
    add_partial_sums_pair(dweight, dbias, partial_dw, partial_db, walk.chunks, C, stream);
  } else {
    add_layernorm_parameter_gradients(dweight, dbias, dout, inp, mean, rstd, N, C, column_scratch, stream);
  }
}

}  // namespace trident::kernels::cuda
