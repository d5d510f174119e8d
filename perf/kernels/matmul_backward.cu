// Playground: a linear layer's backward in bf16 on one stream against two
// (run.matmul_backward_streams = one | two). The backward's two GEMMs, the input gradient
// dinp = dout W (N x C) and the weight gradient dW += dout^T inp (OC x C, summed over the N
// tokens), are independent, and at GPT-2's shapes neither fills the GPU's last wave of tiles: the
// weight gradient has as few as (C / 128) x (OC / 256) tiles of output for 132 SMs, if cuBLAS
// tiles it by 128 x 256. On one stream
// each waits for the other's tail; on two (kernels/cuda/side_stream.cuh) the weight gradient and
// the bias sums run beside the input gradient. The backward products were 41.8 of the 111.4 ms
// of kernels in a GPT-2 774M micro-batch-8 step on one H100 (2026-11-23), at 47 to 60% of the
// dense peak.
//
//   playground_matmul_backward [variant|all] [reps]   MM_N tokens (8192), MM_C channels (1280:
//                                                      774M; 1024: 350M; 768: 124M), MM_V the
//                                                      padded vocabulary of the LM head (50304)
//
// One table per linear layer of width C as the model calls it: attention qkv (C -> 3C, bias),
// attention projection (C -> C, bias), MLP fc (C -> 4C, bias), MLP projection (4C -> C, bias, its
// input gradient through GELU' in cuBLASLt's DGELU epilogue: Backend::matmul_backward_through_gelu)
// and the LM head (C -> V, no bias). Variants:
//   1  production on one stream (MatmulBackwardStreams::kOne, the default): the input gradient,
//      then the weight gradient and the bias sums;
//   2  production on two streams (kTwo): the weight gradient and the bias sums on the side stream,
//      forked before the input gradient and joined after it;
//   3  the input gradient alone (production's launcher: cublasGemmEx, or LtMatmul::backward_dgelu);
//   4  the parameter gradients alone (cuda::matmul_parameter_gradients_16bit: the fp32 weight
//      gradient's GEMM, beta = 1, and the bias column sums).
// 2 gains what it can when it runs in max(3, 4) rather than 3 + 4 (1's time).
//
// Checks: the operands are the same for every variant, and production's results are held to the
// CPU twin by tests/gpu (MatmulBackwardMatchesCpu, MlpEpilogueTwins; TwoStreamsGiveTheOneStreamsBits
// for 2). Here variant 1 must give its own bits again from the same start (the outputs are reset
// before each validated run: dinp to NaN, dweight and dbias to their start values), 2 must give 1's
// bits in every output, 3 1's dinp and 4 1's dweight and dbias.
// The TFLOP/s column counts both products (4 N C OC) for every row, 3 and 4 included: read 3 and 4
// by their times.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/act_ptr.h"                // ActPtr, ConstActPtr
#include "kernels/backend.h"                // make_backend, BackendOptions, MatmulBackwardStreams
#include "kernels/cuda/column_sums_math.h"  // columns::sum_scratch_floats (variant 4's scratch)
#include "kernels/cuda/lt_matmul.cuh"       // LtMatmul::backward_dgelu (variant 3 of the GELU layer)
#include "kernels/cuda/matmul.cuh"          // matmul_input_gradient_16bit, matmul_parameter_gradients_16bit
#include "perf/kernels/playground.cuh"      // harness

