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
//   1  production cuda::attention_forward (kernels/cuda/attention.cu): min(B, NH) strided
//      batched cuBLAS GEMMs S = scale Q K^T over the full T x T square into its scratch
//      (B*NH*T*T floats in global memory), a causal softmax kernel in place that also writes
//      lse, then O = P V. fp32 (CUBLAS_DEFAULT_MATH).
//   2  production cuda::flash_attention_forward (kernels/cuda/flash_attention.cu, chosen by
//      run.attention = flash): fused causal attention in the flash manner, fp32, hs = 64 only.
//      The T x T matrix never reaches global memory, and key
//      tiles above the diagonal are never touched. It writes the same out and lse as 1, so it
//      can stand in for it under the Backend contract (it needs none of the scratch).
//
//   3  production cuda::flash_attention_forward on bf16 buffers (qkv and out 16-bit, as under
//      train.precision = bf16 with run.attention = flash): the tensor-core kernel of
//      kernels/cuda/flash_attention_mma.cu (mma.sync m16n8k16, each warp's scores, P and
//      output in register fragments, P rounded to bf16 for P V). Until 2026-11-22 variant 2's
//      scalar kernel templated on the bf16 storage policy (the H100 figures of that date).
//   4  tensor-core flash forward on bf16 buffers (perf/kernels/flash_tensor_core.cuh): WMMA
//      16x16x16 bf16 products with fp32 accumulation for Q K^T and P V, 4 warps per 64-query
//      tile, the online softmax on one lane per query row, P rounded to bf16 for P V.
//   5  production cuda::attention_forward on bf16 buffers (what train.precision = bf16 runs by
//      default): variant 1's schedule (kernels/cuda/attention_schedule.h) with bf16 products
//      on the tensor cores (cublasGemmStridedBatchedEx, fp32 accumulation; each product
//      min(B, NH) calls), the scores fp32, P rounded to bf16 for P V.
//   6  variant 5 with each product one pointer-array batched call (cublasGemmBatchedEx over
//      the B x NH matrices, their addresses written by a small kernel) where 5 makes min(B, NH)
//      strided batched calls: the same schedule and math (on the host the replay checks that
//      both give the same bits; cuBLAS may pick other kernels for them), fewer launches. Production moves to it if this is faster.
//   7, 8  variant 5 with 2 and 4 causal row blocks (cuda::GemmAttentionOptions::causal_blocks):
//      each product per block of queries against the keys below the block's end, so 1/4 and
//      3/8 of the T x T square (the products' work and the scores' and probabilities' traffic
//      there) left out, for 2 and 4 times the calls.
//   9  variants 6 and 8 together: one pointer-array call per product and block, 4 blocks.
//  10  variant 3 with TileCopy::kSynchronous: each next K/V tile copied through registers, each
//      thread waiting for its loads, where 3 issues cp.async and multiplies the current tile
//      while they land. The same bits (tests/gpu); which is faster decides the default.
//  11  variant 3 with 16 query rows per warp (FlashMmaOptions::forward_rows_per_warp), the
//      default until 2026-11-23: 64 queries a block, each K and V fragment read from shared
//      memory feeding one product where production's 32 rows a warp feed two. Production was
//      16 rows when the H100 timed them (3: 84.8 us, 11 at 32 rows: 81.3 us at B = 8; 282.9
//      and 254.2 us at 32), so the two variants traded places. The same bits as 3 (tests/gpu).
//  12  variant 3 with every head's longest walk first (FlashMmaOptions::block_order =
//      FlashBlockOrder::kLongestFirst): the same blocks, started in another order, so that the
//      grid ends on its shortest ones (kernels/backend_options.h). The same bits as 3 (tests/gpu); a model
//      of the schedule, not a measurement, puts the saving near 20% at B = 8
//      (perf/kernels/block_order_model.py).
//  13  variant 3 on Hopper's warpgroup products (FlashMmaOptions::forward_products =
//      FlashProducts::kWarpgroup, kernels/cuda/flash_attention_wgmma.cu): wgmma reads K
//      and V once for the block's 4 warps where mma.sync makes each warp load its own fragments;
//      64 queries a block, each product group waited for at once (no overlap with the softmax
//      yet). Within the format's rounding of 11 (tests/gpu), the same bits on the emulation.
//      Compute capability 9.0 and a build for sm_90a only; "unsupported" elsewhere.
//  14  variant 13 with each key tile's softmax beside the previous tile's P V
//      (FlashMmaOptions::forward_schedule = WarpgroupSchedule::kOverlapped, FlashAttention-3's
//      overlap within the warpgroup): three K and V buffers, 58,368 bytes of shared memory, so 3
//      blocks an SM where 13 has 4 (ptxas: 128 registers each with cp.async). The same bits as 13 on the
//      emulation, whose wgmma model finishes products only at their waits.
//  15  variant 13 with two warpgroups a block (FlashMmaOptions::forward_warpgroups = 2): 128
//      queries share each K and V tile, as production's 32 rows a warp (3) shares them, so half
//      the tile copies of 13; the first warpgroup walks one key tile more than it needs (wholly
//      masked: the same bits). 256 threads, 50,176 bytes of shared memory.
//  16  variant 14 with two warpgroups a block: 66,560 bytes.
//   Variants 3 to 16 read qkv rounded to bf16 and are validated against the twin run on
//   those rounded values.
//
//   playground_attention_forward replay   (no GPU needed) runs variant 4's steps on the host
//   (flash_tc::replay_forward: the same functions in the kernel's order, plain loops for the
//   matrix products) against the twin on ragged shapes: the index arithmetic, the masks and the
//   softmax of variant 4, checked before any GPU runs it.
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
#include "kernels/cuda/flash_attention.cuh"  // cuda::flash_attention_forward (variant 2)
#include "kernels/cuda/flash_attention_mma.cuh"  // FlashProducts, WarpgroupSchedule, the wgmma check (13, 14)
#include "perf/kernels/flash_tensor_core.cuh"  // flash_tc::forward, replay_forward (variant 4)
#include "perf/kernels/playground.cuh"  // harness

