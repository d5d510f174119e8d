// Playground: cuBLASLt's algorithm choice for the products of GPT-2's linear layers in bf16, as the
// model runs them. Products were 65.6 of the 111.4 ms of kernels in a GPT-2 774M step on one H100
// (2026-11-23, perf/kernels/README.md), at about 580 TFLOP/s: 58% of the dense peak. This asks
// whether another of cuBLASLt's algorithms would run them faster.
//
//   playground_matmul_algorithms [variant|all] [reps]   MM_N tokens (8192), MM_C channels (1280:
//                                                        774M; 1024: 350M; 768: 124M), MM_ALGOS
//                                                        heuristic answers per product (8)
//
// For each linear layer of width C (C -> 3C attention qkv, C -> C attention projection, C -> 4C
// MLP fc, 4C -> C MLP projection) and each of its three products, one table:
//   forward  out[N,OC] (bf16) = inp W^T + bias      cuda::LtMatmul::forward_bias, or forward_gelu
//                                                   for the fc layer (GELU epilogue, its input kept)
//   dinp     dinp[N,C] (bf16) = dout W              gemm_row_major_ex (cublasGemmEx), or
//                                                   LtMatmul::backward_dgelu for the MLP projection
//                                                   (times GELU' of the fc layer's kept input)
//   dweight  dW[OC,C] (fp32) += dout^T inp          gemm_row_major_ex (cublasGemmEx), beta = 1
// Variant 1 is production's call (cuda::matmul_*_16bit and the fused MLP pairs make these very
// calls); variants 2 on are cuBLASLt's heuristic answers 1, 2, ... for the same product in
// cuBLASLt's terms (fewer rows where it has fewer answers), each named by its configuration:
// algorithm id, tile, stages, split-K, swizzle and cluster shape (cublasLt.h's
// CUBLASLT_ALGO_CONFIG_* and their enums), so that a winner can be asked for by those values.
// For the forward products and the DGELU product, answer 1 is what production runs (LtMatmul
// takes the heuristic's first answer for the same descriptors): rows 1 and 2 time one kernel
// twice, a measure of the noise.
//
// Reference: production's result on the same inputs, which tests/gpu holds to the CPU twin (and
// matmul_forward's variants too). Every operand is bf16 (values drawn uniform in [-1, 1] and
// rounded), so the products are exact and only the order of the fp32 sums differs between
// algorithms (tile shapes, split-K):
// - bf16 outputs: rounded once; where two algorithms' sums straddle a rounding midpoint the
//   stored values differ by one bf16 unit, at most 2^-7 of max |ref| (matmul_forward's variant
//   5 says the same). With the GELU epilogues, another kernel may also evaluate GELU's tanh
//   differently (tanh.approx: about 2^-11 relative, matmul_forward's variant 4): 2^-7 plus 1e-3;
// - the fp32 weight gradient: sums of N = 8192 products in another order, some ulps of the
//   partial sums, far below 1e-5 of max |ref| (matmul_forward's variants 1 to 3 say why), while a
//   layout mistake is O(1).
#include <cublasLt.h>      // cublasLt*
#include <cublas_v2.h>     // cublasOperation_t
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/gemm.cuh"       // gemm_row_major_ex (production's backward products)
#include "kernels/cuda/lt_matmul.cuh"  // LtMatmul (production's forward and DGELU products)
#include "perf/kernels/playground.cuh" // harness

