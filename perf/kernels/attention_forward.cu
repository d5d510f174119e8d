// Playground: causal multi-head attention forward, GPT-2 layout. qkv[B,T,3C] holds q in
// channels [0,C), k in [C,2C), v in [2C,3C); head h owns channels [h*hs, (h+1)*hs) of each,
// hs = C/NH; out[B,T,C] = softmax(q k^T / sqrt(hs), causal) v per head, and lse[B,NH,T] the
// log-sum-exp of each row of scaled scores (what backward needs to rebuild the probabilities:
// the contract of kernels/backend.h). Reference: the CPU twin
// trident::kernels::cpu::attention_forward.
//
//   playground_attention_forward [variant|all] [reps]
//   shape: ATTN_B (8) x ATTN_T (1024), ATTN_C (768), ATTN_NH (12); validated at
//   ATTN_VALIDATE_B (2) batch elements (the CPU twin is slow at B = 8), timed at ATTN_B.
//
// Variants:
//   1  production cuda::attention_forward (kernels/cuda/attention.cu): per batch element a
//      batched cuBLAS GEMM S = scale Q K^T over the full T x T square into its scratch
//      (B*NH*T*T floats in global memory), a causal softmax kernel in place that also writes
//      lse, then O = P V. fp32 (CUBLAS_DEFAULT_MATH).
//   2  fused causal attention in the flash manner, fp32, hs = 64 only: see the comment on
//      flash_attention_forward_kernel. The T x T matrix never reaches global memory, and key
//      tiles above the diagonal are never touched. It writes the same out and lse as 1, so it
//      can stand in for it under the Backend contract (it needs none of the scratch).
//
// TFLOP/s counts the useful causal work, 4 * B * NH * hs * T(T+1)/2 (two products over the
// pairs t2 <= t), for both variants: so variant 1, which computes the full square, shows what
// its waste costs.
#include <cublas_v2.h>     // cublasCreate, cublasSetMathMode
#include <cuda_runtime.h>  // float4, __syncthreads

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"      // cpu::attention_forward (the reference)
#include "kernels/cuda/attention.cuh"   // cuda::attention_forward (variant 1)
#include "perf/kernels/playground.cuh"  // harness

