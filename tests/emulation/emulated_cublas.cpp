// The cuBLAS and cuBLASLt calls Trident makes, computed on the CPU for the emulation build
// (cuda_emulation.h), with the argument checks the libraries document: leading dimensions
// against the stored shapes, layouts against m, n and k, the GELU input's leading dimension a
// multiple of 8, pointers aligned as the heuristic was promised, and every matrix, bias, GELU
// input and pointer array inside device memory. A violated rule returns the status the
// library would (CUBLAS_STATUS_INVALID_VALUE, NOT_SUPPORTED); a host pointer stops the program,
// as the GPU would fault on it.
//
// The checks run at the call, as the libraries return their status there; the product is
// queued on the handle's (or the call's) stream and reads the matrices when it runs.
//
// The products are summed in double (OpenBLAS's dgemm) and rounded once to the output's type: the
// emulation checks which numbers are multiplied with which, not the GPU's order of summation
// (the GPU tests' tolerances cover fp32 accumulation on the real device). With the handle in
// CUBLAS_TF32_TENSOR_OP_MATH, fp32 inputs are first rounded to TF32 (10 explicit significand
// bits, to nearest, ties away from zero, as PTX's cvt.rna.tf32.f32), as the tensor cores read
// them: so a test that relies on inputs being exact in TF32 is checked here too.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <vector>

#include "tests/emulation/emulated_state.h"

namespace cuda_emu {
namespace {

std::size_t element_bytes(cudaDataType_t type) {
  switch (type) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16BF:
    case CUDA_R_16F: return 2;
    default: return 0;
  }
}

// fp32 rounded to TF32: the low 13 of its 23 significand bits dropped, to nearest (ties away).
float to_tf32(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u) return x;  // inf and NaN as they are
  bits = (bits + 0x1000u) & ~0x1fffu;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

double load(cudaDataType_t type, const void* base, std::size_t index) {
  switch (type) {
    case CUDA_R_16BF: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[index]);
    case CUDA_R_16F: return __half2float(static_cast<const __half*>(base)[index]);
    default: return static_cast<const float*>(base)[index];
  }
}

void store(cudaDataType_t type, void* base, std::size_t index, double value) {
  const auto f = static_cast<float>(value);
  switch (type) {
    case CUDA_R_16BF: static_cast<__nv_bfloat16*>(base)[index] = __float2bfloat16_rn(f); break;
    case CUDA_R_16F: static_cast<__half*>(base)[index] = __float2half_rn(f); break;
    default: static_cast<float*>(base)[index] = f; break;
  }
}

// A column-major matrix as stored: rows x cols with leading dimension ld; tf32: read as the
// tensor cores would in TF32 mode.
struct Stored {
  const void* data;
  cudaDataType_t type;
  long long rows, cols, ld;
  bool tf32 = false;
  std::size_t bytes() const {
    if (rows == 0 || cols == 0) return 0;
    return static_cast<std::size_t>((cols - 1) * ld + rows) * element_bytes(type);
  }
};

// A stored matrix widened to a dense column-major double one (ld = rows).
std::vector<double> widened(const Stored& x) {
  std::vector<double> out(static_cast<std::size_t>(x.rows * x.cols));
  for (long long j = 0; j < x.cols; ++j) {
    for (long long i = 0; i < x.rows; ++i) {
      const double value = load(x.type, x.data, static_cast<std::size_t>(i + j * x.ld));
      out[static_cast<std::size_t>(i + j * x.rows)] =
          x.tf32 && x.type == CUDA_R_32F ? to_tf32(static_cast<float>(value)) : value;
    }
  }
  return out;
}

// op(A) op(B), m x n column-major, in double through OpenBLAS (the exact products of the
// stored values, summed in double): fast enough for the tests' 8192 x 768 x 2304 products.
std::vector<double> product(bool ta, bool tb, long long m, long long n, long long k, const Stored& a,
                            const Stored& b) {
  std::vector<double> out(static_cast<std::size_t>(m * n), 0.0);
  if (m == 0 || n == 0 || k == 0) return out;
  const std::vector<double> wa = widened(a), wb = widened(b);
  cblas_dgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0, wa.data(), static_cast<int>(std::max(1LL, a.rows)),
              wb.data(), static_cast<int>(std::max(1LL, b.rows)), 0.0, out.data(), static_cast<int>(m));
  return out;
}

