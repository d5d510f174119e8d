// Playground: LayerNorm forward, out[N,C] = (x - mean) * rstd * weight + bias per row, with
// mean[N] and rstd[N] saved for backward (eps = 1e-5). Reference: the CPU twin
// trident::kernels::cpu::layernorm_forward.
//
//   playground_layernorm_forward [variant|all] [reps]      shape: LN_N (8192) x LN_C (768)
//
// Variants:
//   1  the production launcher (kernels/cuda/layernorm.cu) as the model calls it: since variant
//      2 won the first H100 sitting, one warp per row with the row in registers (any storage,
//      any C up to 2048; cuda::LayerNormRows::kWarpPerRow).
//   2  one warp per row: the row is read once into registers with float4 loads (C = 768: six
//      float4 per lane), mean and then centred variance are summed from the registers (two
//      passes, as the twin: no cancellation from E[x^2] - E[x]^2) and reduced by warp
//      shuffles; no shared memory, no block barrier. The row is read from DRAM exactly once.
//   3  variant 2 with the output rounded to bf16 in the store (__float2bfloat16_rn, then back
//      to float: train.precision = bf16 keeps 16-bit values in float storage). mean and rstd
//      stay fp32, as in RoundedStorageBackend.
//   4  variant 1 followed by the production rounding pass (cuda::round_to_precision, bf16):
//      what train.precision = bf16 runs today; 3 against 4 is what fusing the rounding saves.
//   5  the residual stream before ln2 as it ran until the fused kernel: the production add
//      (residual = a + b) then the production LayerNorm of the residual, two launches.
//   6  production cuda::residual_layernorm_forward: both in one launch, the residual row
//      normalised while the block holds it. b is all zeros in 5 and 6, so that the residual is
//      exactly the input and the same reference applies; both still read and write every byte.
//      5 against 6 is what the fusion saves.
//   7  the production launcher with cuda::LayerNormRows::kBlockPerRow, the former default: one
//      256-thread block per row, three sweeps over the row in global memory (mean, variance,
//      output), block reductions through shared memory. At C = 768 three quarters of each
//      block's threads hold 3 channels, and each row pays two __syncthreads-separated block
//      reductions. 1 against 7 is what the warp per row saves in production.
//   8  the production launcher on bf16 buffers (train.precision = bf16: what the model runs),
//      warp per row; 16-byte loads of 8 values.
//   9  variant 8 with kBlockPerRow: 8 against 9 is the saving at the model's precision.
//   Variants 8 and 9 read bf16 inputs (the fp32 inputs rounded) and are checked against the twin
//   on those, out rounded to bf16.
//
// The rate column is the minimal traffic (read x, weight, bias; write out, mean, rstd) over the
// time, the same numerator for every variant, so it compares like the times do.
#include <cuda_bf16.h>     // __float2bfloat16_rn, __bfloat162float
#include <cuda_runtime.h>  // float4, __shfl_xor_sync

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/layernorm.h"       // cpu::layernorm_forward (the reference)
#include "kernels/cuda/elementwise.cuh"  // cuda::round_to_precision (variant 4), cuda::add (5)
#include "kernels/cuda/layernorm.cuh"    // cuda::layernorm_forward (variants 1, 4), kLayerNormEps
#include "kernels/precision.h"           // round_to_bf16, Precision
#include "perf/kernels/playground.cuh"   // harness

