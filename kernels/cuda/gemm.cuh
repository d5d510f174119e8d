// Row-major single-precision GEMM on cuBLAS, with the argument order of
// cblas_sgemm(CblasRowMajor, ...), so that every CPU-twin call has a literal GPU translation.
#pragma once

#include <cublas_v2.h>  // cublasHandle_t, cublasOperation_t, cudaDataType_t

#include "kernels/precision.h"  // Precision

namespace trident::kernels::cuda {

// cuBLAS's name for a storage precision's element: CUDA_R_32F, CUDA_R_16BF or CUDA_R_16F.
inline cudaDataType_t cuda_data_type(Precision precision) {
  return precision == Precision::kBf16 ? CUDA_R_16BF : precision == Precision::kFp16 ? CUDA_R_16F : CUDA_R_32F;
}

// C[M,N] = alpha * op(A) @ op(B) + beta * C, every matrix row-major with its leading dimension
// (elements between consecutive rows): op(A) is M x K, op(B) is K x N. trans_a = CUBLAS_OP_T
// means A is stored K x M (row-major) and used transposed. Queued on the handle's stream;
// fp32 data and accumulation; the handle's math mode decides the multiplies (CUBLAS_DEFAULT_MATH:
// fp32; TF32 tensor cores once Backend::set_gemm_input_precision has promised rounded inputs).
void sgemm_row_major(cublasHandle_t handle, cublasOperation_t trans_a, cublasOperation_t trans_b,
                     int M, int N, int K, float alpha, const float* A, int lda, const float* B,
                     int ldb, float beta, float* C, int ldc);

// `batch` independent GEMMs as above; matrix i of A, B, C starts stride_a, stride_b, stride_c
// elements after matrix i-1.
void sgemm_row_major_batched(cublasHandle_t handle, cublasOperation_t trans_a,
                             cublasOperation_t trans_b, int M, int N, int K, float alpha,
                             const float* A, int lda, long long stride_a, const float* B, int ldb,
                             long long stride_b, float beta, float* C, int ldc, long long stride_c,
                             int batch);

// The same row-major GEMM on other element types (cublasGemmEx): A and B of a_type (CUDA_R_16BF,
// CUDA_R_16F or CUDA_R_32F), C of c_type, products accumulated in fp32 (CUBLAS_COMPUTE_32F) and
// alpha * op(A) op(B) + beta * C rounded once into C's type. With 16-bit A and B this runs on the
// tensor cores whatever the handle's math mode; the products of 16-bit values are exact in fp32.
void gemm_row_major_ex(cublasHandle_t handle, cublasOperation_t trans_a, cublasOperation_t trans_b, int M, int N,
                       int K, float alpha, const void* A, cudaDataType_t a_type, int lda, const void* B, int ldb,
                       float beta, void* C, cudaDataType_t c_type, int ldc);

// `batch` independent GEMMs as gemm_row_major_ex (cublasGemmStridedBatchedEx); matrix i of A, B,
// C starts stride_a, stride_b, stride_c elements after matrix i-1.
void gemm_row_major_batched_ex(cublasHandle_t handle, cublasOperation_t trans_a, cublasOperation_t trans_b, int M,
                               int N, int K, float alpha, const void* A, cudaDataType_t a_type, int lda,
                               long long stride_a, const void* B, int ldb, long long stride_b, float beta, void* C,
                               cudaDataType_t c_type, int ldc, long long stride_c, int batch);

// `batch` independent GEMMs whose matrices are anywhere: matrix i of A, B and C at A[i], B[i],
// C[i], the three pointer arrays in device memory (cublasSgemmBatched: fp32 as sgemm_row_major;
// cublasGemmBatchedEx: types and accumulation as gemm_row_major_ex).
void sgemm_row_major_pointer_batched(cublasHandle_t handle, cublasOperation_t trans_a, cublasOperation_t trans_b,
                                     int M, int N, int K, float alpha, const float* const* A, int lda,
                                     const float* const* B, int ldb, float beta, float* const* C, int ldc, int batch);
void gemm_row_major_pointer_batched_ex(cublasHandle_t handle, cublasOperation_t trans_a, cublasOperation_t trans_b,
                                       int M, int N, int K, float alpha, const void* const* A, cudaDataType_t a_type,
                                       int lda, const void* const* B, int ldb, float beta, void* const* C,
                                       cudaDataType_t c_type, int ldc, int batch);

}  // namespace trident::kernels::cuda