namespace {

namespace pg = trident::playground;
namespace tk = trident::kernels;

constexpr std::size_t kWorkspaceBytes = tk::cuda::LtMatmul::kWorkspaceBytes;  // production's
constexpr double kBf16OutTolerance = 1.0 / 128.0;
constexpr double kGeluTolerance = 1.0 / 128.0 + 1e-3;
constexpr double kFp32OutTolerance = 1e-5;

// One product in cuBLASLt's column-major terms: D (m x n, ld m) = alpha op(A) op(B) + beta D with
// the epilogue; A stored (transa ? k x m : m x k), B stored (transb ? n x k : k x n), both bf16.
struct Product {
  int m, n, k;
  bool transa, transb;
  cudaDataType_t d_type;
  cublasLtEpilogue_t epilogue;
  const void* bias;  // bf16, one value per row of D; or null
  const void* aux;   // GELU's input (D's layout, bf16): written by GELU_AUX_BIAS, read by DGELU; or null
  float beta;
};

// Descriptors for one Product and the heuristic's answers for them (up to `wanted`).
class LtCandidates {
 public:
  LtCandidates(cublasLtHandle_t lt, const Product& p, int wanted) : lt_(lt), product_(p) {
    PG_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transa = p.transa ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t transb = p.transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    set(CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa);
    set(CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb);
    set(CUBLASLT_MATMUL_DESC_EPILOGUE, &p.epilogue, sizeof p.epilogue);
    if (p.bias != nullptr) {
      const std::int32_t bias_type = CUDA_R_16BF;
      set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type);
      set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof p.bias);
    }
    if (p.aux != nullptr) {
      const std::int64_t aux_ld = p.m;
      set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld);
      set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &p.aux, sizeof p.aux);
    }
    PG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_, CUDA_R_16BF, p.transa ? p.k : p.m, p.transa ? p.m : p.k,
                                               p.transa ? p.k : p.m));
    PG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b_, CUDA_R_16BF, p.transb ? p.n : p.k, p.transb ? p.k : p.n,
                                               p.transb ? p.n : p.k));
    PG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d_, p.d_type, p.m, p.n, p.m));
    cublasLtMatmulPreference_t preference = nullptr;
    PG_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
    const std::size_t workspace = kWorkspaceBytes;
    PG_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &workspace, sizeof workspace));
    answers_.resize(static_cast<std::size_t>(wanted));
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt_, desc_, a_, b_, d_, d_, preference, wanted,
                                                                 answers_.data(), &found);
    PG_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(preference));
    if (status != CUBLAS_STATUS_NOT_SUPPORTED) PG_CUBLAS_CHECK(status);
    answers_.resize(status == CUBLAS_STATUS_SUCCESS ? static_cast<std::size_t>(found) : 0);
  }
  ~LtCandidates() {
    PG_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(d_));
    PG_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(b_));
    PG_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(a_));
    PG_CUBLAS_CHECK(cublasLtMatmulDescDestroy(desc_));
  }
  LtCandidates(const LtCandidates&) = delete;
  LtCandidates& operator=(const LtCandidates&) = delete;

  int count() const { return static_cast<int>(answers_.size()); }

  // Answer i's configuration, as cublasLt.h's CUBLASLT_ALGO_CONFIG_* values.
  std::string describe(int i) const {
    const cublasLtMatmulAlgo_t& algo = answers_[static_cast<std::size_t>(i)].algo;
    auto value = [&](cublasLtMatmulAlgoConfigAttributes_t attribute) {
      std::uint32_t v = 0;  // the 32-bit attributes; the 16-bit cluster shape fills the low half
      std::size_t written = 0;
      PG_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &v, sizeof v, &written));
      return written == sizeof(std::uint16_t) ? static_cast<unsigned>(static_cast<std::uint16_t>(v))
                                               : static_cast<unsigned>(v);
    };
    char text[160];
    std::snprintf(text, sizeof text, "Lt #%d: algo %u tile %u stages %u splitK %u swizzle %u cluster %u", i + 1,
                  value(CUBLASLT_ALGO_CONFIG_ID), value(CUBLASLT_ALGO_CONFIG_TILE_ID),
                  value(CUBLASLT_ALGO_CONFIG_STAGES_ID), value(CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                  value(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING), value(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
    return text;
  }

  // D = op(A) op(B) (+ beta D) by answer i, queued on `stream`.
  void run(int i, const void* a, const void* b, void* d, void* workspace, cudaStream_t stream) const {
    const float alpha = 1.0f;
    PG_CUBLAS_CHECK(cublasLtMatmul(lt_, desc_, &alpha, a, a_, b, b_, &product_.beta, d, d_, d, d_,
                                   &answers_[static_cast<std::size_t>(i)].algo, workspace, kWorkspaceBytes, stream));
  }

 private:
  void set(cublasLtMatmulDescAttributes_t attribute, const void* value, std::size_t size) {
    PG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, attribute, value, size));
  }

  cublasLtHandle_t lt_;
  Product product_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;  // C and D share d_
  std::vector<cublasLtMatmulHeuristicResult_t> answers_;
};

struct Layer {
  int C, OC;
  const char* name;
  bool gelu_after;   // the fc layer: GELU in the forward's epilogue
  bool gelu_before;  // the MLP projection: its input is GELU's output, so dinp takes DGELU
};

