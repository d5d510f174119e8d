// Playground: LayerNorm backward, dinp[N,C] += d/dinp, dweight[C] += sum_n dout * xhat,
// dbias[C] += sum_n dout, on the forward's mean and rstd (eps = 1e-5). Reference: the CPU twin
// trident::kernels::cpu::layernorm_backward.
//
//   playground_layernorm_backward [variant|all] [reps]      shape: LN_N (8192) x LN_C (768)
//
// Variants (all the production launcher, kernels/cuda/layernorm.cu; 1 to 4 are the row-local
// dinp kernel, then the two-stage column sums of dweight and dbias):
//   1  fp32 buffers, cuda::LayerNormRows::kWarpPerRow (the default): a warp per row, xhat and
//      w * dy held in registers between the two warp sums and the write of dinp; one read of
//      x, dy and dinp each;
//   2  fp32 buffers, kBlockPerRow (the former default): a 256-thread block per row, two block
//      sums, x, dy and w read twice;
//   3  bf16 buffers (train.precision = bf16: what the model runs), warp per row;
//   4  bf16 buffers, block per row;
//   5  fp32 buffers, warp per row, the parameter sums in the walk over the rows
//      (LayerNormParameterSums::kInRowWalk): one kernel computes dinp and each chunk's
//      partial dweight and dbias (warps add into their own shared sums), a second adds the
//      chunks; x and dy read once;
//   6  bf16 buffers, likewise;
//   7, 8, 9  6 with at most 3, 4 and 5 chunks a multiprocessor where production takes 256 (2 an
//      SM on an H100's 132, 8 SMs with one): whether more blocks in flight (12 to 20 warps an SM
//      instead of 8; the walk kernel's 168 registers at C = 1280, ptxas sm_90, let 3 blocks of 4
//      warps an SM, its 96 at C = 768 let 5) beat the larger partial sums they leave.
// 1 against 2 and 3 against 4 are what the warp per row saves; 1 against 5 and 3 against 6 what
// one read of x and dy instead of two saves (the production default is still the separate pass).
// Variants 3, 4 and 6 read bf16 inputs (the fp32 inputs rounded) and are checked against the
// twin on those, dinp rounded to bf16.
//
// Each variant's first run starts from the initial dinp, dweight and dbias (the backward adds
// into them) and is validated; the timed runs keep adding. The rate column is each variant's
// minimal traffic (read x, dy, w, dinp; write dinp; the column sums' reads of dy and x) over
// the time.
#include <cuda_runtime.h>

#include <algorithm>  // std::max
#include <cstddef>
#include <cstdio>
#include <vector>

#include "kernels/cpu/layernorm.h"            // cpu::layernorm_forward, layernorm_backward (the reference)
#include "kernels/cuda/layernorm.cuh"         // cuda::layernorm_backward, LayerNormRows, LayerNormParameterSums
#include "kernels/precision.h"                // Precision
#include "perf/kernels/playground.cuh"        // harness

