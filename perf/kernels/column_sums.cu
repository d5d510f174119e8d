// Playground: sums over rows ("column sums"), the reductions of two backward passes:
//   bias gradient        dbias[o] += sum_n dout[n, o]                       dout [N, OC]
//   layernorm parameters dweight[c] += sum_n dout[n, c] * (inp[n, c] - mean[n]) * rstd[n]
//                        dbias[c]   += sum_n dout[n, c]                     dout, inp [N, C]
// at GPT-2 124M shapes: N = 8192 tokens (B = 8, T = 1024), OC = 768 (attention and MLP
// projections), 2304 (qkv), 3072 (MLP fc); layernorm C = 768. Then both once more at a ragged
// shape (N = 1001, 100 columns: neither a multiple of the chunk height nor of the 32-column
// tile), for the index arithmetic; its times mean nothing.
//
//   playground_column_sums [variant|all] [reps]
//   N from CS_N (8192), layernorm C from CS_C (768), chunks of variant 2 from CS_CHUNKS (64)
//
// References: the bias sum in double on the host (cpu::matmul_backward would compute dweight's
// GEMM as well, which is all it could add); cpu::layernorm_backward for the layernorm
// parameters (it also writes a dinp, which is not compared). Outputs accumulate (+=), so each
// validated run starts from the same non-zero initial values, copied in on the device.
//
// Variants:
//   1  the former production scheme, kept here to time against (it left kernels/cuda when 2
//      replaced it): one thread per column walks all N rows in order. Deterministic,
//      atomic-free, but only OC (or C) threads: 24 to 96 warps on a 132-SM GPU, each a chain of
//      N loads.
//   2  production (kernels/cuda/column_sums.cu, add_column_sums and
//      add_layernorm_parameter_gradients): a deterministic two-stage reduction over 32-column
//      tiles and R row chunks (kernels/cuda/column_sums_math.h says how, and why R = 64). No
//      atomics, fixed grid, fixed order: the same bits on every run (checked). The layernorm
//      version computes both sums in the same pass over dout and inp. CS_CHUNKS times another
//      R (the results depend on it, so production keeps its constant).
//
// The rate column is the minimal traffic (read the inputs once, read and write the outputs),
// the same numerator for both variants.
#include <cuda_runtime.h>  // __syncthreads, dim3

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/layernorm.h"          // cpu::layernorm_forward, cpu::layernorm_backward
#include "kernels/cuda/column_sums.cuh"     // variant 2: add_column_sums_in_chunks, ..._in_chunks
#include "kernels/cuda/column_sums_math.h"  // columns::plan_chunks, kChunks
#include "kernels/cuda/launch_shape.cuh"    // blocks_for
#include "perf/kernels/playground.cuh"    // harness

namespace {

namespace pg = trident::playground;
namespace tk = trident::kernels;

// ---- variant 1: the former production kernels ------------------------------------------------

// dbias[o] += sum_n dout[n, o]: one thread per column o, rows in order.
__global__ void bias_backward_kernel(float* dbias, const float* dout, int N, int OC) {
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= OC) return;
  float sum = 0.0f;
  for (int n = 0; n < N; n++) sum += dout[static_cast<std::size_t>(n) * OC + o];
  dbias[o] += sum;
}

// dweight, dbias: one thread per channel c, rows in order.
__global__ void layernorm_backward_params_kernel(float* dweight, float* dbias, const float* dout,
                                                 const float* inp, const float* mean,
                                                 const float* rstd, int N, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float dw = 0.0f;
  float db = 0.0f;
  for (int n = 0; n < N; n++) {
    const std::size_t i = static_cast<std::size_t>(n) * C + c;
    dw += dout[i] * (inp[i] - mean[n]) * rstd[n];
    db += dout[i];
  }
  dweight[c] += dw;
  dbias[c] += db;
}

// Their launch shape: blocks of 32 threads, one per column.
constexpr int kFormerColumnThreads = 32;

void former_bias(float* dbias, const float* dout, int N, int OC, cudaStream_t stream) {
  bias_backward_kernel<<<tk::cuda::blocks_for(OC, kFormerColumnThreads),
                         kFormerColumnThreads, 0, stream>>>(dbias, dout, N, OC);
  PG_CHECK_LAUNCH();
}