namespace {

namespace pg = trident::playground;
namespace tk = trident::kernels;

using pg::decoded_bf16;
using pg::encoded_bf16;
using pg::rounded_to_bf16;

// bf16 outputs (variants 3 to 9 and the replay), against the twin on the rounded qkv. The stored
// out is rounded to bf16: half a unit, 2^-9 |out| <= 2^-9 max |ref|. Variants 4 to 9 also round each
// probability to bf16 before P V: a relative 2^-9 per weight of a convex combination of v rows,
// at most another 2^-9 max |ref| (and far less over many keys, the roundings having both
// signs). So 2^-8 ~ 3.9e-3 bounds what is expected, and 8e-3 leaves a margin while a wrong
// mask, row or head moves early rows by O(1). lse is computed from the fp32 scores and the
// fp32 probabilities: the fp32 tolerance, 1e-5.
constexpr double kBf16OutTolerance = 8e-3;
constexpr double kLseTolerance = 1e-5;

// `replay`: variant 4's steps on the host against the twin, on shapes with partial tiles.
int replay() {
  struct Shape {
    int B, T, C, NH;
  };
  const Shape shapes[] = {{2, 130, 128, 2}, {1, 64, 64, 1}, {1, 200, 192, 3}};
  pg::print_header();
  int number = 0;
  bool all_pass = true;
  for (const Shape& sh : shapes) {
    const std::vector<float> qkv =
        rounded_to_bf16(pg::random_floats(static_cast<std::size_t>(sh.B) * sh.T * 3 * sh.C, 31, -2.0f, 2.0f));
    std::vector<float> ref(static_cast<std::size_t>(sh.B) * sh.T * sh.C);
    std::vector<float> lse_ref(static_cast<std::size_t>(sh.B) * sh.NH * sh.T);
    std::vector<float> scratch(tk::cpu::attention_scratch_size(sh.B, sh.T, sh.NH));
    tk::cpu::attention_forward(ref.data(), lse_ref.data(), scratch.data(), qkv.data(), sh.B, sh.T, sh.C, sh.NH);
    std::vector<uint16_t> out(ref.size(), 0xffff);  // NaN: a row never written fails
    std::vector<float> lse(lse_ref.size(), NAN);
    const std::vector<uint16_t> qkv_bits = encoded_bf16(qkv);
    trident::playground::flash_tc::replay_forward(out.data(), lse.data(), qkv_bits.data(), sh.B, sh.T, sh.C, sh.NH,
                                                  1.0f / std::sqrt(64.0f));
    pg::Outcome outcome;
    outcome.checks.push_back(pg::validate("out", decoded_bf16(out), ref, kBf16OutTolerance));
    outcome.checks.push_back(pg::validate("lse", lse, lse_ref, kLseTolerance));
    const std::string name = "host replay of 4: B=" + std::to_string(sh.B) + " T=" + std::to_string(sh.T) +
                             " C=" + std::to_string(sh.C) + " NH=" + std::to_string(sh.NH);
    all_pass = pg::print_replay_row(++number, name, outcome) && all_pass;
  }
  return all_pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "replay") return replay();
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