namespace {

namespace pg = trident::playground;
namespace tk = trident::kernels;

struct Layer {
  int C, OC;  // input and output width
  const char* name;
  bool through_gelu;  // the MLP projection: dinp through GELU' of the fc layer's kept input
  bool bias;
};

// Device bf16 values: `count` uniform in [lo, hi], rounded, as bits.
pg::DeviceBuffer<std::uint16_t> bf16_values(std::size_t count, std::uint64_t seed, float lo, float hi) {
  return pg::upload(pg::encoded_bf16(pg::random_floats(count, seed, lo, hi)));
}

// What every table shares: a backend of each kind, its stream's timer, and a bare stream with a
// cuBLAS handle and production's cuBLASLt for the halves alone.
struct Context {
  tk::Backend& one;
  tk::Backend& two;
  pg::Timer& one_timer;
  pg::Timer& two_timer;
  cudaStream_t bare;
  pg::Timer& bare_timer;
  cublasHandle_t cublas;
  tk::cuda::LtMatmul& lt;
  int N;
};

cudaStream_t stream_of(tk::Backend& backend) { return static_cast<cudaStream_t>(backend.device_stream()); }

int run_layer(const pg::Args& args, const Context& ctx, const Layer& layer) {
  const int N = ctx.N, C = layer.C, OC = layer.OC;
  const std::size_t n_in = static_cast<std::size_t>(N) * C, n_out = static_cast<std::size_t>(N) * OC;
  const std::size_t n_weight = static_cast<std::size_t>(OC) * C;
  std::printf("\nmatmul_backward %s (bf16): N = %d, C = %d, OC = %d%s, %d reps (median)\n", layer.name, N, C, OC,
              layer.through_gelu ? ", dinp through GELU'" : "", args.reps);
  const auto dout = bf16_values(n_out, 41, -1.0f, 1.0f), inp = bf16_values(n_in, 42, -1.0f, 1.0f);
  const auto weight = bf16_values(n_weight, 43, -0.5f, 0.5f), pre = bf16_values(n_in, 44, -3.0f, 3.0f);
  const pg::DeviceBuffer<std::uint16_t> dinp(n_in);
  const pg::DeviceBuffer<float> dweight(n_weight), dbias(static_cast<std::size_t>(OC));
  const pg::DeviceBuffer<float> scratch(tk::cuda::columns::sum_scratch_floats(OC));
  const std::vector<float> dweight_start = pg::random_floats(n_weight, 45, -1.0f, 1.0f);
  const std::vector<float> dbias_start = pg::random_floats(static_cast<std::size_t>(OC), 46, -1.0f, 1.0f);
  const tk::Precision bf16 = tk::Precision::kBf16;
  float* db = layer.bias ? dbias.data() : nullptr;

  auto reset = [&] {
    PG_CUDA_CHECK(cudaMemset(dinp.data(), 0xff, dinp.bytes()));  // NaN patterns
    PG_CUDA_CHECK(cudaMemcpy(dweight.data(), dweight_start.data(), dweight.bytes(), cudaMemcpyHostToDevice));
    PG_CUDA_CHECK(cudaMemcpy(dbias.data(), dbias_start.data(), dbias.bytes(), cudaMemcpyHostToDevice));
    PG_CUDA_CHECK(cudaDeviceSynchronize());
  };
  auto production = [&](tk::Backend& backend) {
    const tk::ConstActPtr d(dout.data(), bf16), x(inp.data(), bf16), w(weight.data(), bf16);
    const tk::ActPtr di(dinp.data(), bf16);
    if (layer.through_gelu) {
      backend.matmul_backward_through_gelu(di, dweight.data(), db, d, x, w, tk::ConstActPtr(pre.data(), bf16), N, C, OC);
    } else {
      backend.matmul_backward(di, dweight.data(), db, d, x, w, N, C, OC);
    }
  };
  auto input_gradient = [&] {
    if (layer.through_gelu) {
      if (!ctx.lt.backward_dgelu(dinp.data(), dout.data(), weight.data(), pre.data(), N, C, OC, CUDA_R_16BF,
                                 ctx.bare)) {
        pg::fail_cublas(CUBLAS_STATUS_NOT_SUPPORTED, "LtMatmul::backward_dgelu", __FILE__, __LINE__);
      }
    } else {
      tk::cuda::matmul_input_gradient_16bit(dinp.data(), dout.data(), weight.data(), N, C, OC, bf16, ctx.cublas);
    }
  };
  auto parameter_gradients = [&] {
    tk::cuda::matmul_parameter_gradients_16bit(dweight.data(), db, dout.data(), inp.data(), N, C, OC, bf16,
                                               scratch.data(), ctx.cublas, ctx.bare);
  };

  struct Results {
    std::vector<float> dinp, dweight, dbias;
  };
  auto results = [&] {
    PG_CUDA_CHECK(cudaDeviceSynchronize());
    return Results{pg::decoded_bf16(pg::download(dinp)), pg::download(dweight), pg::download(dbias)};
  };
  reset();
  production(ctx.one);
  const Results first = results();

  // Which outputs a variant makes, checked against the first run's bits.
  enum Outputs { kAll, kInput, kParameters };
  auto measure = [&](std::function<void()> launch, pg::Timer& timer, Outputs outputs) {
    return [&, launch, outputs](int reps) {
      reset();
      launch();
      const Results got = results();
      pg::Outcome outcome;
      if (outputs != kParameters) outcome.checks.push_back(pg::identical("dinp", got.dinp, first.dinp));
      if (outputs != kInput) {
        outcome.checks.push_back(pg::identical("dweight", got.dweight, first.dweight));
        outcome.checks.push_back(pg::identical("dbias", got.dbias, first.dbias));
      }
      // dweight and dbias keep accumulating over the timed runs: the same work each time.
      outcome.median_ms = timer.median_ms(reps, launch);
      return outcome;
    };
  };
  const std::vector<pg::Variant> variants = {
      {"production, one stream (the default)", measure([&] { production(ctx.one); }, ctx.one_timer, kAll)},
      {"production, two streams (matmul_backward_streams = two)",
       measure([&] { production(ctx.two); }, ctx.two_timer, kAll)},
      {layer.through_gelu ? "the input gradient alone (cuBLASLt DGELU)" : "the input gradient alone (cublasGemmEx)",
       measure(input_gradient, ctx.bare_timer, kInput)},
      {layer.bias ? "the weight gradient and bias sums alone" : "the weight gradient alone",
       measure(parameter_gradients, ctx.bare_timer, kParameters)},
  };
  const double flops = 4.0 * N * static_cast<double>(C) * OC;
  return pg::run_variants(args, variants, pg::Workload{0.0, flops});
}

}  // namespace