namespace {

namespace pg = trident::playground;
namespace tk = trident::kernels;

// ---- variant 2: flash-style fused attention ---------------------------------------------------

constexpr int kHeadSize = 64;   // hs: q, o and a row of scores live in registers, so fixed
constexpr int kQueryTile = 64;  // queries per block = threads per block (one query per thread)
constexpr int kKeyTile = 64;    // keys per shared-memory tile
// With equal tiles, the key tiles a block visits, k0 = 0, 64, ..., up to its last query, all
// start at or before the block's first query q0: every thread's first key (k0 <= q0 <= t) is
// unmasked in every tile, so a tile's max is finite for every query (see the kernel).
static_assert(kQueryTile == kKeyTile, "the finite-max argument needs equal tiles");

// One block per (query tile, head, batch element), one thread per query row t.
//
// Online softmax: for the scores s_j = scale * q . k_j of one query over the keys seen so far,
// keep the running max m, the running sum l = sum_j exp(s_j - m) and the running output
// o = sum_j exp(s_j - m) v_j. A new tile of keys with max m_tile gives m' = max(m, m_tile);
// the old terms are rescaled by exp(m - m') (0 on the first tile, where m = -inf) and the new
// ones added with exp(s_j - m'). After the last tile, out = o / l, which equals
// sum_j softmax(s)_j v_j exactly in real arithmetic: every term carries the same factor
// exp(-m_final) in o and l; and lse = m + log(l) = log sum_j exp(s_j). No exponent ever
// exceeds 0, so nothing overflows.
//
// Per tile: the block loads K and V of kKeyTile keys into shared memory (coalesced: consecutive
// threads read consecutive channels of one key), synchronises, and each thread computes its
// kKeyTile scores from its q in registers (every thread reads the same K element at once: a
// shared-memory broadcast), then updates m, l, o. Causality: key tiles start at 0 and stop at
// the block's last query, so tiles wholly above the diagonal are skipped; inside the diagonal
// tile, keys k0 + j > t get s = -inf (weight exp(-inf) = 0). Queries past T (T not a multiple
// of 64) compute nothing and write nothing, but still reach every __syncthreads.
//
// Registers: q[64] + o[64] + s[64] per thread (launch bounds of 64 threads leave 255).
__global__ void __launch_bounds__(kQueryTile)
    flash_attention_forward_kernel(float* __restrict__ out, float* __restrict__ lse,
                                   const float* __restrict__ qkv, int T, int C, float scale) {
  __shared__ __align__(16) float k_tile[kKeyTile][kHeadSize];
  __shared__ __align__(16) float v_tile[kKeyTile][kHeadSize];

  const int q0 = static_cast<int>(blockIdx.x) * kQueryTile;
  const int h = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int t = q0 + static_cast<int>(threadIdx.x);
  const bool active = t < T;
  const std::size_t ld = 3 * static_cast<std::size_t>(C);  // floats between tokens in qkv
  const float* qkv_b = qkv + static_cast<std::size_t>(b) * T * ld;
  const std::size_t head_offset = static_cast<std::size_t>(h) * kHeadSize;

  // q of this query; rows are 16-byte aligned because 3C and h*hs are multiples of 4.
  float q[kHeadSize];
  if (active) {
    const float4* q4 = reinterpret_cast<const float4*>(qkv_b + t * ld + head_offset);
#pragma unroll
    for (int c = 0; c < kHeadSize / 4; c++) {
      const float4 v = q4[c];
      q[4 * c] = v.x;
      q[4 * c + 1] = v.y;
      q[4 * c + 2] = v.z;
      q[4 * c + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int c = 0; c < kHeadSize; c++) q[c] = 0.0f;
  }

  float o[kHeadSize];
#pragma unroll
  for (int c = 0; c < kHeadSize; c++) o[c] = 0.0f;
  float m = -INFINITY;  // running max of the scores
  float l = 0.0f;       // running sum of exp(s - m)

  const int last_query = min(q0 + kQueryTile, T) - 1;
  for (int k0 = 0; k0 <= last_query; k0 += kKeyTile) {
    __syncthreads();  // every thread is done with the previous tile
    for (int i = static_cast<int>(threadIdx.x); i < kKeyTile * kHeadSize; i += kQueryTile) {
      const int r = i / kHeadSize;
      const int c = i % kHeadSize;
      const int key = k0 + r;
      float k_value = 0.0f;  // keys past T (last tile of a ragged T) are zeros, and masked
      float v_value = 0.0f;
      if (key < T) {
        const float* row = qkv_b + static_cast<std::size_t>(key) * ld + head_offset;
        k_value = row[C + c];
        v_value = row[2 * C + c];
      }
      k_tile[r][c] = k_value;
      v_tile[r][c] = v_value;
    }
    __syncthreads();  // the tile is complete
    if (!active) continue;

    float s[kKeyTile];
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kKeyTile; j++) {
      float dot = 0.0f;
#pragma unroll
      for (int c = 0; c < kHeadSize; c++) dot += q[c] * k_tile[j][c];
      // k0 + j <= t < T, so a kept key is also a real one.
      s[j] = k0 + j <= t ? scale * dot : -INFINITY;
      tile_max = fmaxf(tile_max, s[j]);
    }
    // tile_max is finite: key k0 <= t is kept (static_assert above).
    const float m_new = fmaxf(m, tile_max);
    const float correction = expf(m - m_new);  // expf(-inf) = 0 on the first tile
    l *= correction;
#pragma unroll
    for (int c = 0; c < kHeadSize; c++) o[c] *= correction;
#pragma unroll
    for (int j = 0; j < kKeyTile; j++) {
      const float p = expf(s[j] - m_new);  // 0 for masked keys
      l += p;
#pragma unroll
      for (int c = 0; c < kHeadSize; c++) o[c] += p * v_tile[j][c];
    }
    m = m_new;
  }

  if (active) {
    // lse[b, h, t] of [B, NH, T]; gridDim.y is NH.
    lse[(static_cast<std::size_t>(b) * gridDim.y + h) * T + t] = m + logf(l);
    const float inv_l = 1.0f / l;  // l >= 1: the max term contributes exp(0)
    float4* y = reinterpret_cast<float4*>(out + (static_cast<std::size_t>(b) * T + t) * C +
                                          head_offset);
#pragma unroll
    for (int c = 0; c < kHeadSize / 4; c++) {
      y[c] = make_float4(o[4 * c] * inv_l, o[4 * c + 1] * inv_l, o[4 * c + 2] * inv_l,
                         o[4 * c + 3] * inv_l);
    }
  }
}

bool flash_supported(int C, int NH) { return NH > 0 && C % NH == 0 && C / NH == kHeadSize; }

// out[B,T,C] and lse[B,NH,T] from qkv[B,T,3C]; requires flash_supported(C, NH).
void flash_attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH,
                             cudaStream_t stream) {
  const dim3 grid((T + kQueryTile - 1) / kQueryTile, NH, B);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadSize));  // as the twin
  flash_attention_forward_kernel<<<grid, kQueryTile, 0, stream>>>(out, lse, qkv, T, C, scale);
  PG_CHECK_LAUNCH();
}

}  // namespace

