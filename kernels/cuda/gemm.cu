// Row-major GEMM on column-major cuBLAS.
//
// The mapping: a row-major matrix X (r x c, leading dimension ld) occupies memory exactly as
// the column-major matrix X^T (c x r, same ld). So the row-major product
//     C = op(A) op(B)              (M x N)
// is, read column-major, the product
//     C^T = op(B)^T op(A)^T        (N x M)
// with the buffers of B and A in that order. The operation flags carry over unchanged: say B's
// buffer holds the row-major matrix S (op(B) = S for OP_N, S^T for OP_T); cuBLAS reads that
// buffer as S^T, and op(B)^T is S^T (OP_N: use it as read) or S (OP_T: transpose what it
// reads). Likewise for A. Hence
//     cublasSgemm(trans_b, trans_a, N, M, K, alpha, B, ldb, A, lda, beta, C, ldc)
// with every leading dimension unchanged. Example, matmul forward
// out[N,OC] = inp[N,C] W[OC,C]^T:
//     sgemm_row_major(OP_N, OP_T, N, OC, C, inp, C, W, C, out, OC)
//  -> cublasSgemm(OP_T, OP_N, OC, N, C, W, C, inp, C, out, OC), i.e. out^T = W inp^T.
#include "kernels/cuda/cuda_check.h"  // CUBLAS_CHECK
#include "kernels/cuda/gemm.cuh"

namespace trident::kernels::cuda {

void sgemm_row_major(cublasHandle_t handle, cublasOperation_t trans_a, cublasOperation_t trans_b,
                     int M, int N, int K, float alpha, const float* A, int lda, const float* B,
                     int ldb, float beta, float* C, int ldc) {
  if (M == 0 || N == 0) return;  // nothing to write (and cuBLAS rejects ld = 0)
  CUBLAS_CHECK(
      cublasSgemm(handle, trans_b, trans_a, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc));
}

void sgemm_row_major_batched(cublasHandle_t handle, cublasOperation_t trans_a,
                             cublasOperation_t trans_b, int M, int N, int K, float alpha,
                             const float* A, int lda, long long stride_a, const float* B, int ldb,
                             long long stride_b, float beta, float* C, int ldc, long long stride_c,
                             int batch) {
  if (M == 0 || N == 0 || batch == 0) return;
  CUBLAS_CHECK(cublasSgemmStridedBatched(handle, trans_b, trans_a, N, M, K, &alpha, B, ldb,
                                         stride_b, A, lda, stride_a, &beta, C, ldc, stride_c,
                                         batch));
}

void gemm_row_major_ex(cublasHandle_t handle, cublasOperation_t trans_a, cublasOperation_t trans_b, int M, int N,
                       int K, float alpha, const void* A, cudaDataType_t a_type, int lda, const void* B, int ldb,
                       float beta, void* C, cudaDataType_t c_type, int ldc) {
  if (M == 0 || N == 0) return;
  // The mapping of sgemm_row_major: B's buffer first. A and B share a_type.
  CUBLAS_CHECK(cublasGemmEx(handle, trans_b, trans_a, N, M, K, &alpha, B, a_type, ldb, A, a_type, lda, &beta, C,
                            c_type, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void gemm_row_major_batched_ex(cublasHandle_t handle, cublasOperation_t trans_a, cublasOperation_t trans_b, int M,
                               int N, int K, float alpha, const void* A, cudaDataType_t a_type, int lda,
                               long long stride_a, const void* B, int ldb, long long stride_b, float beta, void* C,
                               cudaDataType_t c_type, int ldc, long long stride_c, int batch) {
  if (M == 0 || N == 0 || batch == 0) return;
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, trans_b, trans_a, N, M, K, &alpha, B, a_type, ldb, stride_b, A,
                                          a_type, lda, stride_a, &beta, C, c_type, ldc, stride_c, batch,
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void sgemm_row_major_pointer_batched(cublasHandle_t handle, cublasOperation_t trans_a, cublasOperation_t trans_b,
                                     int M, int N, int K, float alpha, const float* const* A, int lda,
                                     const float* const* B, int ldb, float beta, float* const* C, int ldc, int batch) {
  if (M == 0 || N == 0 || batch == 0) return;
  CUBLAS_CHECK(cublasSgemmBatched(handle, trans_b, trans_a, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc, batch));
}

void gemm_row_major_pointer_batched_ex(cublasHandle_t handle, cublasOperation_t trans_a, cublasOperation_t trans_b,
                                       int M, int N, int K, float alpha, const void* const* A, cudaDataType_t a_type,
                                       int lda, const void* const* B, int ldb, float beta, void* const* C,
                                       cudaDataType_t c_type, int ldc, int batch) {
  if (M == 0 || N == 0 || batch == 0) return;
  CUBLAS_CHECK(cublasGemmBatchedEx(handle, trans_b, trans_a, N, M, K, &alpha, B, a_type, ldb, A, a_type, lda, &beta,
                                   C, c_type, ldc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace trident::kernels::cuda