namespace {

namespace pg = trident::playground;
namespace tk = trident::kernels;

// ---- variants 2 and 3: one warp per row -------------------------------------------------------

constexpr int kWarpSize = 32;
constexpr int kRowsPerBlock = 8;       // 8 warps = 256 threads per block
constexpr int kMaxVecsPerLane = 16;    // C <= 32 lanes * 16 float4 * 4 = 2048
constexpr int kMaxWarpRowC = kWarpSize * kMaxVecsPerLane * 4;

// Sum over the 32 lanes; every lane gets the result.
__device__ float warp_sum(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

// The value as stored: fp32, or rounded to the nearest bf16 (ties to even) and kept in a float.
template <bool kRoundBf16>
__device__ float stored(float y) {
  if constexpr (kRoundBf16) {
    return __bfloat162float(__float2bfloat16_rn(y));
  } else {
    return y;
  }
}

// One warp per row; lane `lane` owns the float4 slots lane, lane + 32, ..., so each load
// instruction of the warp reads 512 contiguous bytes. kVecsPerLane >= ceil(C / 128) (a
// compile-time bound keeps v[] in registers); slots past C / 4 are zero and skipped.
// Requires C % 4 == 0 (float4 rows, 16-byte aligned because cudaMalloc is).
template <int kVecsPerLane, bool kRoundBf16>
__global__ void layernorm_warp_row_kernel(float* __restrict__ out, float* __restrict__ mean,
                                          float* __restrict__ rstd, const float* __restrict__ inp,
                                          const float* __restrict__ weight,
                                          const float* __restrict__ bias, int N, int C) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int row = static_cast<int>(blockIdx.x) * kRowsPerBlock +
                  static_cast<int>(threadIdx.x) / kWarpSize;
  if (row >= N) return;  // the whole warp leaves together: the shuffles below see 32 lanes
  const int vecs = C / 4;
  const float4* x = reinterpret_cast<const float4*>(inp + static_cast<std::size_t>(row) * C);

  float4 v[kVecsPerLane];
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kVecsPerLane; i++) {
    const int j = lane + i * kWarpSize;
    v[i] = j < vecs ? x[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    sum += (v[i].x + v[i].y) + (v[i].z + v[i].w);
  }
  const float mu = warp_sum(sum) / static_cast<float>(C);

  float sq = 0.0f;
#pragma unroll
  for (int i = 0; i < kVecsPerLane; i++) {
    if (lane + i * kWarpSize < vecs) {  // a zero slot would add mu^2
      const float dx = v[i].x - mu, dy = v[i].y - mu, dz = v[i].z - mu, dw = v[i].w - mu;
      sq += (dx * dx + dy * dy) + (dz * dz + dw * dw);
    }
  }
  const float s = 1.0f / sqrtf(warp_sum(sq) / static_cast<float>(C) + tk::cuda::kLayerNormEps);

  const float4* w4 = reinterpret_cast<const float4*>(weight);
  const float4* b4 = reinterpret_cast<const float4*>(bias);
  float4* y = reinterpret_cast<float4*>(out + static_cast<std::size_t>(row) * C);
#pragma unroll
  for (int i = 0; i < kVecsPerLane; i++) {
    const int j = lane + i * kWarpSize;
    if (j < vecs) {
      const float4 w = w4[j];
      const float4 b = b4[j];
      float4 r;
      r.x = stored<kRoundBf16>((v[i].x - mu) * s * w.x + b.x);
      r.y = stored<kRoundBf16>((v[i].y - mu) * s * w.y + b.y);
      r.z = stored<kRoundBf16>((v[i].z - mu) * s * w.z + b.z);
      r.w = stored<kRoundBf16>((v[i].w - mu) * s * w.w + b.w);
      y[j] = r;
    }
  }
  if (lane == 0) {
    mean[row] = mu;
    rstd[row] = s;
  }
}

bool warp_row_supported(int C) { return C % 4 == 0 && C <= kMaxWarpRowC; }

// Launches the smallest instantiation that holds a row of C channels in registers.
// Requires warp_row_supported(C).
template <bool kRoundBf16>
void layernorm_warp_row(float* out, float* mean, float* rstd, const float* inp,
                        const float* weight, const float* bias, int N, int C,
                        cudaStream_t stream) {
  const int vecs_per_lane = (C / 4 + kWarpSize - 1) / kWarpSize;
  const int blocks = (N + kRowsPerBlock - 1) / kRowsPerBlock;
  auto launch = [&](auto kernel) {
    kernel<<<blocks, kRowsPerBlock * kWarpSize, 0, stream>>>(out, mean, rstd, inp, weight, bias,
                                                             N, C);
    PG_CHECK_LAUNCH();
  };
  if (vecs_per_lane <= 2) {
    launch(layernorm_warp_row_kernel<2, kRoundBf16>);
  } else if (vecs_per_lane <= 4) {
    launch(layernorm_warp_row_kernel<4, kRoundBf16>);
  } else if (vecs_per_lane <= 6) {
    launch(layernorm_warp_row_kernel<6, kRoundBf16>);  // C = 768
  } else if (vecs_per_lane <= 8) {
    launch(layernorm_warp_row_kernel<8, kRoundBf16>);
  } else if (vecs_per_lane <= 12) {
    launch(layernorm_warp_row_kernel<12, kRoundBf16>);
  } else {
    launch(layernorm_warp_row_kernel<kMaxVecsPerLane, kRoundBf16>);
  }
}

// ---- validation helpers -----------------------------------------------------------------------

// Passes when every value is exactly bf16-representable: catches a "rounded" output that was
// not rounded, which the error check alone (tolerance of one bf16 unit) would let through.
pg::Check bf16_representable(const std::vector<float>& values) {
  // The "error" is the fraction of values that are not representable; none may be.
  pg::Check check{"out bf16-representable", 0.0, 0.0, true, ""};
  std::size_t count = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < values.size(); i++) {
    const float v = values[i];
    if (std::isnan(v) || tk::round_to_bf16(v) != v) {
      if (count++ == 0) first = i;
    }
  }
  if (count > 0) {
    check.pass = false;
    check.max_rel_err = static_cast<double>(count) / static_cast<double>(values.size());
    check.detail = "out: " + std::to_string(count) + " values not bf16-representable, first at " +
                   std::to_string(first);
  }
  return check;
}