void former_layernorm(float* dweight, float* dbias, const float* dout, const float* inp,
                          const float* mean, const float* rstd, int N, int C, cudaStream_t stream) {
  layernorm_backward_params_kernel<<<tk::cuda::blocks_for(C, kFormerColumnThreads),
                                     kFormerColumnThreads, 0, stream>>>(dweight, dbias, dout,
                                                                            inp, mean, rstd, N, C);
  PG_CHECK_LAUNCH();
}

// ---- validation -------------------------------------------------------------------------------

// The variants differ from the references only in the order of the fp32 additions.
// Production and the twin add the N rows one after another (the twin in 64-column SIMD blocks,
// the same order per column); variant 2 adds chains of 16 rows, then 8 lanes, then 64 chunks.
// A sequential fp32 sum of N terms errs by at most ~N * 2^-24 * max |partial sum| (each
// addition rounds by up to half an ulp of the running sum): 8192 * 6e-8 = 5e-4 of it in the
// worst case. The roundings are random-signed, so typically ~2^-24 * sqrt(N) / 3 ~ 2e-6 of the
// sum (RMS). A host replay of both schemes on this program's data (fixed seeds, N = 8192)
// measured, as max |err| / max |ref|: sequential against a double sum 2.8e-6 to 3.5e-6;
// variant 2 against a double sum 2.3e-7 to 3.4e-7; variant 2 against the twin (layernorm) up
// to 3.7e-6, i.e. the twin's own error. 1e-5 keeps a factor ~3 above the largest, while an
// indexing mistake moves sums by whole terms: a missed or doubled row changes each of its
// columns by a term of up to ~1, 5e-4 of max |ref| (~2000 here), 50 times the tolerance; a
// wrong column swaps sums that differ by hundreds (their offsets differ).
constexpr double kSumTolerance = 1e-5;

// What every table shares.
struct Context {
  cudaStream_t stream;
  pg::Timer& timer;
  int max_chunks;  // R
};

// dout[N, columns]: uniform in [-1, 1) plus a per-column offset in [-0.25, 0.25), so that the
// sums differ from column to column (a wrong column shows) and grow with N (up to ~2000).
std::vector<float> make_dout(int N, int columns, unsigned seed) {
  std::vector<float> dout =
      pg::random_floats(static_cast<std::size_t>(N) * columns, seed, -1.0f, 1.0f);
  const std::vector<float> offset =
      pg::random_floats(static_cast<std::size_t>(columns), seed + 1, -0.25f, 0.25f);
  for (std::size_t i = 0; i < dout.size(); i++) {
    dout[i] += offset[i % static_cast<std::size_t>(columns)];
  }
  return dout;
}

// Copies `init` into `out` and poisons `scratch` with NaN (a partial that stage 1 does not
// write then shows), runs `launch`, and returns `out`.
template <typename Launch>
std::vector<float> run_from(const pg::DeviceBuffer<float>& out, const pg::DeviceBuffer<float>& init,
                            const pg::DeviceBuffer<float>& scratch, cudaStream_t stream,
                            const Launch& launch) {
  PG_CUDA_CHECK(
      cudaMemcpyAsync(out.data(), init.data(), out.bytes(), cudaMemcpyDeviceToDevice, stream));
  PG_CUDA_CHECK(cudaMemsetAsync(scratch.data(), 0xff, scratch.bytes(), stream));
  launch();
  return pg::download(out);
}

