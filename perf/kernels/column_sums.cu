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
//   1  the production scheme, copied from kernels/cuda (matmul.cu bias_backward_kernel,
//      layernorm.cu layernorm_backward_params_kernel: their anonymous namespaces keep them out
//      of reach): one thread per column walks all N rows in order. Deterministic, atomic-free,
//      but only OC (or C) threads: 24 to 96 warps on a 132-SM GPU, each a chain of N loads.
//   2  deterministic two-stage reduction. Stage 1: a grid of (32-column tiles) x (R row
//      chunks), blocks of 32 x 8 threads; threadIdx.x is the column (a warp reads 128
//      contiguous bytes of a row), threadIdx.y one of 8 row lanes striding over the chunk's
//      rows; the 8 lane sums are added in lane order through shared memory and one partial per
//      (chunk, column) goes to a scratch buffer. Stage 2: one thread per column adds the R
//      partials in chunk order and adds the result into the output. No atomics, fixed grid,
//      fixed order: the same bits on every run (checked). The layernorm version computes both
//      sums in the same pass over dout and inp.
//
// Why R = 64 (CS_CHUNKS): blocks = ceil(columns / 32) x R. At 768 columns that is 24 x 64 =
// 1536 blocks of 256 threads against 132 SMs x 8 resident blocks = 1056 on an H100, about 1.5
// waves, each block reading 128 rows x 128 bytes; R = 32 would leave a third of the GPU idle
// (768 blocks), and the wider shapes (2304, 3072 columns: 4608 and 6144 blocks) have waves to
// spare. The result depends on R (it fixes where the partial sums split), so R is a constant,
// not derived from the device, to give the same bits on every GPU. Stage 2's R partials per
// column (64 x 3072 floats at most) stay in L2.
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

#include "kernels/cpu/layernorm.h"        // cpu::layernorm_forward, cpu::layernorm_backward
#include "kernels/cuda/launch_shape.cuh"  // blocks_for, kColumnThreads
#include "perf/kernels/playground.cuh"    // harness