  // The same qkv rounded to bf16, and the twin's answers on it (variants 3 and 4).
  const std::vector<float> qkv16 = rounded_to_bf16(qkv);
  std::vector<float> ref16(out_check_count);
  std::vector<float> lse_ref16(lse_check_count);
  {
    std::vector<float> scratch(tk::cpu::attention_scratch_size(B_check, T, NH));
    tk::cpu::attention_forward(ref16.data(), lse_ref16.data(), scratch.data(), qkv16.data(), B_check, T, C, NH);
  }

  const pg::DeviceBuffer<float> d_qkv = pg::upload(qkv);
  const pg::DeviceBuffer<uint16_t> d_qkv16 = pg::upload(encoded_bf16(qkv16));
  const pg::DeviceBuffer<uint16_t> d_out16(static_cast<std::size_t>(B) * T * C);
  const pg::DeviceBuffer<float> d_out(static_cast<std::size_t>(B) * T * C);
  const pg::DeviceBuffer<float> d_lse(static_cast<std::size_t>(B) * NH * T);
  const pg::DeviceBuffer<float> d_scratch(tk::cuda::attention_scratch_size(B, T, NH));  // 1
  const pg::DeviceBuffer<void*> d_pointers(tk::cuda::attention_matrix_pointers(B, NH));  // 6
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
  // The same for the bf16 variants: out is 16-bit (0xffff, a NaN, before the validated run).
  auto measure16 = [&](auto&& launch) {
    return [&, launch](int reps) {
      PG_CUDA_CHECK(cudaMemsetAsync(d_out16.data(), 0xff, d_out16.bytes(), stream.get()));
      PG_CUDA_CHECK(cudaMemsetAsync(d_lse.data(), 0xff, d_lse.bytes(), stream.get()));
      launch(B_check);
      pg::Outcome outcome;
      outcome.checks.push_back(
          pg::validate("out (bf16)", decoded_bf16(pg::download(d_out16, out_check_count)), ref16, kBf16OutTolerance));
      outcome.checks.push_back(pg::validate("lse", pg::download(d_lse, lse_check_count), lse_ref16, kLseTolerance));
      outcome.median_ms = timer.median_ms(reps, [&] { launch(B); });
      return outcome;
    };
  };
  auto production = [&](int batch) {
    tk::cuda::attention_forward(d_out.data(), d_lse.data(), d_scratch.data(), d_qkv.data(), batch,
                                T, C, NH, cublas.get(), stream.get());
  };
  auto production16 = [&](int batch) {
    tk::cuda::attention_forward(tk::ActPtr(d_out16.data(), tk::Precision::kBf16), d_lse.data(), d_scratch.data(),
                                tk::ConstActPtr(d_qkv16.data(), tk::Precision::kBf16), batch, T, C, NH, cublas.get(),
                                stream.get());
  };
  auto pointer_array16 = [&](int batch) {
    tk::cuda::attention_forward(tk::ActPtr(d_out16.data(), tk::Precision::kBf16), d_lse.data(), d_scratch.data(),
                                tk::ConstActPtr(d_qkv16.data(), tk::Precision::kBf16), batch, T, C, NH, cublas.get(),
                                stream.get(), {d_pointers.data(), 1});
  };
  auto causal_blocks16 = [&](int blocks, void** pointers) {
    return [&, blocks, pointers](int batch) {
      tk::cuda::attention_forward(tk::ActPtr(d_out16.data(), tk::Precision::kBf16), d_lse.data(), d_scratch.data(),
                                  tk::ConstActPtr(d_qkv16.data(), tk::Precision::kBf16), batch, T, C, NH, cublas.get(),
                                  stream.get(), {pointers, blocks});
    };
  };
  auto flash = [&](int batch) {
    tk::cuda::flash_attention_forward(d_out.data(), d_lse.data(), d_qkv.data(), batch, T, C, NH, stream.get());
  };
  auto flash16_with = [&](tk::cuda::FlashMmaOptions options) {
    return [&, options](int batch) {
      tk::cuda::flash_attention_forward(tk::ActPtr(d_out16.data(), tk::Precision::kBf16), d_lse.data(),
                                        tk::ConstActPtr(d_qkv16.data(), tk::Precision::kBf16), batch, T, C, NH,
                                        stream.get(), options);
    };
  };
  auto flash16 = flash16_with({});
  auto tensor_core = [&](int batch) {
    PG_CUDA_CHECK(trident::playground::flash_tc::forward(d_out16.data(), d_lse.data(), d_qkv16.data(), batch, T, C,
                                                         NH, 1.0f / std::sqrt(64.0f), stream.get()));
  };
  auto unsupported = [hs](int) {
    return pg::unsupported_shape("hs = " + std::to_string(hs) + ": this variant needs hs = 64");
  };