// What every table shares.
struct Context {
  cudaStream_t stream;
  pg::Timer& timer;
  cublasHandle_t cublas;
  cublasLtHandle_t lt;
  tk::cuda::LtMatmul& production_lt;
  void* workspace;
  int N;
  int algos;
};

// Device bf16 values: `count` uniform in [-1, 1], rounded, as bits.
pg::DeviceBuffer<std::uint16_t> bf16_values(std::size_t count, std::uint64_t seed) {
  return pg::upload(pg::encoded_bf16(pg::random_floats(count, seed, -1.0f, 1.0f)));
}

// One product's table: production (`production`, writing `out`), then the heuristic's answers
// for `product` (A = a, B = b, D = out). `start` (when not empty) is out's value before each run
// (the accumulating dW); otherwise out is overwritten, filled with NaN before the validated run.
template <class Out>
int run_table(const pg::Args& args, const Context& ctx, const std::string& title, const Product& product,
              const void* a, const void* b, const pg::DeviceBuffer<Out>& out, const std::vector<Out>& start,
              double tolerance, const std::function<void()>& production) {
  std::printf("\nmatmul_algorithms %s: m = %d, n = %d, k = %d, %d reps (median)\n", title.c_str(), product.m, product.n,
              product.k, args.reps);
  auto values = [&] {
    const std::vector<Out> stored = pg::download(out);
    if constexpr (sizeof(Out) == 2) {
      return pg::decoded_bf16(stored);
    } else {
      return stored;
    }
  };
  auto reset = [&] {
    if (start.empty()) {
      PG_CUDA_CHECK(cudaMemsetAsync(out.data(), 0xff, out.bytes(), ctx.stream));  // NaN in either format
    } else {
      PG_CUDA_CHECK(cudaMemcpyAsync(out.data(), start.data(), out.bytes(), cudaMemcpyHostToDevice, ctx.stream));
    }
    PG_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  };
  reset();
  production();
  const std::vector<float> reference = values();

  auto measure = [&](std::function<void()> launch) {
    return [&, launch](int reps) {
      reset();
      launch();
      pg::Outcome outcome;
      outcome.checks.push_back(pg::validate("out", values(), reference, tolerance));
      // The accumulating product keeps adding over the timed runs: the same work each time.
      outcome.median_ms = ctx.timer.median_ms(reps, launch);
      return outcome;
    };
  };
  const LtCandidates candidates(ctx.lt, product, ctx.algos);
  std::vector<pg::Variant> variants = {{"production", measure(production)}};
  for (int i = 0; i < candidates.count(); i++) {
    const LtCandidates* lt = &candidates;
    variants.push_back({candidates.describe(i), measure([&, lt, i] {
                          lt->run(i, a, b, out.data(), ctx.workspace, ctx.stream);
                        })});
  }
  const double flops = 2.0 * product.m * static_cast<double>(product.n) * product.k;
  return pg::run_variants(args, variants, pg::Workload{0.0, flops});
}