namespace {

namespace pg = trident::playground;
namespace tk = trident::kernels;

// ---- variant 1: the production kernels, verbatim ---------------------------------------------
// These mirror kernels/cuda/matmul.cu and kernels/cuda/layernorm.cu; keep them in step.

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

// The production launch shape: blocks of kColumnThreads (32) threads, one per column.
void production_bias(float* dbias, const float* dout, int N, int OC, cudaStream_t stream) {
  bias_backward_kernel<<<tk::cuda::blocks_for(OC, tk::cuda::kColumnThreads),
                         tk::cuda::kColumnThreads, 0, stream>>>(dbias, dout, N, OC);
  PG_CHECK_LAUNCH();
}

void production_layernorm(float* dweight, float* dbias, const float* dout, const float* inp,
                          const float* mean, const float* rstd, int N, int C, cudaStream_t stream) {
  layernorm_backward_params_kernel<<<tk::cuda::blocks_for(C, tk::cuda::kColumnThreads),
                                     tk::cuda::kColumnThreads, 0, stream>>>(dweight, dbias, dout,
                                                                            inp, mean, rstd, N, C);
  PG_CHECK_LAUNCH();
}

// ---- variant 2: two-stage reduction over row chunks ------------------------------------------
// Each thread's work, index arithmetic included, is in __host__ __device__ functions, so that
// a host program can replay the grids (blocks, threads, the barrier between the two phases of
// stage 1) against the CPU twins; the kernels only pass them their block and thread indices.

constexpr int kTileColumns = 32;    // threadIdx.x: one column each, a warp reads 128 bytes
constexpr int kRowLanes = 8;        // threadIdx.y: lanes striding over the chunk's rows
constexpr int kFinishThreads = 32;  // stage 2: one thread per column, as the production kernels
constexpr int kDefaultChunks = 64;  // R: see the file comment

// Chunk r holds the rows [r * rows_per_chunk, min(N, (r + 1) * rows_per_chunk)). At most
// max_chunks chunks, none empty (chunks = ceil(N / rows_per_chunk)). N >= 1, max_chunks >= 1.
struct ChunkPlan {
  int rows_per_chunk;
  int chunks;
};

ChunkPlan plan_chunks(int N, int max_chunks) {
  const int rows_per_chunk = (N + max_chunks - 1) / max_chunks;
  return {rows_per_chunk, (N + rows_per_chunk - 1) / rows_per_chunk};
}

// Thread x of block (tile, chunk) owns column col; its lane y takes the rows begin + y,
// begin + y + kRowLanes, ... below end.
struct LaneRange {
  int col;
  int begin;
  int end;
};

__host__ __device__ inline LaneRange lane_range(int tile, int chunk, int x, int rows_per_chunk,
                                                int N) {
  const int begin = chunk * rows_per_chunk;
  const int end = begin + rows_per_chunk < N ? begin + rows_per_chunk : N;
  return {tile * kTileColumns + x, begin, end};
}

// Stage 1 of the bias, thread (x, y) of block (tile, chunk), before the barrier: its lane's sum
// of column col of dout[N, OC], rows in order (0 for a column past OC).
__host__ __device__ inline float bias_lane(const float* __restrict__ dout, int N, int OC,
                                           int rows_per_chunk, int tile, int chunk, int x, int y) {
  const LaneRange r = lane_range(tile, chunk, x, rows_per_chunk, N);
  float sum = 0.0f;
  if (r.col < OC) {
    for (int n = r.begin + y; n < r.end; n += kRowLanes) {
      sum += dout[static_cast<std::size_t>(n) * OC + r.col];
    }
  }
  return sum;
}

// Stage 1 of the layernorm, the same rows: dw += dout * (inp - mean) * rstd and db += dout,
// the production kernel's expressions (both 0 for a column past C).
__host__ __device__ inline void layernorm_lane(const float* __restrict__ dout,
                                               const float* __restrict__ inp,
                                               const float* __restrict__ mean,
                                               const float* __restrict__ rstd, int N, int C,
                                               int rows_per_chunk, int tile, int chunk, int x,
                                               int y, float& dw, float& db) {
  const LaneRange r = lane_range(tile, chunk, x, rows_per_chunk, N);
  dw = 0.0f;
  db = 0.0f;
  if (r.col >= C) return;
  for (int n = r.begin + y; n < r.end; n += kRowLanes) {
    const std::size_t i = static_cast<std::size_t>(n) * C + r.col;
    dw += dout[i] * (inp[i] - mean[n]) * rstd[n];
    db += dout[i];
  }
}

// Stage 1 after the barrier: thread (x, 0) adds the kRowLanes lane sums of its column in lane
// order and writes partial[chunk, col] (partial is row-major [chunks, columns]).
__host__ __device__ inline void store_partial(float* __restrict__ partial,
                                              const float (*lane_sums)[kTileColumns], int columns,
                                              int tile, int chunk, int x, int y) {
  const int col = tile * kTileColumns + x;
  if (y != 0 || col >= columns) return;
  float total = 0.0f;
  for (int lane = 0; lane < kRowLanes; lane++) total += lane_sums[lane][x];
  partial[static_cast<std::size_t>(chunk) * columns + col] = total;
}

// Stage 2 for column col: out[col] += partial[0, col] + partial[1, col] + ... in chunk order.
__host__ __device__ inline void finish_column(float* __restrict__ out,
                                              const float* __restrict__ partial, int columns,
                                              int chunks, int col) {
  if (col >= columns) return;
  float sum = 0.0f;
  for (int r = 0; r < chunks; r++) sum += partial[static_cast<std::size_t>(r) * columns + col];
  out[col] += sum;
}

// Stage 1 of the bias sum: block (column tile blockIdx.x, chunk blockIdx.y) writes
// partial[chunk, col] for its 32 columns.
__global__ void __launch_bounds__(kTileColumns * kRowLanes)
    bias_partials_kernel(float* __restrict__ partial, const float* __restrict__ dout, int N, int OC,
                         int rows_per_chunk) {
  __shared__ float lane_sums[kRowLanes][kTileColumns];
  const int tile = static_cast<int>(blockIdx.x);
  const int chunk = static_cast<int>(blockIdx.y);
  const int x = static_cast<int>(threadIdx.x);
  const int y = static_cast<int>(threadIdx.y);
  lane_sums[y][x] = bias_lane(dout, N, OC, rows_per_chunk, tile, chunk, x, y);
  __syncthreads();
  store_partial(partial, lane_sums, OC, tile, chunk, x, y);
}

// Stage 1 of the layernorm sums: as bias_partials_kernel, dw partials in partial_dw and db
// partials in partial_db (both [chunks, C]).
__global__ void __launch_bounds__(kTileColumns * kRowLanes)
    layernorm_partials_kernel(float* __restrict__ partial_dw, float* __restrict__ partial_db,
                              const float* __restrict__ dout, const float* __restrict__ inp,
                              const float* __restrict__ mean, const float* __restrict__ rstd, int N,
                              int C, int rows_per_chunk) {
  __shared__ float dw_sums[kRowLanes][kTileColumns];
  __shared__ float db_sums[kRowLanes][kTileColumns];
  const int tile = static_cast<int>(blockIdx.x);
  const int chunk = static_cast<int>(blockIdx.y);
  const int x = static_cast<int>(threadIdx.x);
  const int y = static_cast<int>(threadIdx.y);
  float dw = 0.0f;
  float db = 0.0f;
  layernorm_lane(dout, inp, mean, rstd, N, C, rows_per_chunk, tile, chunk, x, y, dw, db);
  dw_sums[y][x] = dw;
  db_sums[y][x] = db;
  __syncthreads();
  store_partial(partial_dw, dw_sums, C, tile, chunk, x, y);
  store_partial(partial_db, db_sums, C, tile, chunk, x, y);
}

// Stage 2: out[col] += the chunk-ordered sum of partial[., col], one thread per column.
__global__ void finish_kernel(float* __restrict__ out, const float* __restrict__ partial,
                              int columns, int chunks) {
  finish_column(out, partial, columns, chunks,
                static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x));
}