  using Run = std::function<pg::Outcome(int)>;
  // A variant on Hopper's warpgroup products (`options` with forward_products = kWarpgroup): timed
  // where this build and GPU have them, reported as unsupported where not.
  auto on_warpgroups = [&](tk::cuda::FlashMmaOptions options) {
    if (!tk::cuda::flash_attention_supported(C, NH) || !tk::cuda::flash_attention_wgmma_available()) {
      return Run([](int) {
        return pg::unsupported_shape("wgmma needs a build for sm_90a and a compute capability 9.0 GPU (or hs != 64)");
      });
    }
    options.forward_products = tk::FlashProducts::kWarpgroup;
    return Run(measure16(flash16_with(options)));
  };
  const std::vector<pg::Variant> variants = {
      {"production cuda::attention_forward (cuBLAS + softmax, fp32)", measure(production)},
      {"flash-style fused causal attention, fp32, 64x64 tiles",
       tk::cuda::flash_attention_supported(C, NH) ? Run(measure(flash)) : Run(unsupported)},
      {"production flash on bf16 buffers (tensor cores, mma.sync)",
       tk::cuda::flash_attention_supported(C, NH) ? Run(measure16(flash16)) : Run(unsupported)},
      {"tensor-core flash (WMMA bf16, 4 warps per 64 queries), bf16",
       tk::cuda::flash_attention_supported(C, NH) ? Run(measure16(tensor_core)) : Run(unsupported)},
      {"variant 1 on bf16 buffers (bf16 cuBLAS products, P rounded to bf16)", measure16(production16)},
      {"variant 5, each product one pointer-array cuBLAS call", measure16(pointer_array16)},
      {"variant 5 with 2 causal row blocks", measure16(causal_blocks16(2, nullptr))},
      {"variant 5 with 4 causal row blocks", measure16(causal_blocks16(4, nullptr))},
      {"variants 6 and 8 together: pointer arrays, 4 blocks", measure16(causal_blocks16(4, d_pointers.data()))},
      {"variant 3 with synchronous tile copies (no cp.async)",
       tk::cuda::flash_attention_supported(C, NH)
           ? Run(measure16(flash16_with({.copy = tk::cuda::TileCopy::kSynchronous})))
           : Run(unsupported)},
      {"variant 3 with 16 query rows per warp (64 per block)",
       tk::cuda::flash_attention_supported(C, NH) ? Run(measure16(flash16_with({.forward_rows_per_warp = 16})))
                                                  : Run(unsupported)},
      {"variant 3 with every head's longest walk first",
       tk::cuda::flash_attention_supported(C, NH)
           ? Run(measure16(flash16_with({.block_order = tk::FlashBlockOrder::kLongestFirst})))
           : Run(unsupported)},
      {"variant 3 on Hopper's warpgroup products (wgmma, 64 queries a block)",
       on_warpgroups({})},
      {"variant 13 with each tile's softmax beside the previous tile's P V",
       on_warpgroups({.forward_schedule = tk::WarpgroupSchedule::kOverlapped})},
      {"variant 13 with two warpgroups a block (128 queries sharing each K and V tile, as 3)",
       on_warpgroups({.forward_warpgroups = 2})},
      {"variant 14 with two warpgroups a block",
       on_warpgroups({.forward_warpgroups = 2, .forward_schedule = tk::WarpgroupSchedule::kOverlapped})},
  };
  const double causal_pairs = static_cast<double>(T) * (T + 1) / 2.0;
  const double flops = 4.0 * B * NH * static_cast<double>(hs) * causal_pairs;
  return pg::run_variants(args, variants, pg::Workload{0.0, flops});
}
