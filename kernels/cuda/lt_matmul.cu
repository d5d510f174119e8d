// cuBLASLt linear layers with epilogues (lt_matmul.cuh).
//
// The row-major -> column-major mapping of gemm.cu: a row-major r x c buffer is the column-major
// c x r matrix. So, in cuBLASLt's column-major terms,
//   forward   out^T (OC x N, ld OC) = W (OC x C) @ inp^T (C x N):
//             A = W's buffer, stored C x OC (ld C), TRANSA = T; B = inp's buffer, C x N (ld C);
//             m = OC, n = N, k = C. The bias has one value per row of D (per output channel),
//             broadcast over the columns (tokens); the GELU input, written as aux, has D's layout.
//   backward  dpre^T (C x N, ld C) = W^T (C x OC) @ dout^T (OC x N):
//             A = W's buffer, stored C x OC (ld C), TRANSA = N; B = dout's buffer, OC x N (ld OC);
//             m = C, n = N, k = OC. aux = pre's buffer, D's layout.
//   weights   dW^T (C x OC, ld C, fp32) += inp^T (C x N) @ dout (N x OC):
//             A = inp's buffer, stored C x N (ld C), TRANSA = N; B = dout's buffer, stored OC x N
//             (ld OC), TRANSB = T; m = C, n = OC, k = N. BGRADB sums op(B) over k, one sum per
//             column of D: per output channel, over the tokens, the bias gradient.
// The playground's matmul_forward variants 3 to 5 (perf/kernels/matmul_forward.cu) run the same
// forward layout against the CPU twin.
#include "kernels/cuda/lt_matmul.cuh"

#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

#include "kernels/choice_table.h"           // choice_table_lines
#include "kernels/cuda/algorithm_timing.h"  // fastest_answer, TimedMatmulShape, format/parse_chosen_answer
#include "kernels/cuda/cuda_check.h"        // CUDA_CHECK, CUBLAS_CHECK
#include "kernels/out_of_memory.h"    // OutOfMemory, mib

namespace trident::kernels::cuda {

namespace {

// The largest power of two dividing the address, up to 256 (cuBLASLt's default assumption); 256
// for a null pointer (nothing to align).
unsigned alignment_of(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  unsigned alignment = 1;
  while (alignment < 256 && address % (2 * alignment) == 0) alignment *= 2;
  return alignment;
}

}  // namespace

// Descriptors and the chosen algorithm of one Key. The bias and aux pointers are set on the
// descriptor before each call (they change from layer to layer); the heuristic saw pointers of
// the key's alignment.
struct LtMatmul::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool available = false;
  std::vector<cublasLtMatmulAlgo_t> answers;  // under timing: the heuristic's, which a table's answer indexes

  ~Plan() {
    // Never throws: a failed destroy leaks a descriptor, nothing worse.
    if (d != nullptr) (void)cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) (void)cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) (void)cublasLtMatrixLayoutDestroy(a);
    if (desc != nullptr) (void)cublasLtMatmulDescDestroy(desc);
  }
};

LtMatmul::LtMatmul(bool timed) : timed_(timed) {
  if (timed_) {
    int device = 0;
    cudaDeviceProp properties{};
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
    library_ = "cuBLASLt " + std::to_string(cublasLtGetVersion()) + " on " + properties.name;
  }
  CUBLAS_CHECK(cublasLtCreate(&handle_));
  if (const cudaError_t status = cudaMalloc(&workspace_, kWorkspaceBytes); status != cudaSuccess) {
    (void)cublasLtDestroy(handle_);
    // Another error than a want of memory (an earlier kernel's fault) is reported as itself.
    if (status != cudaErrorMemoryAllocation) throw_cuda_error(status, "cudaMalloc", __FILE__, __LINE__);
    (void)cudaGetLastError();
    throw OutOfMemory("out of device memory: cuBLASLt's workspace of " + mib(kWorkspaceBytes) +
                      " could not be allocated (run.matmul_epilogues = separate does without it)");
  }
}

LtMatmul::~LtMatmul() {
  plans_.clear();
  if (workspace_ != nullptr && cudaFree(workspace_) != cudaSuccess) (void)cudaGetLastError();
  (void)cublasLtDestroy(handle_);
}