// Stage 2 of the layernorm: both outputs in one launch.
__global__ void finish_pair_kernel(float* __restrict__ out_a, float* __restrict__ out_b,
                                   const float* __restrict__ partial_a,
                                   const float* __restrict__ partial_b, int columns, int chunks) {
  const int col = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  finish_column(out_a, partial_a, columns, chunks, col);
  finish_column(out_b, partial_b, columns, chunks, col);
}

dim3 partials_grid(int columns, const ChunkPlan& plan) {
  return dim3(static_cast<unsigned>(tk::cuda::blocks_for(columns, kTileColumns)),
              static_cast<unsigned>(plan.chunks));
}

// partial: plan.chunks * OC floats of scratch.
void two_stage_bias(float* dbias, float* partial, const float* dout, int N, int OC,
                    const ChunkPlan& plan, cudaStream_t stream) {
  bias_partials_kernel<<<partials_grid(OC, plan), dim3(kTileColumns, kRowLanes), 0, stream>>>(
      partial, dout, N, OC, plan.rows_per_chunk);
  PG_CHECK_LAUNCH();
  finish_kernel<<<tk::cuda::blocks_for(OC, kFinishThreads), kFinishThreads, 0, stream>>>(
      dbias, partial, OC, plan.chunks);
  PG_CHECK_LAUNCH();
}

// partial: 2 * plan.chunks * C floats of scratch (dw partials, then db partials).
void two_stage_layernorm(float* dweight, float* dbias, float* partial, const float* dout,
                         const float* inp, const float* mean, const float* rstd, int N, int C,
                         const ChunkPlan& plan, cudaStream_t stream) {
  float* partial_db = partial + static_cast<std::size_t>(plan.chunks) * C;
  layernorm_partials_kernel<<<partials_grid(C, plan), dim3(kTileColumns, kRowLanes), 0, stream>>>(
      partial, partial_db, dout, inp, mean, rstd, N, C, plan.rows_per_chunk);
  PG_CHECK_LAUNCH();
  finish_pair_kernel<<<tk::cuda::blocks_for(C, kFinishThreads), kFinishThreads, 0, stream>>>(
      dweight, dbias, partial, partial_db, C, plan.chunks);
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
  const ChunkPlan plan = plan_chunks(N, ctx.max_chunks);
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
  auto production = [&] { production_bias(d_dbias.data(), d_dout.data(), N, OC, ctx.stream); };
  auto two_stage = [&] {
    two_stage_bias(d_dbias.data(), d_scratch.data(), d_dout.data(), N, OC, plan, ctx.stream);
  };
  const std::vector<pg::Variant> variants = {
      {"production: thread per column, rows in order", measure(production)},
      {"two-stage: 32x8 blocks over (tile, chunk), chunk-ordered", measure(two_stage)},
  };
  const double floats_moved = static_cast<double>(N) * OC + 2.0 * OC;
  return pg::run_variants(args, variants, pg::Workload{4.0 * floats_moved, 0.0});
}

// Layernorm parameter gradients at one shape; returns the exit status of run_variants.
int run_layernorm(const pg::Args& args, const Context& ctx, int N, int C, const char* what) {
  const ChunkPlan plan = plan_chunks(N, ctx.max_chunks);
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
    production_layernorm(d_dweight, d_dbias, d_dout.data(), d_inp.data(), d_mean.data(),
                         d_rstd.data(), N, C, ctx.stream);
  };
  auto two_stage = [&] {
    two_stage_layernorm(d_dweight, d_dbias, d_scratch.data(), d_dout.data(), d_inp.data(),
                        d_mean.data(), d_rstd.data(), N, C, plan, ctx.stream);
  };
  const std::vector<pg::Variant> variants = {
      {"production: thread per channel, rows in order", measure(production)},
      {"two-stage: 32x8 blocks over (tile, chunk), both sums", measure(two_stage)},
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
  const int max_chunks = pg::env_int("CS_CHUNKS", kDefaultChunks);

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