namespace {

namespace pg = trident::playground;
namespace tk = trident::kernels;

// The inputs of one storage: the host values each variant reads (rounded for bf16) and the
// twin's results on them.
struct Case {
  std::vector<float> inp, dout, weight, dinp0, dweight0, dbias0, mean, rstd;
  std::vector<float> dinp_ref, dweight_ref, dbias_ref;
};

Case make_case(int N, int C, bool bf16) {
  const std::size_t count = static_cast<std::size_t>(N) * C;
  auto stored = [bf16](std::vector<float> v) { return bf16 ? pg::rounded_to_bf16(std::move(v)) : v; };
  Case k;
  k.inp = pg::random_floats(count, 1, -2.0f, 2.0f);
  const std::vector<float> row_offset = pg::random_floats(static_cast<std::size_t>(N), 2, -1.0f, 1.0f);
  for (std::size_t i = 0; i < count; i++) k.inp[i] += row_offset[i / static_cast<std::size_t>(C)];
  k.inp = stored(k.inp);
  k.dout = stored(pg::random_floats(count, 3, -1.0f, 1.0f));
  k.weight = stored(pg::random_floats(static_cast<std::size_t>(C), 4, 0.5f, 1.5f));
  k.dinp0 = stored(pg::random_floats(count, 5, -1.0f, 1.0f));
  k.dweight0 = pg::random_floats(static_cast<std::size_t>(C), 6, -1.0f, 1.0f);
  k.dbias0 = pg::random_floats(static_cast<std::size_t>(C), 7, -1.0f, 1.0f);
  const std::vector<float> bias(static_cast<std::size_t>(C), 0.0f);
  std::vector<float> out(count);
  k.mean.resize(static_cast<std::size_t>(N));
  k.rstd.resize(static_cast<std::size_t>(N));
  tk::cpu::layernorm_forward(out.data(), k.mean.data(), k.rstd.data(), k.inp.data(), k.weight.data(), bias.data(), N,
                             C);
  k.dinp_ref = k.dinp0;
  k.dweight_ref = k.dweight0;
  k.dbias_ref = k.dbias0;
  tk::cpu::layernorm_backward(k.dinp_ref.data(), k.dweight_ref.data(), k.dbias_ref.data(), k.dout.data(),
                              k.inp.data(), k.weight.data(), k.mean.data(), k.rstd.data(), N, C);
  if (bf16) k.dinp_ref = pg::rounded_to_bf16(k.dinp_ref);
  return k;
}

// A case's buffers on the device, in its storage: bits of 2 bytes for bf16, floats otherwise.
struct DeviceCase {
  bool bf16;
  pg::DeviceBuffer<float> inp, dout, weight, dinp;              // fp32 storage
  pg::DeviceBuffer<uint16_t> inp16, dout16, weight16, dinp16;  // bf16 storage
  pg::DeviceBuffer<float> dweight, dbias, mean, rstd, scratch;

  // most_walk_chunks: the largest walk_chunks a variant asks for.
  DeviceCase(const Case& k, bool sixteen, int C, int most_walk_chunks)
      : bf16(sixteen),
        inp(pg::upload(sixteen ? std::vector<float>{} : k.inp)),
        dout(pg::upload(sixteen ? std::vector<float>{} : k.dout)),
        weight(pg::upload(sixteen ? std::vector<float>{} : k.weight)),
        dinp(pg::upload(sixteen ? std::vector<float>{} : k.dinp0)),
        inp16(pg::upload(sixteen ? pg::encoded_bf16(k.inp) : std::vector<uint16_t>{})),
        dout16(pg::upload(sixteen ? pg::encoded_bf16(k.dout) : std::vector<uint16_t>{})),
        weight16(pg::upload(sixteen ? pg::encoded_bf16(k.weight) : std::vector<uint16_t>{})),
        dinp16(pg::upload(sixteen ? pg::encoded_bf16(k.dinp0) : std::vector<uint16_t>{})),
        dweight(pg::upload(k.dweight0)),
        dbias(pg::upload(k.dbias0)),
        mean(pg::upload(k.mean)),
        rstd(pg::upload(k.rstd)),
        scratch(tk::cuda::layernorm_backward_scratch_floats(C, most_walk_chunks)) {}