// Bias gradient at one shape; returns the exit status of run_variants.
int run_bias(const pg::Args& args, const Context& ctx, int N, int OC, const char* what) {
  const tk::cuda::columns::ChunkPlan plan = tk::cuda::columns::plan_chunks(N, ctx.max_chunks);
  std::printf("\nbias gradient (%s): N = %d, OC = %d, %d chunks of %d rows, %d reps (median)\n",
              what, N, OC, plan.chunks, plan.rows_per_chunk, args.reps);
  const std::vector<float> dout = make_dout(N, OC, 21);
  const std::vector<float> init = pg::random_floats(static_cast<std::size_t>(OC), 23, -1.0f, 1.0f);
  std::vector<float> ref(init.size());
  for (int o = 0; o < OC; o++) {
    double sum = 0.0;
    for (int n = 0; n < N; n++) sum += dout[static_cast<std::size_t>(n) * OC + o];
    ref[static_cast<std::size_t>(o)] = static_cast<float>(init[static_cast<std::size_t>(o)] + sum);
  }

  const pg::DeviceBuffer<float> d_dout = pg::upload(dout);
  const pg::DeviceBuffer<float> d_init = pg::upload(init);
  const pg::DeviceBuffer<float> d_dbias(init.size());
  const pg::DeviceBuffer<float> d_scratch(static_cast<std::size_t>(plan.chunks) * OC);

  // Validates one run from init, checks a second run for the same bits, then times (the timed
  // runs keep accumulating into d_dbias, which only the next validation resets).
  auto measure = [&](auto&& launch) {
    return [&, launch](int reps) {
      const std::vector<float> first = run_from(d_dbias, d_init, d_scratch, ctx.stream, launch);
      const std::vector<float> second = run_from(d_dbias, d_init, d_scratch, ctx.stream, launch);
      pg::Outcome outcome;
      outcome.checks.push_back(pg::validate("dbias", first, ref, kSumTolerance));
      outcome.checks.push_back(pg::identical("dbias run to run", second, first));
      outcome.median_ms = ctx.timer.median_ms(reps, launch);
      return outcome;
    };
  };
  auto production = [&] { former_bias(d_dbias.data(), d_dout.data(), N, OC, ctx.stream); };
  auto two_stage = [&] {
    tk::cuda::add_column_sums_in_chunks(d_dbias.data(), d_dout.data(), N, OC, d_scratch.data(), ctx.max_chunks,
                                        ctx.stream);
  };
  const std::vector<pg::Variant> variants = {
      {"former production: thread per column, rows in order", measure(production)},
      {"production two-stage: 32x8 blocks over (tile, chunk)", measure(two_stage)},
  };
  const double floats_moved = static_cast<double>(N) * OC + 2.0 * OC;
  return pg::run_variants(args, variants, pg::Workload{4.0 * floats_moved, 0.0});
}