// The three products of one layer.
int run_layer(const pg::Args& args, const Context& ctx, const Layer& layer) {
  const int N = ctx.N, C = layer.C, OC = layer.OC;
  const std::size_t n_in = static_cast<std::size_t>(N) * C, n_out = static_cast<std::size_t>(N) * OC;
  const std::size_t n_weight = static_cast<std::size_t>(OC) * C;
  const auto inp = bf16_values(n_in, 21), weight = bf16_values(n_weight, 22), bias = bf16_values(OC, 23);
  const auto dout = bf16_values(n_out, 24);
  const auto gelu_input = bf16_values(n_in, 25);  // the MLP projection's DGELU: pre of width C
  const pg::DeviceBuffer<std::uint16_t> out(n_out), pre(n_out), dinp(n_in);
  const pg::DeviceBuffer<float> dweight(n_weight);
  const std::vector<float> dweight_start = pg::random_floats(n_weight, 26, -1.0f, 1.0f);
  const cudaDataType_t bf16 = CUDA_R_16BF;
  const std::string name = layer.name;
  int status = 0;

  // Forward: D = out^T (OC x N) = W (A: stored C x OC, transposed) inp^T (B: C x N).
  Product forward{OC, N, C, true, false, bf16, CUBLASLT_EPILOGUE_BIAS, bias.data(), nullptr, 0.0f};
  std::function<void()> forward_production = [&] {
    if (!ctx.production_lt.forward_bias(out.data(), inp.data(), weight.data(), bias.data(), N, C, OC, bf16,
                                        ctx.stream)) {
      pg::fail_cublas(CUBLAS_STATUS_NOT_SUPPORTED, "LtMatmul::forward_bias", __FILE__, __LINE__);
    }
  };
  if (layer.gelu_after) {
    forward.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    forward.aux = pre.data();
    forward_production = [&] {
      if (!ctx.production_lt.forward_gelu(out.data(), pre.data(), inp.data(), weight.data(), bias.data(), N, C, OC,
                                          bf16, ctx.stream)) {
        pg::fail_cublas(CUBLAS_STATUS_NOT_SUPPORTED, "LtMatmul::forward_gelu", __FILE__, __LINE__);
      }
    };
  }
  status |= run_table(args, ctx, name + (layer.gelu_after ? " forward + GELU" : " forward"), forward, weight.data(),
                      inp.data(), out, std::vector<std::uint16_t>{}, layer.gelu_after ? kGeluTolerance
                                                                                      : kBf16OutTolerance,
                      forward_production);

  // dinp: D = dinp^T (C x N) = W (A: stored C x OC) dout^T (B: OC x N).
  Product backward{C, N, OC, false, false, bf16, CUBLASLT_EPILOGUE_DEFAULT, nullptr, nullptr, 0.0f};
  std::function<void()> backward_production = [&] {
    tk::cuda::gemm_row_major_ex(ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, N, C, OC, 1.0f, dout.data(), bf16, OC,
                                weight.data(), C, 0.0f, dinp.data(), bf16, C);
  };
  if (layer.gelu_before) {
    backward.epilogue = CUBLASLT_EPILOGUE_DGELU;
    backward.aux = gelu_input.data();
    backward_production = [&] {
      if (!ctx.production_lt.backward_dgelu(dinp.data(), dout.data(), weight.data(), gelu_input.data(), N, C, OC, bf16,
                                            ctx.stream)) {
        pg::fail_cublas(CUBLAS_STATUS_NOT_SUPPORTED, "LtMatmul::backward_dgelu", __FILE__, __LINE__);
      }
    };
  }
  status |= run_table(args, ctx, name + (layer.gelu_before ? " dinp through GELU" : " dinp"), backward,
                      weight.data(), dout.data(), dinp, std::vector<std::uint16_t>{},
                      layer.gelu_before ? kGeluTolerance : kBf16OutTolerance, backward_production);

  // dweight: D = dW^T (C x OC) += inp^T (A: stored C x N) dout (B: stored OC x N, transposed).
  const Product weight_gradient{C, OC, N, false, true, CUDA_R_32F, CUBLASLT_EPILOGUE_DEFAULT, nullptr, nullptr, 1.0f};
  status |= run_table(args, ctx, name + " dweight (fp32, accumulated)", weight_gradient, inp.data(), dout.data(),
                      dweight, dweight_start, kFp32OutTolerance, [&] {
                        tk::cuda::gemm_row_major_ex(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, OC, C, N, 1.0f, dout.data(),
                                                    bf16, OC, inp.data(), C, 1.0f, dweight.data(), CUDA_R_32F, C);
                      });
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  const pg::Args args = pg::parse_args_or_exit(argc, argv, "playground_matmul_algorithms");
  pg::require_gpu();
  const int N = pg::env_int("MM_N", 8 * 1024);
  const int C = pg::env_int("MM_C", 1280);
  const int algos = pg::env_int("MM_ALGOS", 8);

  const pg::Stream stream;
  pg::Timer timer(stream.get());
  const pg::CublasHandle cublas(stream.get(), CUBLAS_DEFAULT_MATH);
  cublasLtHandle_t lt = nullptr;
  PG_CUBLAS_CHECK(cublasLtCreate(&lt));
  tk::cuda::LtMatmul production_lt;
  const pg::DeviceBuffer<unsigned char> workspace(kWorkspaceBytes);
  const Context ctx{stream.get(), timer, cublas.get(), lt, production_lt, workspace.data(), N, algos};

  const Layer layers[] = {{C, 3 * C, "attention qkv", false, false},
                          {C, C, "attention projection", false, false},
                          {C, 4 * C, "MLP fc", true, false},
                          {4 * C, C, "MLP projection", false, true}};
  int status = 0;
  for (const Layer& layer : layers) status |= run_layer(args, ctx, layer);
  PG_CUBLAS_CHECK(cublasLtDestroy(lt));
  return status;
}