  template <class T>
  static tk::ActPtr at(const pg::DeviceBuffer<T>& b) {
    if constexpr (sizeof(T) == 2) {
      return tk::ActPtr(b.data(), tk::Precision::kBf16);
    } else {
      return tk::ActPtr(b.data());
    }
  }
  void backward(int N, int C, tk::cuda::LayerNormRows rows, tk::LayerNormParameterSums sums, int walk_chunks,
                cudaStream_t stream) const {
    if (bf16) {
      tk::cuda::layernorm_backward(at(dinp16), dweight.data(), dbias.data(), at(dout16), at(inp16), at(weight16),
                                   mean.data(), rstd.data(), N, C, scratch.data(), stream, rows, sums, walk_chunks);
    } else {
      tk::cuda::layernorm_backward(at(dinp), dweight.data(), dbias.data(), at(dout), at(inp), at(weight),
                                   mean.data(), rstd.data(), N, C, scratch.data(), stream, rows, sums, walk_chunks);
    }
  }
  void reset(const Case& k) const {
    auto put = [](const auto& device, const auto& host) {
      PG_CUDA_CHECK(cudaMemcpy(device.data(), host.data(), device.bytes(), cudaMemcpyHostToDevice));
    };
    if (bf16) {
      put(dinp16, pg::encoded_bf16(k.dinp0));
    } else {
      put(dinp, k.dinp0);
    }
    put(dweight, k.dweight0);
    put(dbias, k.dbias0);
    PG_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::vector<float> dinp_values() const { return bf16 ? pg::decoded_bf16(pg::download(dinp16)) : pg::download(dinp); }
};

}  // namespace

int main(int argc, char** argv) {
  const pg::Args args = pg::parse_args_or_exit(argc, argv, "playground_layernorm_backward");
  pg::require_gpu();
  const int N = pg::env_int("LN_N", 8 * 1024);
  const int C = pg::env_int("LN_C", 768);
  const std::size_t count = static_cast<std::size_t>(N) * C;
  std::printf("layernorm_backward N = %d, C = %d, %d reps (median)\n", N, C, args.reps);

  int sms = 0;
  PG_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int most_walk_chunks = std::max(5 * sms, tk::cuda::kWalkChunks);  // variant 9's
  const Case fp32 = make_case(N, C, false);
  const Case bf16 = make_case(N, C, true);
  const DeviceCase d_fp32(fp32, false, C, most_walk_chunks);
  const DeviceCase d_bf16(bf16, true, C, most_walk_chunks);
  const pg::Stream stream;
  pg::Timer timer(stream.get());

  // dinp: a sum of C terms in another order than the twin's, then (bf16) one rounding; as in
  // the forward program, 1e-5 of the largest value for fp32 and a bf16 unit of it for bf16.
  // dweight and dbias: sums over N rows in column_sums' order, fp32 in both storages.
  constexpr double kFp32Tolerance = 1e-5;
  constexpr double kBf16Tolerance = 1.0 / 128.0;
  using Sums = tk::LayerNormParameterSums;
  auto measure = [&](const Case& k, const DeviceCase& d, tk::cuda::LayerNormRows rows,
                     Sums sums = Sums::kSeparatePass, int walk_chunks = tk::cuda::kWalkChunks) {
    return [&, rows, sums, walk_chunks](int reps) {
      d.reset(k);
      d.backward(N, C, rows, sums, walk_chunks, stream.get());
      pg::Outcome outcome;
      outcome.checks.push_back(
          pg::validate("dinp", d.dinp_values(), k.dinp_ref, d.bf16 ? kBf16Tolerance : kFp32Tolerance));
      outcome.checks.push_back(pg::validate("dweight", pg::download(d.dweight), k.dweight_ref, kFp32Tolerance));
      outcome.checks.push_back(pg::validate("dbias", pg::download(d.dbias), k.dbias_ref, kFp32Tolerance));
      outcome.median_ms = timer.median_ms(reps, [&] { d.backward(N, C, rows, sums, walk_chunks, stream.get()); });
      const double element = d.bf16 ? 2.0 : 4.0;
      outcome.bytes = element * (6.0 * static_cast<double>(count) + C) + 4.0 * (2.0 * N + 4.0 * C);
      return outcome;
    };
  };
  using Rows = tk::cuda::LayerNormRows;
  const std::vector<pg::Variant> variants = {
      {"fp32 buffers, warp per row (the default)", measure(fp32, d_fp32, Rows::kWarpPerRow)},
      {"fp32 buffers, block per row (the former default)", measure(fp32, d_fp32, Rows::kBlockPerRow)},
      {"bf16 buffers, warp per row (the model's bf16)", measure(bf16, d_bf16, Rows::kWarpPerRow)},
      {"bf16 buffers, block per row", measure(bf16, d_bf16, Rows::kBlockPerRow)},
      {"fp32 buffers, warp per row, sums in the walk", measure(fp32, d_fp32, Rows::kWarpPerRow, Sums::kInRowWalk)},
      {"bf16 buffers, warp per row, sums in the walk", measure(bf16, d_bf16, Rows::kWarpPerRow, Sums::kInRowWalk)},
      {"bf16, sums in the walk, 3 chunks an SM", measure(bf16, d_bf16, Rows::kWarpPerRow, Sums::kInRowWalk, 3 * sms)},
      {"bf16, sums in the walk, 4 chunks an SM", measure(bf16, d_bf16, Rows::kWarpPerRow, Sums::kInRowWalk, 4 * sms)},
      {"bf16, sums in the walk, 5 chunks an SM", measure(bf16, d_bf16, Rows::kWarpPerRow, Sums::kInRowWalk, 5 * sms)},
  };
  return pg::run_variants(args, variants, pg::Workload{4.0 * 6.0 * static_cast<double>(count), 0.0});
}