LtMatmul::Plan& LtMatmul::plan_for(const Call& call, cudaStream_t stream) {
  const Key key{static_cast<int>(call.epilogue), static_cast<int>(call.type), static_cast<int>(call.d_type),
                static_cast<int>(call.bias_type), call.m, call.n, call.k, call.transa ? 1 : 0, call.transb ? 1 : 0,
                alignment_of(call.a), alignment_of(call.b), alignment_of(call.d), alignment_of(call.bias),
                alignment_of(call.aux)};
  const auto found_plan = plans_.find(key);
  if (found_plan != plans_.end()) return *found_plan->second;
  // Built aside and cached only when complete: a call that throws halfway leaves no plan behind.
  auto made = std::make_unique<Plan>();
  Plan& plan = *made;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transa = call.transa ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t transb = call.transb ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &call.epilogue,
                                              sizeof call.epilogue));
  if (call.bias != nullptr) {
    const std::int32_t bias_type = call.bias_type;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                sizeof bias_type));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &call.bias,
                                                sizeof call.bias));
  }
  if (call.aux != nullptr) {
    const std::int64_t aux_ld = call.m;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                                sizeof aux_ld));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &call.aux,
                                                sizeof call.aux));
  }
  // The stored matrices (before op()): A is k x m when transposed, m x k otherwise.
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, call.type, call.transa ? call.k : call.m,
                                          call.transa ? call.m : call.k, call.transa ? call.k : call.m));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, call.type, call.transb ? call.n : call.k,
                                          call.transb ? call.k : call.n, call.transb ? call.n : call.k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.d, call.d_type, call.m, call.n, call.m));

  cublasLtMatmulPreference_t preference = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const std::size_t workspace = kWorkspaceBytes;
  const std::uint32_t align_a = key.align_a, align_b = key.align_b, align_d = key.align_d;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  for (const auto& [attribute, value, size] :
       {std::tuple{CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<const void*>(&workspace), sizeof workspace},
        std::tuple{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<const void*>(&align_a), sizeof align_a},
        std::tuple{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<const void*>(&align_b), sizeof align_b},
        std::tuple{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<const void*>(&align_d), sizeof align_d},
        std::tuple{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<const void*>(&align_d), sizeof align_d}}) {
    if (status == CUBLAS_STATUS_SUCCESS) status = cublasLtMatmulPreferenceSetAttribute(preference, attribute, value, size);
  }
  std::vector<cublasLtMatmulHeuristicResult_t> results(timed_ ? kTimedAnswers : 1);
  int found = 0;
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmulAlgoGetHeuristic(handle_, plan.desc, plan.a, plan.b, plan.d, plan.d, preference,
                                            static_cast<int>(results.size()), results.data(), &found);
  }
  (void)cublasLtMatmulPreferenceDestroy(preference);
  // No algorithm, or a combination this cuBLASLt refuses (NOT_SUPPORTED, or INVALID_VALUE for an
  // alignment or epilogue it does not take): the separate kernels run, which compute the same
  // thing, and CudaBackend::epilogue_counts says so. A broken device fails there instead.
  plan.available = status == CUBLAS_STATUS_SUCCESS && found > 0 && results[0].state == CUBLAS_STATUS_SUCCESS;
  if (plan.available) {
    plan.algo = results[0].algo;
    if (timed_) {
      for (int i = 0; i < found; ++i) plan.answers.push_back(results[static_cast<std::size_t>(i)].algo);
    }
    const auto adopted = adopted_.find(key);
    if (adopted != adopted_.end() && adopted->second.answers == found) {
      // The ranks' or a checkpoint's answer: the kernel the others run, untimed here.
      plan.algo = plan.answers[static_cast<std::size_t>(adopted->second.chosen)];
      shapes_[key] = adopted->second;
    } else if (timed_ && found > 1) {
      time_answers(key, plan, call, results.data(), found, stream);
    }
  }
  return *plans_.emplace(key, std::move(made)).first->second;
}

std::string LtMatmul::key_text(const Key& k) {
  char text[192];
  std::snprintf(text, sizeof text,
                "%d x %d x %d, transposes %d %d, epilogue %d, types %d %d %d, alignments %u %u %u %u %u", k.m, k.n,
                k.k, k.transa, k.transb, k.epilogue, k.type, k.d_type, k.bias_type, k.align_a, k.align_b, k.align_d,
                k.align_bias, k.align_aux);
  return text;
}

