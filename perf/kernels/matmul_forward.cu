// Playground: matmul forward, out[N,OC] = inp[N,C] @ W[OC,C]^T + bias[OC], at the four GPT-2
// 124M shapes (N = 8192 tokens; C -> OC: 768 -> 2304 qkv, 768 -> 768 attention projection,
// 768 -> 3072 fc, 3072 -> 768 fc projection). Reference: the CPU twin
// trident::kernels::cpu::matmul_forward (and cpu::gelu_forward for variant 4).
//
//   playground_matmul_forward [variant|all] [reps]      N from MM_N (8192)
//
// inp, W and bias are rounded to bf16-representable floats (round_to_bf16) before anything
// sees them, so that every variant, the bf16 ones included, multiplies exactly the same
// numbers as the reference: a bf16 input converts to bf16 and TF32 without loss.
//
// Variants:
//   1  production cuda::matmul_forward (bias broadcast kernel, then cublasSgemm with beta = 1)
//      on a handle in CUBLAS_DEFAULT_MATH: fp32 FMA units, no tensor cores.
//   2  the same on a handle in CUBLAS_TF32_TENSOR_OP_MATH (what the backend uses when
//      set_gemm_input_precision says every input is 16-bit representable).
//   3  cuBLASLt, A and B in bf16 (converted on the device beforehand, not timed), fp32 output,
//      fp32 accumulation (CUBLAS_COMPUTE_32F), bias added by the epilogue
//      (CUBLASLT_EPILOGUE_BIAS): no broadcast pass, half the input bytes.
//   4  variant 3 with CUBLASLT_EPILOGUE_GELU_BIAS: the MLP's matmul + GELU in one kernel.
//      (Timed at every shape; in GPT-2 only the 768 -> 3072 fc layer is followed by GELU.)
//   5  cuBLASLt with every operand 16-bit: bf16 inp, W and bias (the model's 16-bit activation
//      buffer and compute copy of the weights, as they are stored under train.precision =
//      bf16), fp32 accumulation, bf16 out rounded once by the epilogue. The native path that
//      would replace today's widen, TF32 GEMM, narrow; reference: the twin's fp32 result rounded
//      to bf16 (round_to_bf16), as RoundedStorageBackend stores it.
//
// The row-major -> column-major mapping (kernels/cuda/gemm.cu): the buffer of a row-major
// r x c matrix is the column-major c x r matrix. So in cuBLASLt's column-major terms
//   D = out^T  (OC x N, ld OC)  =  W (OC x C)  @  inp^T (C x N)
// where A = W's buffer, which column-major is W^T (C x OC, ld C), used with TRANSA = T, and
// B = inp's buffer, column-major inp^T (C x N, ld C), used as is (TRANSB = N). m = OC, n = N,
// k = C. The epilogue's bias has one value per row of D, i.e. per output channel o, added to
// every column (token): out[n, o] += bias[o], as wanted.
#include <cublasLt.h>      // cublasLt*
#include <cublas_v2.h>     // cublasCreate, cublasSetMathMode
#include <cuda_bf16.h>     // __nv_bfloat16, __float2bfloat16_rn
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/gelu.h"             // cpu::gelu_forward (variant 4's reference)
#include "kernels/cpu/matmul.h"           // cpu::matmul_forward (the reference)
#include "kernels/cuda/launch_shape.cuh"  // elementwise_blocks, grid_first_index, grid_stride
#include "kernels/cuda/matmul.cuh"        // cuda::matmul_forward (variants 1, 2)
#include "kernels/precision.h"            // decode_bf16
#include "perf/kernels/playground.cuh"    // harness