// Layernorm parameter gradients at one shape; returns the exit status of run_variants.
int run_layernorm(const pg::Args& args, const Context& ctx, int N, int C, const char* what) {
  const tk::cuda::columns::ChunkPlan plan = tk::cuda::columns::plan_chunks(N, ctx.max_chunks);
  std::printf("\nlayernorm dweight, dbias (%s): N = %d, C = %d, %d chunks of %d rows, %d reps"
              " (median)\n", what, N, C, plan.chunks, plan.rows_per_chunk, args.reps);
  const std::size_t count = static_cast<std::size_t>(N) * C;
  const std::size_t rows = static_cast<std::size_t>(N);
  const std::size_t channels = static_cast<std::size_t>(C);
  // Inputs with a per-row offset (as playground_layernorm_forward), their mean and rstd from
  // the twin's forward, and a gradient dout.
  std::vector<float> inp = pg::random_floats(count, 31, -2.0f, 2.0f);
  const std::vector<float> row_offset = pg::random_floats(rows, 32, -1.0f, 1.0f);
  for (std::size_t i = 0; i < count; i++) inp[i] += row_offset[i / channels];
  const std::vector<float> weight = pg::random_floats(channels, 33, 0.5f, 1.5f);
  const std::vector<float> bias = pg::random_floats(channels, 34, -0.5f, 0.5f);
  std::vector<float> out(count), mean(rows), rstd(rows);
  tk::cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(),
                             bias.data(), N, C);
  const std::vector<float> dout = make_dout(N, C, 35);
  const std::vector<float> dweight_init = pg::random_floats(channels, 37, -1.0f, 1.0f);
  const std::vector<float> dbias_init = pg::random_floats(channels, 38, -1.0f, 1.0f);
  std::vector<float> dweight_ref(dweight_init), dbias_ref(dbias_init);
  std::vector<float> dinp(count, 0.0f);  // the twin's dinp, not compared
  tk::cpu::layernorm_backward(dinp.data(), dweight_ref.data(), dbias_ref.data(), dout.data(),
                              inp.data(), weight.data(), mean.data(), rstd.data(), N, C);

  const pg::DeviceBuffer<float> d_dout = pg::upload(dout);
  const pg::DeviceBuffer<float> d_inp = pg::upload(inp);
  const pg::DeviceBuffer<float> d_mean = pg::upload(mean);
  const pg::DeviceBuffer<float> d_rstd = pg::upload(rstd);
  // dweight and dbias live in one buffer [dweight | dbias], so one copy resets both.
  std::vector<float> init(dweight_init);
  init.insert(init.end(), dbias_init.begin(), dbias_init.end());
  const pg::DeviceBuffer<float> d_init = pg::upload(init);
  const pg::DeviceBuffer<float> d_grads(init.size());
  float* d_dweight = d_grads.data();
  float* d_dbias = d_grads.data() + channels;
  const pg::DeviceBuffer<float> d_scratch(2 * static_cast<std::size_t>(plan.chunks) * channels);

  auto split = [&](const std::vector<float>& grads, bool weight_half) {
    const auto middle = grads.begin() + static_cast<std::ptrdiff_t>(channels);
    return weight_half ? std::vector<float>(grads.begin(), middle)
                       : std::vector<float>(middle, grads.end());
  };
  auto measure = [&](auto&& launch) {
    return [&, launch](int reps) {
      const std::vector<float> first = run_from(d_grads, d_init, d_scratch, ctx.stream, launch);
      const std::vector<float> second = run_from(d_grads, d_init, d_scratch, ctx.stream, launch);
      pg::Outcome outcome;
      outcome.checks.push_back(
          pg::validate("dweight", split(first, true), dweight_ref, kSumTolerance));
      outcome.checks.push_back(
          pg::validate("dbias", split(first, false), dbias_ref, kSumTolerance));
      outcome.checks.push_back(pg::identical("dweight, dbias run to run", second, first));
      outcome.median_ms = ctx.timer.median_ms(reps, launch);
      return outcome;
    };
  };
  auto production = [&] {
    former_layernorm(d_dweight, d_dbias, d_dout.data(), d_inp.data(), d_mean.data(),
                         d_rstd.data(), N, C, ctx.stream);
  };
  auto two_stage = [&] {
    tk::cuda::add_layernorm_parameter_gradients_in_chunks(d_dweight, d_dbias, d_dout.data(), d_inp.data(),
                                                          d_mean.data(), d_rstd.data(), N, C, d_scratch.data(),
                                                          ctx.max_chunks, ctx.stream);
  };
  const std::vector<pg::Variant> variants = {
      {"former production: thread per channel, rows in order", measure(production)},
      {"production two-stage: 32x8 blocks, both sums", measure(two_stage)},
  };
  const double floats_moved = 2.0 * static_cast<double>(count) + 2.0 * N + 4.0 * C;
  return pg::run_variants(args, variants, pg::Workload{4.0 * floats_moved, 0.0});
}

}  // namespace

int main(int argc, char** argv) {
  const pg::Args args = pg::parse_args_or_exit(argc, argv, "playground_column_sums");
  pg::require_gpu();
  const int N = pg::env_int("CS_N", 8 * 1024);
  const int C = pg::env_int("CS_C", 768);
  const int max_chunks = pg::env_int("CS_CHUNKS", tk::cuda::columns::kChunks);
  if (max_chunks > 65535) {  // the chunks are the grid's y dimension
    std::fprintf(stderr, "CS_CHUNKS = %d: at most 65535\n", max_chunks);
    return 2;
  }

  const pg::Stream stream;
  pg::Timer timer(stream.get());
  const Context ctx{stream.get(), timer, max_chunks};

  // Ragged: 1001 = 62 chunks of 16 rows + one of 9 (lanes with 2 and 1 rows); 100 columns =
  // three full 32-column tiles and one of 4.
  constexpr int kRaggedN = 1001;
  constexpr int kRaggedColumns = 100;
  int status = 0;
  status |= run_bias(args, ctx, N, C, "attention/MLP projection, OC = C");
  status |= run_bias(args, ctx, N, 3 * C, "attention qkv, OC = 3C");
  status |= run_bias(args, ctx, N, 4 * C, "MLP fc, OC = 4C");
  status |= run_layernorm(args, ctx, N, C, "GPT-2 shape");
  status |= run_bias(args, ctx, kRaggedN, kRaggedColumns, "ragged check, times meaningless");
  status |= run_layernorm(args, ctx, kRaggedN, kRaggedColumns, "ragged check, times meaningless");
  return status;
}