std::optional<LtMatmul::Key> LtMatmul::parse_key(const std::string& text) {
  Key k{};
  int consumed = 0;
  const int read = std::sscanf(text.c_str(),
                               "%d x %d x %d, transposes %d %d, epilogue %d, types %d %d %d, alignments %u %u %u %u %u%n",
                               &k.m, &k.n, &k.k, &k.transa, &k.transb, &k.epilogue, &k.type, &k.d_type, &k.bias_type,
                               &k.align_a, &k.align_b, &k.align_d, &k.align_bias, &k.align_aux, &consumed);
  if (read != 14 || static_cast<std::size_t>(consumed) != text.size()) return std::nullopt;
  return k;
}

std::vector<TimedMatmulShape> LtMatmul::timed_shapes() const {
  std::vector<TimedMatmulShape> shapes;
  for (const auto& entry : shapes_) shapes.push_back(entry.second);
  return shapes;
}

std::string LtMatmul::chosen_answers() const {
  if (shapes_.empty()) return {};
  std::string table = "library | " + library_ + "\n";
  for (const auto& [key, shape] : shapes_) table += key_text(key) + " | " + format_chosen_answer(shape) + "\n";
  return table;
}

bool LtMatmul::adopt_answers(const std::string& table) {
  if (!timed_) return false;
  const auto lines = choice_table_lines(table);
  bool same_library = false;
  for (const auto& [key, value] : lines) same_library = same_library || (key == "library" && value == library_);
  if (!same_library) return false;
  for (const auto& [text, value] : lines) {
    const std::optional<Key> key = parse_key(text);
    if (!key) continue;  // the library line
    std::optional<TimedMatmulShape> answer = parse_chosen_answer(value, {key->m, key->n, key->k, 0, 0, 0.0f, 0.0f});
    if (!answer) continue;
    answer->adopted = true;
    adopted_[*key] = *answer;
    const auto planned = plans_.find(*key);
    if (planned == plans_.end() || !planned->second->available) continue;
    Plan& plan = *planned->second;
    // Another count of answers here: the index may number another kernel (parse_chosen_answer
    // has checked it against the count).
    if (answer->answers != static_cast<int>(plan.answers.size())) continue;
    const auto known = shapes_.find(*key);
    if (known != shapes_.end() && known->second.chosen == answer->chosen) continue;  // this rank's own answer
    plan.algo = plan.answers[static_cast<std::size_t>(answer->chosen)];  // queued calls keep theirs
    shapes_[*key] = *answer;
  }
  return true;
}

void LtMatmul::time_answers(const Key& key, Plan& plan, const Call& call,
                            const cublasLtMatmulHeuristicResult_t* answers, int found, cudaStream_t stream) {
  // Where the call adds to D (a weight gradient), the runs go to a zeroed scratch of D's shape, so
  // that nothing is added more than once; elsewhere to the call's own D (and GELU input), which
  // the call itself then writes over. The scratch is held only while timing, at the shape's first
  // call; without the memory for it, the heuristic's first answer stays. Stream-ordered
  // (cudaMallocAsync, cudaFreeAsync): cudaFree would wait for the whole device, NCCL's streams
  // included, whose pipeline receives may wait on a peer that waits on this rank.
  void* d = call.d;
  void* scratch = nullptr;
  if (call.beta != 0.0f) {
    const std::size_t bytes =
        static_cast<std::size_t>(call.m) * static_cast<std::size_t>(call.n) * (call.d_type == CUDA_R_32F ? 4 : 2);
    if (cudaMallocAsync(&scratch, bytes, stream) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    CUDA_CHECK(cudaMemsetAsync(scratch, 0, bytes, stream));
    d = scratch;
  }
  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  const float alpha = 1.0f;
  std::vector<float> ms(static_cast<std::size_t>(found), -1.0f);
  for (int i = 0; i < found; ++i) {
    if (answers[i].state != CUBLAS_STATUS_SUCCESS || answers[i].workspaceSize > kWorkspaceBytes) continue;
    auto launch = [&] {
      return cublasLtMatmul(handle_, plan.desc, &alpha, call.a, plan.a, call.b, plan.b, &call.beta, d, plan.d, d,
                            plan.d, &answers[i].algo, workspace_, kWorkspaceBytes, stream);
    };
    if (launch() != CUBLAS_STATUS_SUCCESS) continue;  // an answer this call cannot take: not timed
    CUDA_CHECK(cudaEventRecord(start, stream));
    bool ran = true;
    for (int r = 0; r < kTimedRepeats && ran; ++r) ran = launch() == CUBLAS_STATUS_SUCCESS;
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));  // this stream's runs only, as a workspace's growth waits
    float elapsed = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&elapsed, start, stop));
    if (ran) ms[static_cast<std::size_t>(i)] = elapsed / kTimedRepeats;
  }
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  if (scratch != nullptr) CUDA_CHECK(cudaFreeAsync(scratch, stream));  // after the timed runs, in stream order
  const int chosen = fastest_answer(ms, kTimedMargin);
  if (chosen < 0) return;  // none ran: the first answer stays, and the call's own run reports why
  plan.algo = answers[chosen].algo;
  shapes_[key] = {call.m, call.n, call.k, found, chosen, ms[0], ms[static_cast<std::size_t>(chosen)]};
}