namespace {

namespace pg = trident::playground;
namespace tk = trident::kernels;

// cuBLASLt workspace: what the heuristic may pick kernels for (32 MiB, as is common on Hopper).
constexpr std::size_t kLtWorkspaceBytes = 32u << 20;

// dst[i] = src[i] in bf16 (exact here: src is bf16-representable).
__global__ void to_bf16_kernel(__nv_bfloat16* dst, const float* src, std::size_t n) {
  for (std::size_t i = tk::cuda::grid_first_index(); i < n; i += tk::cuda::grid_stride()) {
    dst[i] = __float2bfloat16_rn(src[i]);
  }
}

pg::DeviceBuffer<__nv_bfloat16> to_bf16(const pg::DeviceBuffer<float>& src, cudaStream_t stream) {
  pg::DeviceBuffer<__nv_bfloat16> dst(src.size());
  to_bf16_kernel<<<tk::cuda::elementwise_blocks(src.size()), tk::cuda::kElementwiseThreads, 0,
                   stream>>>(dst.data(), src.data(), src.size());
  PG_CHECK_LAUNCH();
  PG_CUDA_CHECK(cudaStreamSynchronize(stream));
  return dst;
}

// The cuBLASLt matmul of variants 3 and 4 for one shape and epilogue: descriptors built and the
// algorithm chosen once (by the heuristic, its first answer), then run() queues it.
class LtBf16Matmul {
 public:
  // out_type: CUDA_R_32F (variants 3, 4) or CUDA_R_16BF (5); bias_type likewise, the bias
  // pointer's element type (fp32 with an fp32 output; bf16 with bf16, the default pairing).
  LtBf16Matmul(cublasLtHandle_t lt, int N, int C, int OC, cublasLtEpilogue_t epilogue,
               const void* bias, cudaDataType_t out_type = CUDA_R_32F,
               cudaDataType_t bias_data_type = CUDA_R_32F)
      : lt_(lt) {
    PG_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transa = CUBLAS_OP_T;
    const cublasOperation_t transb = CUBLAS_OP_N;
    const std::int32_t bias_type = bias_data_type;
    PG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &transa,
                                                   sizeof transa));
    PG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &transb,
                                                   sizeof transb));
    PG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                   sizeof epilogue));
    PG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                   sizeof bias));
    PG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                   &bias_type, sizeof bias_type));
    // Layouts describe the stored (column-major) matrices before op(): see the file comment.
    PG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_, CUDA_R_16BF, C, OC, C));   // W buffer
    PG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b_, CUDA_R_16BF, C, N, C));    // inp buffer
    PG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d_, out_type, OC, N, OC));     // out buffer
    PG_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference_));
    const std::size_t workspace = kLtWorkspaceBytes;
    PG_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        preference_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt_, desc_, a_, b_, d_, d_,
                                                                 preference_, 1, &result, &found);
    if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0)) {
      available_ = false;  // reported as a failed row, not a crash
    } else {
      PG_CUBLAS_CHECK(status);
      algo_ = result.algo;
      available_ = true;
    }
  }
  ~LtBf16Matmul() {
    PG_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(preference_));
    PG_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(d_));
    PG_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(b_));
    PG_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(a_));
    PG_CUBLAS_CHECK(cublasLtMatmulDescDestroy(desc_));
  }
  LtBf16Matmul(const LtBf16Matmul&) = delete;
  LtBf16Matmul& operator=(const LtBf16Matmul&) = delete;

  // Whether the heuristic found an algorithm (otherwise run() must not be called).
  bool available() const { return available_; }

  // out = epilogue(inp @ weight^T + bias), queued on `stream`; C = D = out with beta = 0.
  void run(void* out, const __nv_bfloat16* inp, const __nv_bfloat16* weight, void* workspace,
           cudaStream_t stream) const {
    const float alpha = 1.0f;
    const float beta = 0.0f;
    PG_CUBLAS_CHECK(cublasLtMatmul(lt_, desc_, &alpha, weight, a_, inp, b_, &beta, out, d_, out,
                                   d_, &algo_, workspace, kLtWorkspaceBytes, stream));
  }

 private:
  cublasLtHandle_t lt_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr;
  cublasLtMatrixLayout_t b_ = nullptr;
  cublasLtMatrixLayout_t d_ = nullptr;  // C and D share it
  cublasLtMatmulPreference_t preference_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  bool available_ = false;
};

struct Shape {
  int C;
  int OC;
  const char* layer;
};

// What every shape shares: the stream, the timer, the handles and the cuBLASLt workspace.
struct Context {
  cudaStream_t stream;
  pg::Timer& timer;
  cublasHandle_t fp32_cublas;
  cublasHandle_t tf32_cublas;
  cublasLtHandle_t lt;
  void* lt_workspace;
};