pg::Check unsupported_shape(int C) {
  return {"shape", INFINITY, 0.0, false,
          "C = " + std::to_string(C) + ": this variant needs C % 4 == 0 and C <= " +
              std::to_string(kMaxWarpRowC)};
}

}  // namespace

int main(int argc, char** argv) {
  const pg::Args args = pg::parse_args_or_exit(argc, argv, "playground_layernorm_forward");
  pg::require_gpu();
  const int N = pg::env_int("LN_N", 8 * 1024);
  const int C = pg::env_int("LN_C", 768);
  const std::size_t count = static_cast<std::size_t>(N) * C;
  std::printf("layernorm_forward N = %d, C = %d, %d reps (median)\n", N, C, args.reps);

  // Rows with their own offset, so that the mean matters and the centred variance is tested.
  std::vector<float> inp = pg::random_floats(count, 1, -2.0f, 2.0f);
  const std::vector<float> row_offset = pg::random_floats(static_cast<std::size_t>(N), 2, -1.0f, 1.0f);
  for (std::size_t i = 0; i < count; i++) inp[i] += row_offset[i / static_cast<std::size_t>(C)];
  const std::vector<float> weight = pg::random_floats(static_cast<std::size_t>(C), 3, 0.5f, 1.5f);
  const std::vector<float> bias = pg::random_floats(static_cast<std::size_t>(C), 4, -0.5f, 0.5f);

  std::vector<float> out_ref(count), mean_ref(static_cast<std::size_t>(N)), rstd_ref(mean_ref.size());
  tk::cpu::layernorm_forward(out_ref.data(), mean_ref.data(), rstd_ref.data(), inp.data(),
                             weight.data(), bias.data(), N, C);
  const std::vector<float> out_ref_bf16 = pg::rounded_to_bf16(out_ref);

  const pg::DeviceBuffer<float> d_inp = pg::upload(inp);
  const pg::DeviceBuffer<float> d_weight = pg::upload(weight);
  const pg::DeviceBuffer<float> d_bias = pg::upload(bias);
  const pg::DeviceBuffer<float> d_out(count);
  const pg::DeviceBuffer<float> d_mean(static_cast<std::size_t>(N));
  const pg::DeviceBuffer<float> d_rstd(static_cast<std::size_t>(N));
  const pg::DeviceBuffer<float> d_zero = pg::upload(std::vector<float>(count, 0.0f));
  const pg::DeviceBuffer<float> d_residual(count);
  // The same inputs rounded to bf16, for variants 8 and 9, and the twin on them.
  const std::vector<float> inp16 = pg::rounded_to_bf16(inp), weight16 = pg::rounded_to_bf16(weight);
  const std::vector<float> bias16 = pg::rounded_to_bf16(bias);
  std::vector<float> out16_ref(count), mean16_ref(mean_ref.size()), rstd16_ref(mean_ref.size());
  tk::cpu::layernorm_forward(out16_ref.data(), mean16_ref.data(), rstd16_ref.data(), inp16.data(), weight16.data(),
                             bias16.data(), N, C);
  out16_ref = pg::rounded_to_bf16(out16_ref);
  const pg::DeviceBuffer<uint16_t> d_inp16 = pg::upload(pg::encoded_bf16(inp16));
  const pg::DeviceBuffer<uint16_t> d_weight16 = pg::upload(pg::encoded_bf16(weight16));
  const pg::DeviceBuffer<uint16_t> d_bias16 = pg::upload(pg::encoded_bf16(bias16));
  const pg::DeviceBuffer<uint16_t> d_out16(count);
  const pg::Stream stream;
  pg::Timer timer(stream.get());

  // fp32 paths: summation order differs from the twin (lanes and shuffles against a SIMD
  // loop), a few float roundings on values of order 1: 1e-5 of the largest value is ample and
  // still far below any indexing or formula error.
  constexpr double kFp32Tolerance = 1e-5;
  // bf16 output: the GPU's and the twin's fp32 results differ by ~1e-7 relative, so now and
  // then one lands on the other side of a bf16 rounding midpoint and the stored values differ
  // by one bf16 unit. A unit at v is 2^(floor(log2|v|) - 7) <= 2^-7 |v| <= 2^-7 max |ref|
  // (2^-8 would fail whenever such a flip hits the top binade of the outputs), so 2^-7.
  // Missing rounding is caught by bf16_representable instead.
  constexpr double kBf16Tolerance = 1.0 / 128.0;

  // Runs the variant once on outputs poisoned with NaN (a stale result cannot pass), checks
  // out (against the fp32 or the bf16-rounded reference), mean and rstd, then times it.
  auto measure = [&](bool rounded, auto&& launch) {
    return [&, rounded, launch](int reps) {
      PG_CUDA_CHECK(cudaMemsetAsync(d_out.data(), 0xff, d_out.bytes(), stream.get()));
      PG_CUDA_CHECK(cudaMemsetAsync(d_mean.data(), 0xff, d_mean.bytes(), stream.get()));
      PG_CUDA_CHECK(cudaMemsetAsync(d_rstd.data(), 0xff, d_rstd.bytes(), stream.get()));
      launch();
      pg::Outcome outcome;
      const std::vector<float> out = pg::download(d_out);
      if (rounded) {
        outcome.checks.push_back(pg::validate("out (bf16)", out, out_ref_bf16, kBf16Tolerance));
        outcome.checks.push_back(bf16_representable(out));
      } else {
        outcome.checks.push_back(pg::validate("out", out, out_ref, kFp32Tolerance));
      }
      outcome.checks.push_back(pg::validate("mean", pg::download(d_mean), mean_ref, kFp32Tolerance));
      outcome.checks.push_back(pg::validate("rstd", pg::download(d_rstd), rstd_ref, kFp32Tolerance));
      outcome.median_ms = timer.median_ms(reps, launch);
      return outcome;
    };
  };
  // Variants 8 and 9: bf16 buffers in and out.
  auto measure_bf16 = [&](auto&& launch) {
    return [&, launch](int reps) {
      PG_CUDA_CHECK(cudaMemsetAsync(d_out16.data(), 0xff, d_out16.bytes(), stream.get()));
      PG_CUDA_CHECK(cudaMemsetAsync(d_mean.data(), 0xff, d_mean.bytes(), stream.get()));
      PG_CUDA_CHECK(cudaMemsetAsync(d_rstd.data(), 0xff, d_rstd.bytes(), stream.get()));
      launch();
      pg::Outcome outcome;
      outcome.checks.push_back(
          pg::validate("out (bf16 buffer)", pg::decoded_bf16(pg::download(d_out16)), out16_ref, kBf16Tolerance));
      outcome.checks.push_back(pg::validate("mean", pg::download(d_mean), mean16_ref, kFp32Tolerance));
      outcome.checks.push_back(pg::validate("rstd", pg::download(d_rstd), rstd16_ref, kFp32Tolerance));
      outcome.median_ms = timer.median_ms(reps, launch);
      outcome.bytes = 2.0 * (2.0 * static_cast<double>(count) + 2.0 * C) + 4.0 * 2.0 * N;  // 16-bit x, y, w, b
      return outcome;
    };
  };
  // Variants 2 and 3 on a shape they do not handle: a failed row, nothing launched.
  auto unsupported = [C](int) { return pg::Outcome{{unsupported_shape(C)}, 0.0, 0.0}; };

  auto production = [&] {
    tk::cuda::layernorm_forward(d_out.data(), d_mean.data(), d_rstd.data(), d_inp.data(),
                                d_weight.data(), d_bias.data(), N, C, stream.get());
  };
  auto production_block_rows = [&] {
    tk::cuda::layernorm_forward(d_out.data(), d_mean.data(), d_rstd.data(), d_inp.data(), d_weight.data(),
                                d_bias.data(), N, C, stream.get(), tk::cuda::LayerNormRows::kBlockPerRow);
  };
  auto bf16_buffers = [&](tk::cuda::LayerNormRows rows) {
    return [&, rows] {
      const auto at = [](const pg::DeviceBuffer<uint16_t>& b) { return tk::ActPtr(b.data(), tk::Precision::kBf16); };
      tk::cuda::layernorm_forward(at(d_out16), d_mean.data(), d_rstd.data(), at(d_inp16), at(d_weight16),
                                  at(d_bias16), N, C, stream.get(), rows);
    };
  };
  auto warp_row = [&] {
    layernorm_warp_row<false>(d_out.data(), d_mean.data(), d_rstd.data(), d_inp.data(),
                              d_weight.data(), d_bias.data(), N, C, stream.get());
  };
  auto warp_row_bf16 = [&] {
    layernorm_warp_row<true>(d_out.data(), d_mean.data(), d_rstd.data(), d_inp.data(),
                             d_weight.data(), d_bias.data(), N, C, stream.get());
  };
  auto production_then_round = [&] {
    production();
    tk::cuda::round_to_precision(d_out.data(), d_out.data(), count, tk::Precision::kBf16,
                                 stream.get());
  };

  auto add_then_layernorm = [&] {
    tk::cuda::add(d_residual.data(), d_inp.data(), d_zero.data(), count, stream.get());
    tk::cuda::layernorm_forward(d_out.data(), d_mean.data(), d_rstd.data(), d_residual.data(), d_weight.data(),
                                d_bias.data(), N, C, stream.get());
  };
  auto fused_residual = [&] {
    tk::cuda::residual_layernorm_forward(d_residual.data(), d_out.data(), d_mean.data(), d_rstd.data(), d_inp.data(),
                                         d_zero.data(), d_weight.data(), d_bias.data(), N, C, stream.get());
  };

  using Run = std::function<pg::Outcome(int)>;
  const bool warp_ok = warp_row_supported(C);
  const std::vector<pg::Variant> variants = {
      {"production cuda::layernorm_forward (default: warp per row)", measure(false, production)},
      {"warp per row, float4, registers, shuffles",
       warp_ok ? Run(measure(false, warp_row)) : Run(unsupported)},
      {"warp per row + bf16 rounding fused in the store",
       warp_ok ? Run(measure(true, warp_row_bf16)) : Run(unsupported)},
      {"production + separate round_to_precision(bf16) pass", measure(true, production_then_round)},
      {"residual: production add, then production layernorm", measure(false, add_then_layernorm)},
      {"residual: production fused residual_layernorm_forward", measure(false, fused_residual)},
      {"production, LayerNormRows::kBlockPerRow (the former default)", measure(false, production_block_rows)},
      {"production on bf16 buffers, warp per row (the model's bf16)",
       measure_bf16(bf16_buffers(tk::cuda::LayerNormRows::kWarpPerRow))},
      {"production on bf16 buffers, block per row", measure_bf16(bf16_buffers(tk::cuda::LayerNormRows::kBlockPerRow))},
  };

  const double floats_moved = 2.0 * static_cast<double>(count) + 2.0 * C + 2.0 * N;
  return pg::run_variants(args, variants, pg::Workload{4.0 * floats_moved, 0.0});
}