int main(int argc, char** argv) {
  const pg::Args args = pg::parse_args_or_exit(argc, argv, "playground_attention_forward");
  pg::require_gpu();
  const int B = pg::env_int("ATTN_B", 8);
  const int T = pg::env_int("ATTN_T", 1024);
  const int C = pg::env_int("ATTN_C", 768);
  const int NH = pg::env_int("ATTN_NH", 12);
  const int B_check = std::min(B, pg::env_int("ATTN_VALIDATE_B", 2));
  if (C % NH != 0 || C % 4 != 0) {
    std::fprintf(stderr, "ATTN_C = %d must be a multiple of ATTN_NH = %d and of 4\n", C, NH);
    return 2;
  }
  const int hs = C / NH;
  std::printf("attention_forward B = %d, T = %d, C = %d, NH = %d (hs = %d); validated at B = %d, "
              "timed at B = %d, %d reps (median)\n",
              B, T, C, NH, hs, B_check, B, args.reps);

  // Scores scale * q.k have a standard deviation ~1.3 with these values: a softmax that is
  // neither flat nor one-hot, so both the max subtraction and the weighting are exercised.
  const std::size_t qkv_count = static_cast<std::size_t>(B) * T * 3 * C;
  const std::vector<float> qkv = pg::random_floats(qkv_count, 21, -2.0f, 2.0f);
  // The first B_check batch elements are a prefix of qkv and of out ([B, T, ...] layouts).
  const std::size_t out_check_count = static_cast<std::size_t>(B_check) * T * C;
  const std::size_t lse_check_count = static_cast<std::size_t>(B_check) * NH * T;
  std::vector<float> ref(out_check_count);
  std::vector<float> lse_ref(lse_check_count);
  {
    std::vector<float> scratch(tk::cpu::attention_scratch_size(B_check, T, NH));
    tk::cpu::attention_forward(ref.data(), lse_ref.data(), scratch.data(), qkv.data(), B_check, T,
                               C, NH);
  }

  const pg::DeviceBuffer<float> d_qkv = pg::upload(qkv);
  const pg::DeviceBuffer<float> d_out(static_cast<std::size_t>(B) * T * C);
  const pg::DeviceBuffer<float> d_lse(static_cast<std::size_t>(B) * NH * T);
  const pg::DeviceBuffer<float> d_scratch(tk::cuda::attention_scratch_size(B, T, NH));  // 1
  const pg::Stream stream;
  pg::Timer timer(stream.get());
  // fp32 math: qkv here is not 16-bit representable, so no TF32.
  const pg::CublasHandle cublas(stream.get(), CUBLAS_DEFAULT_MATH);

  // fp32 throughout; out is a convex combination of v rows (|v| < 2, and max |ref| ~ 2 from
  // the first query, whose only key is itself). The twin and the GPU differ in the order of
  // the 64-term dot products and of the T-term sums, in exp (the twin's exp_approx and expf
  // are both within 2 ulp) and, for variant 2, in the online rescaling (a few more roundings
  // per tile): each a few ulp of values below max |ref|, so 1e-5 relative has a wide margin
  // while a wrong head, token or mask gives O(1). lse = max + log(sum) (|lse| up to ~10 here:
  // a max score ~5 plus log of up to T terms) carries the same few-ulp differences of the max
  // score and of the sum; a wrong row or head moves it by O(1).
  constexpr double kTolerance = 1e-5;

  // Runs at B_check on a NaN-poisoned out and lse and validates that prefix, then times at B.
  auto measure = [&](auto&& launch) {
    return [&, launch](int reps) {
      PG_CUDA_CHECK(cudaMemsetAsync(d_out.data(), 0xff, d_out.bytes(), stream.get()));
      PG_CUDA_CHECK(cudaMemsetAsync(d_lse.data(), 0xff, d_lse.bytes(), stream.get()));
      launch(B_check);
      pg::Outcome outcome;
      outcome.checks.push_back(
          pg::validate("out", pg::download(d_out, out_check_count), ref, kTolerance));
      outcome.checks.push_back(
          pg::validate("lse", pg::download(d_lse, lse_check_count), lse_ref, kTolerance));
      outcome.median_ms = timer.median_ms(reps, [&] { launch(B); });
      return outcome;
    };
  };
  auto production = [&](int batch) {
    tk::cuda::attention_forward(d_out.data(), d_lse.data(), d_scratch.data(), d_qkv.data(), batch,
                                T, C, NH, cublas.get(), stream.get());
  };
  auto flash = [&](int batch) {
    flash_attention_forward(d_out.data(), d_lse.data(), d_qkv.data(), batch, T, C, NH,
                            stream.get());
  };
  auto unsupported = [hs](int) {
    return pg::unsupported_shape("hs = " + std::to_string(hs) + ": this variant needs hs = 64");
  };

  using Run = std::function<pg::Outcome(int)>;
  const std::vector<pg::Variant> variants = {
      {"production cuda::attention_forward (cuBLAS + softmax, fp32)", measure(production)},
      {"flash-style fused causal attention, fp32, 64x64 tiles",
       flash_supported(C, NH) ? Run(measure(flash)) : Run(unsupported)},
  };
  const double causal_pairs = static_cast<double>(T) * (T + 1) / 2.0;
  const double flops = 4.0 * B * NH * static_cast<double>(hs) * causal_pairs;
  return pg::run_variants(args, variants, pg::Workload{0.0, flops});
}