// Validates and times the four variants at one shape; returns the exit status of run_variants.
int run_shape(const pg::Args& args, const Context& ctx, int N, const Shape& shape) {
  const int C = shape.C;
  const int OC = shape.OC;
  std::printf("\nmatmul_forward %s: N = %d, C = %d, OC = %d, %d reps (median)\n", shape.layer, N,
              C, OC, args.reps);
  const std::size_t in_count = static_cast<std::size_t>(N) * C;
  const std::size_t w_count = static_cast<std::size_t>(OC) * C;
  const std::size_t out_count = static_cast<std::size_t>(N) * OC;

  const std::vector<float> inp = pg::rounded_to_bf16(pg::random_floats(in_count, 11, -1.0f, 1.0f));
  const std::vector<float> weight = pg::rounded_to_bf16(pg::random_floats(w_count, 12, -1.0f, 1.0f));
  const std::vector<float> bias =
      pg::rounded_to_bf16(pg::random_floats(static_cast<std::size_t>(OC), 13, -1.0f, 1.0f));

  std::vector<float> ref(out_count);
  tk::cpu::matmul_forward(ref.data(), inp.data(), weight.data(), bias.data(), N, C, OC);
  std::vector<float> gelu_ref(out_count);
  tk::cpu::gelu_forward(gelu_ref.data(), ref.data(), out_count);
  std::vector<float> bf16_ref = pg::rounded_to_bf16(ref);

  const pg::DeviceBuffer<float> d_inp = pg::upload(inp);
  const pg::DeviceBuffer<float> d_weight = pg::upload(weight);
  const pg::DeviceBuffer<float> d_bias = pg::upload(bias);
  const pg::DeviceBuffer<__nv_bfloat16> d_inp_bf16 = to_bf16(d_inp, ctx.stream);
  const pg::DeviceBuffer<__nv_bfloat16> d_weight_bf16 = to_bf16(d_weight, ctx.stream);
  const pg::DeviceBuffer<__nv_bfloat16> d_bias_bf16 = to_bf16(d_bias, ctx.stream);
  const pg::DeviceBuffer<float> d_out(out_count);
  const pg::DeviceBuffer<__nv_bfloat16> d_out_bf16(out_count);
  const LtBf16Matmul lt_bias(ctx.lt, N, C, OC, CUBLASLT_EPILOGUE_BIAS, d_bias.data());
  const LtBf16Matmul lt_gelu_bias(ctx.lt, N, C, OC, CUBLASLT_EPILOGUE_GELU_BIAS, d_bias.data());
  const LtBf16Matmul lt_all_bf16(ctx.lt, N, C, OC, CUBLASLT_EPILOGUE_BIAS, d_bias_bf16.data(), CUDA_R_16BF,
                                 CUDA_R_16BF);

  // Variants 1-3: exact inputs, exact products (8-bit x 8-bit significands fit in fp32's 24),
  // fp32 accumulation; only the order of the C additions differs from the twin (OpenBLAS
  // blocks against cuBLAS tiles / split-K). That moves each output by some ulps of the partial
  // sums (|out| ~ sqrt(C)/3, max |ref| a few times that), far below 1e-5 of max |ref|, while a
  // layout or bias mistake is O(1). Tensor cores (2, 3) are believed to accumulate in fp32 too;
  // if one fails just above 1e-5 with no pattern, suspect their accumulation rounding first.
  constexpr double kExactInputTolerance = 1e-5;
  // Variant 4: as 3, then GELU. cuBLASLt's GELU is the tanh approximation like the twin's, but
  // its tanh may be the hardware approximation (tanh.approx.f32, relative error ~2^-11 =
  // 4.9e-4): an error d in tanh moves 0.5 x (1 + tanh) by 0.5 |x| d <= 2.5e-4 |x|, and
  // max |x| ~ max |GELU(x)| (symmetric pre-activations). 1e-3 covers that 4x over, and still
  // fails a wrong layout or a missing bias (the bias alone is ~1/40 of max |ref|).
  constexpr double kGeluTolerance = 1e-3;
  // Variant 5: the same exact products and fp32 sums, rounded once to bf16. Where the GPU's and
  // the twin's sums straddle a bf16 rounding midpoint the stored values differ by one bf16 unit,
  // at most 2^-7 of max |ref| (layernorm_forward.cu says why not 2^-8); a layout or bias error
  // is still O(1). Values left unrounded cannot occur: the output is bf16 storage.
  constexpr double kBf16OutTolerance = 1.0 / 128.0;

  // Runs once on an output poisoned with NaN, validates against `expected`, then times.
  auto measure = [&](const std::vector<float>& expected, double tolerance, auto&& launch) {
    const std::vector<float>* reference = &expected;
    return [&, reference, tolerance, launch](int reps) {
      PG_CUDA_CHECK(cudaMemsetAsync(d_out.data(), 0xff, d_out.bytes(), ctx.stream));
      launch();
      pg::Outcome outcome;
      outcome.checks.push_back(pg::validate("out", pg::download(d_out), *reference, tolerance));
      outcome.median_ms = ctx.timer.median_ms(reps, launch);
      return outcome;
    };
  };
  using Run = std::function<pg::Outcome(int)>;
  auto unavailable = [](int) {
    return pg::Outcome{{{"cuBLASLt", INFINITY, 0.0, false,
                         "cublasLtMatmulAlgoGetHeuristic found no algorithm for this shape"}},
                       0.0, 0.0};
  };

  auto production = [&](cublasHandle_t cublas) {
    return [&, cublas] {
      tk::cuda::matmul_forward(d_out.data(), d_inp.data(), d_weight.data(), d_bias.data(), N, C,
                               OC, cublas, ctx.stream);
    };
  };
  auto lt_run = [&](const LtBf16Matmul& plan) {
    const LtBf16Matmul* matmul = &plan;
    return [&, matmul] {
      matmul->run(d_out.data(), d_inp_bf16.data(), d_weight_bf16.data(), ctx.lt_workspace,
                  ctx.stream);
    };
  };

  // Variant 5 writes bf16: validated on its widened values.
  auto measure_bf16_out = [&](const LtBf16Matmul& plan) {
    const LtBf16Matmul* matmul = &plan;
    return [&, matmul](int reps) {
      auto launch = [&, matmul] {
        matmul->run(d_out_bf16.data(), d_inp_bf16.data(), d_weight_bf16.data(), ctx.lt_workspace, ctx.stream);
      };
      PG_CUDA_CHECK(cudaMemsetAsync(d_out_bf16.data(), 0xff, d_out_bf16.bytes(), ctx.stream));  // NaN patterns
      launch();
      const std::vector<__nv_bfloat16> stored = pg::download(d_out_bf16);
      std::vector<float> widened(stored.size());
      for (std::size_t i = 0; i < stored.size(); ++i) {
        std::uint16_t bits = 0;
        std::memcpy(&bits, &stored[i], sizeof bits);
        widened[i] = tk::decode_bf16(bits);
      }
      pg::Outcome outcome;
      outcome.checks.push_back(pg::validate("out (bf16)", widened, bf16_ref, kBf16OutTolerance));
      outcome.median_ms = ctx.timer.median_ms(reps, launch);
      return outcome;
    };
  };

  const std::vector<pg::Variant> variants = {
      {"production cuda::matmul_forward, fp32 (CUBLAS_DEFAULT_MATH)",
       measure(ref, kExactInputTolerance, production(ctx.fp32_cublas))},
      {"production cuda::matmul_forward, TF32 tensor cores",
       measure(ref, kExactInputTolerance, production(ctx.tf32_cublas))},
      {"cuBLASLt bf16 in, fp32 out, fp32 accumulate, bias epilogue",
       lt_bias.available() ? Run(measure(ref, kExactInputTolerance, lt_run(lt_bias)))
                           : Run(unavailable)},
      {"cuBLASLt bf16 in, fp32 out, fused bias + GELU epilogue",
       lt_gelu_bias.available() ? Run(measure(gelu_ref, kGeluTolerance, lt_run(lt_gelu_bias)))
                                : Run(unavailable)},
      {"cuBLASLt bf16 in, bf16 bias, bf16 out, fp32 accumulate",
       lt_all_bf16.available() ? Run(measure_bf16_out(lt_all_bf16)) : Run(unavailable)},
  };
  const double flops = 2.0 * N * static_cast<double>(C) * OC;
  return pg::run_variants(args, variants, pg::Workload{0.0, flops});
}

}  // namespace

