// cuBLAS and cuBLASLt opened on first use (cublas_library.h says why). Trident links against
// neither: this file defines each cuBLAS function that Trident calls, with the header's own
// declaration, as a call through a pointer that dlsym found in the library opened on the first
// call. Only those functions: a call to another cuBLAS function is a link error here, which is
// where it belongs (add it to the lists below). The executable exports none of these names, so
// cuBLAS's own calls into cuBLASLt go straight to cuBLASLt.
//
// Measured on the 2-vCPU build machine (2026-11-24): `trident --version` under mpirun with 8
// ranks took 0.88 s of wall and 1.27 s of CPU linked to cuBLAS, 0.49 s and 0.47 s in a build
// without CUDA; dlopen of libcublas.so.13 alone 0.05 to 0.07 s per process (relocations of
// libcublasLt). The CTest suite starts several hundred processes.
#include "kernels/cuda/cublas_library.h"

#include <dlfcn.h>

#include <string>

#ifndef TRIDENT_CUDA_EMULATION
#include <cublasLt.h>
#include <cublas_v2.h>
#endif

#include "kernels/cuda_devices.h"  // cuda_library_problem

namespace trident::kernels {

namespace cuda {

OpenedLibrary open_library(const std::string& soname, const std::string& fallback_dir) {
  OpenedLibrary opened;
  // RTLD_NOW: a library that cannot resolve its own dependencies fails here, not at a call.
  opened.handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (opened.handle != nullptr) return opened;
  const char* first = dlerror();
  std::string problem = first != nullptr ? first : soname + ": not found";
  if (!fallback_dir.empty()) {
    const std::string path = fallback_dir + "/" + soname;
    opened.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (opened.handle != nullptr) return opened;
    problem += " (nor " + path + ")";
  }
  opened.problem = problem + ": install it on this node or add its directory to LD_LIBRARY_PATH";
  return opened;
}

#ifdef TRIDENT_CUDA_EMULATION

const std::string& cublas_problem() {
  static const std::string none;
  return none;
}

#else

namespace {

// The cuBLAS and cuBLASLt functions Trident calls (`nm -u` over its objects lists them).
// clang-format off
#define TRIDENT_CUBLAS_FUNCTIONS(X) \
  X(cublasCreate_v2)                \
  X(cublasDestroy_v2)               \
  X(cublasSetStream_v2)             \
  X(cublasSetMathMode)              \
  X(cublasGetStatusString)          \
  X(cublasSgemm_v2)                 \
  X(cublasSgemmBatched)             \
  X(cublasSgemmStridedBatched)      \
  X(cublasGemmEx)                   \
  X(cublasGemmBatchedEx)            \
  X(cublasGemmStridedBatchedEx)
#define TRIDENT_CUBLASLT_FUNCTIONS(X)         \
  X(cublasLtCreate)                           \
  X(cublasLtDestroy)                          \
  X(cublasLtGetVersion)                       \
  X(cublasLtMatmul)                           \
  X(cublasLtMatmulAlgoConfigGetAttribute)     \
  X(cublasLtMatmulAlgoGetHeuristic)           \
  X(cublasLtMatmulDescCreate)                 \
  X(cublasLtMatmulDescDestroy)                \
  X(cublasLtMatmulDescSetAttribute)           \
  X(cublasLtMatmulPreferenceCreate)           \
  X(cublasLtMatmulPreferenceDestroy)          \
  X(cublasLtMatmulPreferenceSetAttribute)     \
  X(cublasLtMatrixLayoutCreate)               \
  X(cublasLtMatrixLayoutDestroy)
// clang-format on

// The functions by name, as indices into Cublas::functions.
enum class Function {
#define TRIDENT_CUBLAS_ENUMERATOR(name) name,
  TRIDENT_CUBLAS_FUNCTIONS(TRIDENT_CUBLAS_ENUMERATOR) TRIDENT_CUBLASLT_FUNCTIONS(TRIDENT_CUBLAS_ENUMERATOR)
#undef TRIDENT_CUBLAS_ENUMERATOR
      kCount
};

// The loaded functions' addresses (all null when loading failed), and why not.
struct Cublas {
  void* functions[static_cast<int>(Function::kCount)] = {};
  std::string problem;
};

std::string soname(const char* stem) { return std::string("lib") + stem + ".so." + std::to_string(CUBLAS_VER_MAJOR); }

Cublas load() {
  Cublas cublas;
  // cuBLASLt first: cuBLAS needs it, and opened on its own it is named when it is what is missing.
  // Never closed: cuBLAS keeps state for the process's handles and cannot be unloaded under them.
  const std::string lt_name = soname("cublasLt");
  const std::string blas_name = soname("cublas");
  OpenedLibrary lt = open_library(lt_name, TRIDENT_CUBLAS_FALLBACK_DIR);
  OpenedLibrary blas = lt.handle != nullptr ? open_library(blas_name, TRIDENT_CUBLAS_FALLBACK_DIR) : OpenedLibrary{};
  if (lt.handle == nullptr || blas.handle == nullptr) {
    cublas.problem = "cuBLAS cannot be loaded: " + (lt.handle == nullptr ? lt.problem : blas.problem);
    return cublas;
  }
  std::string missing;
  auto resolve = [&](Function f, void* library, const char* name) {
    void*& slot = cublas.functions[static_cast<int>(f)];
    slot = dlsym(library, name);
    if (slot == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
#define TRIDENT_CUBLAS_RESOLVE(name) resolve(Function::name, blas.handle, #name);
  TRIDENT_CUBLAS_FUNCTIONS(TRIDENT_CUBLAS_RESOLVE)
#undef TRIDENT_CUBLAS_RESOLVE
#define TRIDENT_CUBLAS_RESOLVE(name) resolve(Function::name, lt.handle, #name);
  TRIDENT_CUBLASLT_FUNCTIONS(TRIDENT_CUBLAS_RESOLVE)
#undef TRIDENT_CUBLAS_RESOLVE
  if (!missing.empty()) {
    cublas = Cublas{};
    cublas.problem = "the cuBLAS found (" + blas_name + ", " + lt_name + ") lacks " + missing +
                     ": Trident was built against cuBLAS " + std::to_string(CUBLAS_VER_MAJOR) + "." +
                     std::to_string(CUBLAS_VER_MINOR) + "; load that CUDA toolkit or a newer one of the same major version";
  }
  return cublas;
}

// Loaded once per process, on first use, and read-only after (a function-local static: thread-safe
// initialisation, no state to pass around for what the dynamic loader holds process-wide anyway).
const Cublas& cublas() {
  static const Cublas loaded = load();
  return loaded;
}

// A call of `function` with the forwarder's own arguments, or CUBLAS_STATUS_NOT_INITIALIZED when
// cuBLAS did not load (the check macros then add cublas_problem() to the error). The function's
// type is made from the forwarder's parameter types: each forwarder below is a definition of the
// header's extern "C" declaration, which the compiler holds it to (a C function cannot be
// declared twice with other parameters), and passes its parameters in order.
template <class... Args>
cublasStatus_t call(Function function, Args... args) {
  void* address = cublas().functions[static_cast<int>(function)];
  if (address == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  return reinterpret_cast<cublasStatus_t (*)(Args...)>(address)(args...);
}

}  // namespace

const std::string& cublas_problem() { return cublas().problem; }

#endif  // TRIDENT_CUDA_EMULATION

}  // namespace cuda

std::string cuda_library_problem() { return cuda::cublas_problem(); }

}  // namespace trident::kernels

#ifndef TRIDENT_CUDA_EMULATION

// The definitions the linker finds for Trident's cuBLAS calls, with the headers' declarations.
using trident::kernels::cuda::Function;
using trident::kernels::cuda::call;
using trident::kernels::cuda::cublas;

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) { return call(Function::cublasCreate_v2, handle); }
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) { return call(Function::cublasDestroy_v2, handle); }
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  return call(Function::cublasSetStream_v2, handle, stream);
}
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  return call(Function::cublasSetMathMode, handle, mode);
}
size_t cublasLtGetVersion() {
  void* address = cublas().functions[static_cast<int>(Function::cublasLtGetVersion)];
  return address != nullptr ? reinterpret_cast<size_t (*)()>(address)() : 0;  // 0: cuBLASLt not loaded
}
const char* cublasGetStatusString(cublasStatus_t status) {
  void* address = cublas().functions[static_cast<int>(Function::cublasGetStatusString)];
  if (address != nullptr) return reinterpret_cast<const char* (*)(cublasStatus_t)>(address)(status);
  return status == CUBLAS_STATUS_NOT_INITIALIZED ? "CUBLAS_STATUS_NOT_INITIALIZED" : "(cuBLAS not loaded)";
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                              int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                              const float* beta, float* C, int ldc) {
  return call(Function::cublasSgemm_v2, handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
cublasStatus_t cublasSgemmBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                  int n, int k, const float* alpha, const float* const Aarray[], int lda,
                                  const float* const Barray[], int ldb, const float* beta, float* const Carray[],
                                  int ldc, int batchCount) {
  return call(Function::cublasSgemmBatched, handle, transa, transb, m, n, k, alpha, Aarray, lda, Barray, ldb, beta,
              Carray, ldc, batchCount);
}
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const float* alpha, const float* A, int lda,
                                         long long int strideA, const float* B, int ldb, long long int strideB,
                                         const float* beta, float* C, int ldc, long long int strideC,
                                         int batchCount) {
  return call(Function::cublasSgemmStridedBatched, handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb,
              strideB, beta, C, ldc, strideC, batchCount);
}
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  return call(Function::cublasGemmEx, handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C,
              Ctype, ldc, computeType, algo);
}
cublasStatus_t cublasGemmBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                   int n, int k, const void* alpha, const void* const Aarray[], cudaDataType Atype,
                                   int lda, const void* const Barray[], cudaDataType Btype, int ldb, const void* beta,
                                   void* const Carray[], cudaDataType Ctype, int ldc, int batchCount,
                                   cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  return call(Function::cublasGemmBatchedEx, handle, transa, transb, m, n, k, alpha, Aarray, Atype, lda, Barray,
              Btype, ldb, beta, Carray, Ctype, ldc, batchCount, computeType, algo);
}
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype,
                                          int lda, long long int strideA, const void* B, cudaDataType Btype, int ldb,
                                          long long int strideB, const void* beta, void* C, cudaDataType Ctype,
                                          int ldc, long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  return call(Function::cublasGemmStridedBatchedEx, handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B,
              Btype, ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType, algo);
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) { return call(Function::cublasLtCreate, handle); }
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) { return call(Function::cublasLtDestroy, handle); }
cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream) {
  return call(Function::cublasLtMatmul, handle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo,
              workspace, workspaceSizeInBytes, stream);
}
cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t* algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr, void* buf,
                                                    size_t sizeInBytes, size_t* sizeWritten) {
  return call(Function::cublasLtMatmulAlgoConfigGetAttribute, algo, attr, buf, sizeInBytes, sizeWritten);
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int* returnAlgoCount) {
  return call(Function::cublasLtMatmulAlgoGetHeuristic, handle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference,
              requestedAlgoCount, heuristicResultsArray, returnAlgoCount);
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
  return call(Function::cublasLtMatmulDescCreate, matmulDesc, computeType, scaleType);
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  return call(Function::cublasLtMatmulDescDestroy, matmulDesc);
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t sizeInBytes) {
  return call(Function::cublasLtMatmulDescSetAttribute, matmulDesc, attr, buf, sizeInBytes);
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  return call(Function::cublasLtMatmulPreferenceCreate, pref);
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  return call(Function::cublasLtMatmulPreferenceDestroy, pref);
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t sizeInBytes) {
  return call(Function::cublasLtMatmulPreferenceSetAttribute, pref, attr, buf, sizeInBytes);
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  return call(Function::cublasLtMatrixLayoutCreate, matLayout, type, rows, cols, ld);
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  return call(Function::cublasLtMatrixLayoutDestroy, matLayout);
}

}  // extern "C"

#endif  // TRIDENT_CUDA_EMULATION