bool LtMatmul::run(const Call& call, cudaStream_t stream) {
  if (call.m == 0 || call.n == 0) return true;  // nothing to write
  // The GELU input's leading dimension must be a multiple of 8 (cublasLt.h).
  if (call.aux != nullptr && call.m % 8 != 0) return false;
  Plan& plan = plan_for(call, stream);
  if (!plan.available) return false;
  if (call.bias != nullptr) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &call.bias,
                                                sizeof call.bias));
  }
  if (call.aux != nullptr) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &call.aux,
                                                sizeof call.aux));
  }
  const float alpha = 1.0f;  // C is D: with beta = 0 never read, with 1 added to
  CUBLAS_CHECK(cublasLtMatmul(handle_, plan.desc, &alpha, call.a, plan.a, call.b, plan.b, &call.beta, call.d, plan.d,
                              call.d, plan.d, &plan.algo, workspace_, kWorkspaceBytes, stream));
  return true;
}

bool LtMatmul::forward_bias(void* out, const void* inp, const void* weight, const void* bias, int N, int C, int OC,
                            cudaDataType_t type, cudaStream_t stream) {
  return run({CUBLASLT_EPILOGUE_BIAS, type, type, OC, N, C, true, false, 0.0f, weight, inp, out, bias, type, nullptr},
             stream);
}

bool LtMatmul::forward_gelu(void* out, void* pre, const void* inp, const void* weight, const void* bias, int N, int C,
                            int OC, cudaDataType_t type, cudaStream_t stream) {
  const cublasLtEpilogue_t epilogue = bias != nullptr ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
  return run({epilogue, type, type, OC, N, C, true, false, 0.0f, weight, inp, out, bias, type, pre}, stream);
}

bool LtMatmul::backward_dgelu(void* dpre, const void* dout, const void* weight, const void* pre, int N, int C, int OC,
                              cudaDataType_t type, cudaStream_t stream) {
  return run({CUBLASLT_EPILOGUE_DGELU, type, type, C, N, OC, false, false, 0.0f, weight, dout, dpre, nullptr, type, pre},
             stream);
}

bool LtMatmul::input_gradient(void* dinp, const void* dout, const void* weight, int N, int C, int OC,
                              cudaDataType_t type, cudaStream_t stream) {
  return run({CUBLASLT_EPILOGUE_DEFAULT, type, type, C, N, OC, false, false, 0.0f, weight, dout, dinp, nullptr, type,
              nullptr},
             stream);
}

bool LtMatmul::weight_gradient(float* dweight, const void* dout, const void* inp, int N, int C, int OC,
                               cudaDataType_t type, cudaStream_t stream) {
  return run({CUBLASLT_EPILOGUE_DEFAULT, type, CUDA_R_32F, C, OC, N, false, true, 1.0f, inp, dout, dweight, nullptr,
              CUDA_R_32F, nullptr},
             stream);
}

bool LtMatmul::weight_gradient_bias_sums(float* dweight, float* bias_sums, const void* dout, const void* inp, int N,
                                         int C, int OC, cudaDataType_t type, cudaStream_t stream) {
  return run({CUBLASLT_EPILOGUE_BGRADB, type, CUDA_R_32F, C, OC, N, false, true, 1.0f, inp, dout, dweight, bias_sums,
              CUDA_R_32F, nullptr},
             stream);
}

}  // namespace trident::kernels::cuda