int main(int argc, char** argv) {
  const pg::Args args = pg::parse_args_or_exit(argc, argv, "playground_matmul_forward");
  pg::require_gpu();
  const int N = pg::env_int("MM_N", 8 * 1024);

  const pg::Stream stream;
  pg::Timer timer(stream.get());
  const pg::CublasHandle fp32_cublas(stream.get(), CUBLAS_DEFAULT_MATH);
  const pg::CublasHandle tf32_cublas(stream.get(), CUBLAS_TF32_TENSOR_OP_MATH);
  cublasLtHandle_t lt = nullptr;
  PG_CUBLAS_CHECK(cublasLtCreate(&lt));
  const pg::DeviceBuffer<unsigned char> lt_workspace(kLtWorkspaceBytes);
  const Context ctx{stream.get(), timer, fp32_cublas.get(), tf32_cublas.get(), lt,
                    lt_workspace.data()};

  const Shape shapes[] = {{768, 2304, "attention qkv"},
                          {768, 768, "attention projection"},
                          {768, 3072, "MLP fc"},
                          {3072, 768, "MLP projection"}};
  int status = 0;
  for (const Shape& shape : shapes) status |= run_shape(args, ctx, N, shape);
  PG_CUBLAS_CHECK(cublasLtDestroy(lt));
  return status;
}