// C(m x n, ldc) = alpha op(A) op(B) + beta C (cuBLAS's classic API: C is also the output).
void reference_gemm(bool ta, bool tb, long long m, long long n, long long k, double alpha, const Stored& a,
                    const Stored& b, double beta, void* c, cudaDataType_t c_type, long long ldc) {
  const std::vector<double> ab = product(ta, tb, m, n, k, a, b);
  for (long long j = 0; j < n; ++j) {
    for (long long i = 0; i < m; ++i) {
      const auto index = static_cast<std::size_t>(i + j * ldc);
      double value = alpha * ab[static_cast<std::size_t>(i + j * m)];
      if (beta != 0.0) value += beta * load(c_type, c, index);  // beta = 0: C is not read (it may hold NaN)
      store(c_type, c, index, value);
    }
  }
}

bool supported_types(cudaDataType_t a, cudaDataType_t b, cudaDataType_t c) {
  if (a != b || element_bytes(a) == 0 || element_bytes(c) == 0) return false;
  return c == a || c == CUDA_R_32F;
}

// A cuBLAS handle: the stream its work is queued on and its math mode.
struct Blas {
  cudaStream_t stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

Blas& blas_of(cublasHandle_t handle) { return *reinterpret_cast<Blas*>(handle); }

// The classic API's checks of one product of a batch (the matrices' addresses are checked when
// it runs: a batched call's pointer arrays may be filled by work queued before it).
cublasStatus_t check_gemm(bool ta, bool tb, int m, int n, int k, cudaDataType_t a_type, int lda,
                          cudaDataType_t b_type, int ldb, cudaDataType_t c_type, int ldc) {
  if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (lda < std::max(1, ta ? k : m) || ldb < std::max(1, tb ? n : k) || ldc < std::max(1, m)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (!supported_types(a_type, b_type, c_type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  return CUBLAS_STATUS_SUCCESS;
}

// One product of a batch, as the queued work runs it.
struct Gemm {
  bool ta, tb, tf32;
  int m, n, k;
  double alpha, beta;
  cudaDataType_t a_type, b_type, c_type;
  int lda, ldb, ldc;

  void run(const void* A, const void* B, void* C) const {
    if (m == 0 || n == 0) return;
    const Stored a{A, a_type, ta ? k : m, ta ? m : k, lda, tf32};
    const Stored b{B, b_type, tb ? n : k, tb ? k : n, ldb, tf32};
    const Stored c{C, c_type, m, n, ldc};
    if (k > 0 && alpha != 0.0) {
      require_device_range(A, a.bytes(), "cuBLAS GEMM matrix A");
      require_device_range(B, b.bytes(), "cuBLAS GEMM matrix B");
    }
    require_device_range(C, c.bytes(), "cuBLAS GEMM matrix C");
    reference_gemm(ta, tb, m, n, k, alpha, a, b, beta, C, c_type, ldc);
  }
};

// The checks, then the product(s) queued on the handle's stream; pointers(i) gives the i-th
// product's A, B and C when the work runs.
template <class Pointers>
cublasStatus_t queue_gemms(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const void* alpha, cudaDataType_t a_type, int lda, cudaDataType_t b_type, int ldb,
                           const void* beta, cudaDataType_t c_type, int ldc, int batch, Pointers pointers) {
  const bool ta = transa != CUBLAS_OP_N;
  const bool tb = transb != CUBLAS_OP_N;
  if (batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  const cublasStatus_t status = check_gemm(ta, tb, m, n, k, a_type, lda, b_type, ldb, c_type, ldc);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  const Blas& h = blas_of(handle);
  // alpha and beta are host scalars (the default pointer mode): read at the call.
  const bool tf32 = (h.math & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) == CUBLAS_TF32_TENSOR_OP_MATH;
  const Gemm g{ta, tb, tf32, m, n, k,
               *static_cast<const float*>(alpha), *static_cast<const float*>(beta),
               a_type, b_type, c_type, lda, ldb, ldc};
  enqueue(h.stream, [g, batch, pointers] {
    for (int i = 0; i < batch; ++i) {
      const auto [A, B, C] = pointers(i);
      g.run(A, B, C);
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}

// An opaque handle: a unique address the library side never reads.
template <class Handle>
cublasStatus_t create_handle(Handle* handle) {
  *handle = reinterpret_cast<Handle>(new char);
  return CUBLAS_STATUS_SUCCESS;
}

template <class Handle>
cublasStatus_t destroy_handle(Handle handle) {
  delete reinterpret_cast<char*>(handle);
  return CUBLAS_STATUS_SUCCESS;
}

template <class T>
void require_pointer_array(T* const* array, int count, const char* what) {
  require_device_range(array, static_cast<std::size_t>(count) * sizeof(void*), what);
}

}  // namespace
}  // namespace cuda_emu

using cuda_emu::queue_gemms;

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  *handle = reinterpret_cast<cublasHandle_t>(new cuda_emu::Blas);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  delete &cuda_emu::blas_of(handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  cuda_emu::check_stream(stream);
  cuda_emu::blas_of(handle).stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  cuda_emu::blas_of(handle).math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN (emulation)";
  }
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType_t Atype, int lda, const void* B,
                            cudaDataType_t Btype, int ldb, const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t) {
  if (computeType != CUBLAS_COMPUTE_32F) return CUBLAS_STATUS_NOT_SUPPORTED;  // the only one Trident asks for
  return queue_gemms(handle, transa, transb, m, n, k, alpha, Atype, lda, Btype, ldb, beta, Ctype, ldc, 1,
                     [A, B, C](int) { return std::make_tuple(A, B, C); });
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void* alpha, const void* A, cudaDataType_t Atype,
                                          int lda, long long int strideA, const void* B, cudaDataType_t Btype, int ldb,
                                          long long int strideB, const void* beta, void* C, cudaDataType_t Ctype,
                                          int ldc, long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t) {
  if (computeType != CUBLAS_COMPUTE_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  const auto* a = static_cast<const unsigned char*>(A);
  const auto* b = static_cast<const unsigned char*>(B);
  auto* c = static_cast<unsigned char*>(C);
  const long long step_a = strideA * static_cast<long long>(cuda_emu::element_bytes(Atype));
  const long long step_b = strideB * static_cast<long long>(cuda_emu::element_bytes(Btype));
  const long long step_c = strideC * static_cast<long long>(cuda_emu::element_bytes(Ctype));
  return queue_gemms(handle, transa, transb, m, n, k, alpha, Atype, lda, Btype, ldb, beta, Ctype, ldc, batchCount,
                     [=](int i) {
                       return std::make_tuple(static_cast<const void*>(a + i * step_a),
                                              static_cast<const void*>(b + i * step_b),
                                              static_cast<void*>(c + i * step_c));
                     });
}

cublasStatus_t cublasGemmBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                   int n, int k, const void* alpha, const void* const Aarray[], cudaDataType_t Atype,
                                   int lda, const void* const Barray[], cudaDataType_t Btype, int ldb,
                                   const void* beta, void* const Carray[], cudaDataType_t Ctype, int ldc,
                                   int batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t) {
  if (computeType != CUBLAS_COMPUTE_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (batchCount < 0) return CUBLAS_STATUS_INVALID_VALUE;
  cuda_emu::require_pointer_array(Aarray, batchCount, "cuBLAS batched GEMM pointer array A");
  cuda_emu::require_pointer_array(Barray, batchCount, "cuBLAS batched GEMM pointer array B");
  cuda_emu::require_pointer_array(Carray, batchCount, "cuBLAS batched GEMM pointer array C");
  // The arrays are device memory: read when the work runs, after the kernels that fill them.
  return queue_gemms(handle, transa, transb, m, n, k, alpha, Atype, lda, Btype, ldb, beta, Ctype, ldc, batchCount,
                     [Aarray, Barray, Carray](int i) { return std::make_tuple(Aarray[i], Barray[i], Carray[i]); });
}

// The fp32 calls: the Ex ones on fp32 matrices.
cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                              int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                              const float* beta, float* C, int ldc) {
  return cublasGemmEx(handle, transa, transb, m, n, k, alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, beta, C,
                      CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const float* alpha, const float* A, int lda,
                                         long long int strideA, const float* B, int ldb, long long int strideB,
                                         const float* beta, float* C, int ldc, long long int strideC, int batchCount) {
  return cublasGemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, A, CUDA_R_32F, lda, strideA, B, CUDA_R_32F,
                                    ldb, strideB, beta, C, CUDA_R_32F, ldc, strideC, batchCount, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t cublasSgemmBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                  int n, int k, const float* alpha, const float* const Aarray[], int lda,
                                  const float* const Barray[], int ldb, const float* beta, float* const Carray[],
                                  int ldc, int batchCount) {
  return cublasGemmBatchedEx(handle, transa, transb, m, n, k, alpha, reinterpret_cast<const void* const*>(Aarray),
                             CUDA_R_32F, lda, reinterpret_cast<const void* const*>(Barray), CUDA_R_32F, ldb, beta,
                             reinterpret_cast<void* const*>(Carray), CUDA_R_32F, ldc, batchCount, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT);
}

}  // extern "C"

// --- cuBLASLt --------------------------------------------------------------------------------

namespace cuda_emu {
namespace {

struct LtDesc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  std::int32_t transa = CUBLAS_OP_N;
  std::int32_t transb = CUBLAS_OP_N;
  std::uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  std::int32_t bias_type = -1;  // unset: the output's type
  void* aux = nullptr;
  std::int64_t aux_ld = 0;
};

struct LtLayout {
  cudaDataType_t type;
  std::uint64_t rows, cols;
  std::int64_t ld;
};

struct LtPreference {
  std::uint64_t workspace = 0;
  std::uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D
};

template <class T>
cublasStatus_t set_value(T& field, const void* buffer, std::size_t size) {
  if (size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buffer, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

bool has_bias(std::uint32_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool writes_aux(std::uint32_t e) { return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS; }
bool applies_gelu(std::uint32_t e) {
  return e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS || writes_aux(e);
}
bool supported_epilogue(std::uint32_t e) {
  return e == CUBLASLT_EPILOGUE_DEFAULT || has_bias(e) || applies_gelu(e) || e == CUBLASLT_EPILOGUE_DGELU ||
         e == CUBLASLT_EPILOGUE_BGRADB;
}

// The tanh form of GELU that cuBLASLt's epilogues use, and its derivative.
double gelu(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double gelu_derivative(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  const double u = k * (x + 0.044715 * x * x * x);
  const double t = std::tanh(u);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

// Shapes, types and epilogue inputs, as the heuristic and the matmul check them.
cublasStatus_t check_lt(const LtDesc& d, const LtLayout& a, const LtLayout& b, const LtLayout& c, const LtLayout& dl) {
  if (d.compute != CUBLAS_COMPUTE_32F || d.scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!supported_epilogue(d.epilogue)) return CUBLAS_STATUS_NOT_SUPPORTED;
  const bool ta = d.transa != CUBLAS_OP_N;
  const bool tb = d.transb != CUBLAS_OP_N;
  const std::uint64_t m = dl.rows, n = dl.cols;
  const std::uint64_t k = ta ? a.rows : a.cols;
  if ((ta ? a.cols : a.rows) != m || (tb ? b.rows : b.cols) != n || (tb ? b.cols : b.rows) != k) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (c.rows != m || c.cols != n) return CUBLAS_STATUS_INVALID_VALUE;
  for (const LtLayout* l : {&a, &b, &c, &dl}) {
    if (l->ld < static_cast<std::int64_t>(std::max<std::uint64_t>(1, l->rows))) return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (!supported_types(a.type, b.type, dl.type) || c.type != dl.type) return CUBLAS_STATUS_NOT_SUPPORTED;
  if ((has_bias(d.epilogue) || d.epilogue == CUBLASLT_EPILOGUE_BGRADB) && d.bias == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (writes_aux(d.epilogue) || d.epilogue == CUBLASLT_EPILOGUE_DGELU) {
    if (d.aux == nullptr || d.aux_ld < static_cast<std::int64_t>(m) || d.aux_ld % 8 != 0) {
      return CUBLAS_STATUS_INVALID_VALUE;
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

// The product as answer `answer` of the heuristic makes it: the first (0) exactly, in double; the
// others scaled by 1 + answer * 2^-12. Real kernels that sum in another order differ in the last
// bits only; these differ more, so that which answer ran shows through a few steps of training,
// past the rounding to 16 bits and AdamW's normalisation (tests/emulation/training_layouts_test.sh).
void scale_as_answer(std::vector<double>& ab, std::uint64_t answer) {
  if (answer == 0) return;
  const double scale = 1.0 + static_cast<double>(answer) * 0x1p-12;
  for (double& v : ab) v *= scale;
}

// D = epilogue(alpha op(A) op(B) + beta C), as the queued work runs it with answer `answer`.
void lt_matmul(const LtDesc& d, const LtLayout& a, const LtLayout& b, const LtLayout& c, const LtLayout& dl,
               double al, double be, const void* A, const void* B, const void* C, void* D, std::uint64_t answer) {
  const bool ta = d.transa != CUBLAS_OP_N;
  const bool tb = d.transb != CUBLAS_OP_N;
  const auto m = static_cast<long long>(dl.rows);
  const auto n = static_cast<long long>(dl.cols);
  const auto k = static_cast<long long>(ta ? a.rows : a.cols);
  const Stored sa{A, a.type, static_cast<long long>(a.rows), static_cast<long long>(a.cols), a.ld};
  const Stored sb{B, b.type, static_cast<long long>(b.rows), static_cast<long long>(b.cols), b.ld};
  const Stored sc{C, c.type, m, n, c.ld};
  const Stored sd{D, dl.type, m, n, dl.ld};
  const auto bias_type = static_cast<cudaDataType_t>(d.bias_type < 0 ? dl.type : d.bias_type);
  require_device_range(A, sa.bytes(), "cuBLASLt matrix A");
  require_device_range(B, sb.bytes(), "cuBLASLt matrix B");
  if (be != 0.0) require_device_range(C, sc.bytes(), "cuBLASLt matrix C");
  require_device_range(D, sd.bytes(), "cuBLASLt matrix D");
  if (has_bias(d.epilogue)) {
    require_device_range(d.bias, static_cast<std::size_t>(m) * element_bytes(bias_type), "cuBLASLt bias");
  }
  const bool aux = writes_aux(d.epilogue) || d.epilogue == CUBLASLT_EPILOGUE_DGELU;
  const Stored saux{d.aux, dl.type, m, n, d.aux_ld};
  if (aux) require_device_range(d.aux, saux.bytes(), "cuBLASLt GELU input (aux)");
  std::vector<double> ab = product(ta, tb, m, n, k, sa, sb);
  scale_as_answer(ab, answer);
  if (d.epilogue == CUBLASLT_EPILOGUE_BGRADB) {
    // The bias gradient: op(B) summed over k, one sum per column of D, written (not added).
    require_device_range(d.bias, static_cast<std::size_t>(n) * element_bytes(bias_type), "cuBLASLt bias gradient");
    for (long long j = 0; j < n; ++j) {
      double sum = 0.0;
      for (long long i = 0; i < k; ++i) {
        sum += load(b.type, B, static_cast<std::size_t>(tb ? j + i * b.ld : i + j * b.ld));
      }
      store(bias_type, const_cast<void*>(d.bias), static_cast<std::size_t>(j), sum);
    }
  }
  for (long long j = 0; j < n; ++j) {
    for (long long i = 0; i < m; ++i) {
      const double sum = ab[static_cast<std::size_t>(i + j * m)];
      double value = al * sum;
      if (be != 0.0) value += be * load(c.type, C, static_cast<std::size_t>(i + j * c.ld));
      if (has_bias(d.epilogue)) value += load(bias_type, d.bias, static_cast<std::size_t>(i));
      const auto aux_index = static_cast<std::size_t>(i + j * d.aux_ld);
      if (writes_aux(d.epilogue)) store(dl.type, d.aux, aux_index, value);
      if (applies_gelu(d.epilogue)) value = gelu(value);
      if (d.epilogue == CUBLASLT_EPILOGUE_DGELU) value *= gelu_derivative(load(dl.type, d.aux, aux_index));
      store(dl.type, D, static_cast<std::size_t>(i + j * dl.ld), value);
    }
  }
}

}  // namespace
}  // namespace cuda_emu

using cuda_emu::LtDesc;
using cuda_emu::LtLayout;
using cuda_emu::LtPreference;

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) { return cuda_emu::create_handle(handle); }

size_t cublasLtGetVersion() { return CUBLAS_VERSION; }  // the headers' (the emulation is built with them)

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) { return cuda_emu::destroy_handle(handle); }

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
  auto* d = new LtDesc;
  d->compute = computeType;
  d->scale = scaleType;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete reinterpret_cast<LtDesc*>(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t sizeInBytes) {
  auto& d = *reinterpret_cast<LtDesc*>(desc);
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return cuda_emu::set_value(d.transa, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_TRANSB: return cuda_emu::set_value(d.transb, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return cuda_emu::set_value(d.epilogue, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return cuda_emu::set_value(d.bias, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return cuda_emu::set_value(d.bias_type, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return cuda_emu::set_value(d.aux, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return cuda_emu::set_value(d.aux_ld, buf, sizeInBytes);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;  // an attribute the emulation does not model
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(new LtLayout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete reinterpret_cast<LtLayout*>(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(new LtPreference);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete reinterpret_cast<LtPreference*>(pref);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t sizeInBytes) {
  auto& p = *reinterpret_cast<LtPreference*>(pref);
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return cuda_emu::set_value(p.workspace, buf, sizeInBytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return cuda_emu::set_value(p.align[0], buf, sizeInBytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return cuda_emu::set_value(p.align[1], buf, sizeInBytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return cuda_emu::set_value(p.align[2], buf, sizeInBytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return cuda_emu::set_value(p.align[3], buf, sizeInBytes);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

// Up to three algorithms (as many as asked for), which differ in the product (scale_as_answer)
// and remember the alignments they were chosen for: cublasLtMatmul checks the pointers it gets against them, as a real kernel
// chosen for aligned operands would misread unaligned ones. Several, so that a timed choice among
// them (run.matmul_algorithms = timed) runs its timing here too; data[4] numbers them.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int* returnAlgoCount) {
  if (requestedAlgoCount < 1) return CUBLAS_STATUS_INVALID_VALUE;
  const auto& d = *reinterpret_cast<const LtDesc*>(operationDesc);
  const cublasStatus_t s =
      cuda_emu::check_lt(d, *reinterpret_cast<const LtLayout*>(Adesc), *reinterpret_cast<const LtLayout*>(Bdesc),
                         *reinterpret_cast<const LtLayout*>(Cdesc), *reinterpret_cast<const LtLayout*>(Ddesc));
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  const auto& p = *reinterpret_cast<const LtPreference*>(preference);
  const int answers = std::min(requestedAlgoCount, 3);
  for (int a = 0; a < answers; ++a) {
    cublasLtMatmulHeuristicResult_t& r = heuristicResultsArray[a];
    std::memset(&r, 0, sizeof r);
    for (int i = 0; i < 4; ++i) r.algo.data[i] = p.align[i];
    r.algo.data[4] = static_cast<uint64_t>(a);
    r.workspaceSize = 0;
    r.state = CUBLAS_STATUS_SUCCESS;
  }
  *returnAlgoCount = answers;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t computeDesc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* /*workspace*/,
                              size_t /*workspaceSizeInBytes*/, cudaStream_t stream) {
  cuda_emu::check_stream(stream);
  const auto& d = *reinterpret_cast<const LtDesc*>(computeDesc);
  const auto& a = *reinterpret_cast<const LtLayout*>(Adesc);
  const auto& b = *reinterpret_cast<const LtLayout*>(Bdesc);
  const auto& c = *reinterpret_cast<const LtLayout*>(Cdesc);
  const auto& dl = *reinterpret_cast<const LtLayout*>(Ddesc);
  const cublasStatus_t s = cuda_emu::check_lt(d, a, b, c, dl);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  if (algo != nullptr) {
    const void* pointers[4] = {A, B, C, D};
    for (int i = 0; i < 4; ++i) {
      if (reinterpret_cast<std::uintptr_t>(pointers[i]) % algo->data[i] != 0) return CUBLAS_STATUS_INVALID_VALUE;
    }
  }
  // The descriptors are read at the call: the queued product keeps copies.
  const double al = *static_cast<const float*>(alpha);
  const double be = *static_cast<const float*>(beta);
  const std::uint64_t answer = algo != nullptr ? algo->data[4] : 0;
  cuda_emu::enqueue(stream, [d, a, b, c, dl, al, be, A, B, C, D, answer] {
    cuda_emu::lt_matmul(d, a, b, c, dl, al, be, A, B, C, D, answer);
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