int main(int argc, char** argv) {
  const pg::Args args = pg::parse_args_or_exit(argc, argv, "playground_matmul_backward");
  pg::require_gpu();
  const int N = pg::env_int("MM_N", 8 * 1024);
  const int C = pg::env_int("MM_C", 1280);
  const int V = pg::env_int("MM_V", 50304);

  tk::BackendOptions one_options, two_options;
  two_options.matmul_backward_streams = tk::MatmulBackwardStreams::kTwo;
  const std::unique_ptr<tk::Backend> one = tk::make_backend(tk::Device::kCuda, 1, 0, one_options);
  const std::unique_ptr<tk::Backend> two = tk::make_backend(tk::Device::kCuda, 1, 0, two_options);
  std::printf("backends: %s; %s\n", one->name().c_str(), two->name().c_str());
  pg::Timer one_timer(stream_of(*one)), two_timer(stream_of(*two));
  const pg::Stream bare;
  pg::Timer bare_timer(bare.get());
  const pg::CublasHandle cublas(bare.get(), CUBLAS_DEFAULT_MATH);
  tk::cuda::LtMatmul lt;
  const Context ctx{*one, *two, one_timer, two_timer, bare.get(), bare_timer, cublas.get(), lt, N};

  const Layer layers[] = {{C, 3 * C, "attention qkv", false, true},
                          {C, C, "attention projection", false, true},
                          {C, 4 * C, "MLP fc", false, true},
                          {4 * C, C, "MLP projection", true, true},
                          {C, V, "LM head", false, false}};
  int status = 0;
  for (const Layer& layer : layers) status |= run_layer(args, ctx, layer);
  return status;
}
