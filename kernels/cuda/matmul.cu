// Matmul: out[N,OC] = inp[N,C] @ W[OC,C]^T + b, as the CPU twin (kernels/cpu/matmul.cpp) does
// it, call for call, with sgemm_row_major (gemm.cu: the row-major -> column-major mapping)
// taking the place of cblas_sgemm(CblasRowMajor, ...):
//   forward : out  = inp @ W^T      (N, T), bias first broadcast into out, then beta = 1
//   backward: dinp  = dout @ W      (N, N), beta = 0 (overwrite)
//             dW   += dout^T @ inp  (T, N), beta = 1 (accumulate)
//             db   += column sums of dout (column_sums.cuh: a deterministic two-stage
//                     reduction over row chunks, no atomics; another order of the additions
//                     than the CPU twin's rows-in-order loop).
// fp32 math (CUBLAS_DEFAULT_MATH, cuda_backend.cu) unless the backend was told that every GEMM
// input is bf16- or fp16-representable (set_gemm_input_precision): then TF32 tensor cores, exact
// on such inputs.
// The 16-bit launchers make the same calls on 16-bit buffers (cublasGemmEx, gemm.cu): bf16/fp16
// A and B on the tensor cores, fp32 accumulation, the stored result rounded once (dinp and out
// in 16 bits, dweight in fp32); the CPU twin is the fp32 kernel on the widened values, rounded
// when stored (kernels/rounded_storage_backend.h), which differs only by the order of the sums
// (and, where fp32 rounding then 16-bit rounding lands on the other side of a tie, one unit).
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "kernels/cuda/column_sums.cuh"   // add_column_sums (bias gradients)
#include "kernels/cuda/cuda_check.h"      // CUDA_CHECK_LAUNCH
#include "kernels/cuda/gemm.cuh"          // sgemm_row_major, gemm_row_major_ex, cuda_data_type
#include "kernels/cuda/launch_shape.cuh"  // elementwise_blocks, grid-stride helpers
#include "kernels/cuda/matmul.cuh"
#include "kernels/stored_element.h"        // stored::Fp32, with_policy

namespace trident::kernels::cuda {

namespace {

// out[n, o] = bias[o] for every row: the GEMM then adds the product onto it (beta = 1). OutS and
// BiasS are storage policies (kernels/stored_element.h): in one storage the value is copied as it
// is; a 16-bit bias into an fp32 out (the LM head's form) is widened exactly.
template <class OutS, class BiasS>
__global__ void broadcast_bias_kernel(typename OutS::Element* out, const typename BiasS::Element* bias, int OC,
                                      std::size_t count) {
  for (std::size_t i = grid_first_index(); i < count; i += grid_stride()) out[i] = OutS::store(BiasS::load(bias[i % OC]));
}

cudaDataType_t data_type_of(Precision precision) {
  if (precision == Precision::kFp32) throw std::logic_error("matmul_*_16bit: fp32 is not a 16-bit precision");
  return cuda_data_type(precision);
}

}  // namespace

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC, cublasHandle_t cublas, cudaStream_t stream) {
  const std::size_t count = static_cast<std::size_t>(N) * OC;
  if (count == 0) return;
  float beta = 0.0f;
  if (bias != nullptr) {
    broadcast_bias_kernel<stored::Fp32, stored::Fp32>
        <<<elementwise_blocks(count), kElementwiseThreads, 0, stream>>>(out, bias, OC, count);
    CUDA_CHECK_LAUNCH();
    beta = 1.0f;
  }
  sgemm_row_major(cublas, CUBLAS_OP_N, CUBLAS_OP_T, N, OC, C, 1.0f, inp, C, weight, C, beta, out,
                  OC);
}

void matmul_input_gradient(float* dinp, const float* dout, const float* weight, int N, int C, int OC,
                           cublasHandle_t cublas) {
  // beta = 0: dinp is overwritten (Backend::matmul_backward), so the GEMM never reads it.
  sgemm_row_major(cublas, CUBLAS_OP_N, CUBLAS_OP_N, N, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C);
}

void matmul_parameter_gradients(float* dweight, float* dbias, const float* dout, const float* inp, int N, int C,
                                int OC, float* column_scratch, cublasHandle_t cublas, cudaStream_t stream) {
  sgemm_row_major(cublas, CUBLAS_OP_T, CUBLAS_OP_N, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
  if (dbias != nullptr) add_column_sums(dbias, dout, N, OC, column_scratch, stream);
}

void matmul_forward_16bit(void* out, bool fp32_out, const void* inp, const void* weight, const void* bias, int N,
                          int C, int OC, Precision precision, cublasHandle_t cublas, cudaStream_t stream) {
  const cudaDataType_t type = data_type_of(precision);
  const std::size_t count = static_cast<std::size_t>(N) * OC;
  if (count == 0) return;
  float beta = 0.0f;
  if (bias != nullptr) {
    stored::with_policy(precision, [&](auto policy) {  // bf16 or fp16: data_type_of refused fp32
      using S = decltype(policy);
      const auto* bias_values = static_cast<const typename S::Element*>(bias);
      if (fp32_out) {
        broadcast_bias_kernel<stored::Fp32, S><<<elementwise_blocks(count), kElementwiseThreads, 0, stream>>>(
            static_cast<float*>(out), bias_values, OC, count);
      } else {
        broadcast_bias_kernel<S, S><<<elementwise_blocks(count), kElementwiseThreads, 0, stream>>>(
            static_cast<typename S::Element*>(out), bias_values, OC, count);
      }
    });
    CUDA_CHECK_LAUNCH();
    beta = 1.0f;
  }
  gemm_row_major_ex(cublas, CUBLAS_OP_N, CUBLAS_OP_T, N, OC, C, 1.0f, inp, type, C, weight, C, beta, out,
                    fp32_out ? CUDA_R_32F : type, OC);
}

void matmul_input_gradient_16bit(void* dinp, const void* dout, const void* weight, int N, int C, int OC,
                                 Precision precision, cublasHandle_t cublas) {
  const cudaDataType_t type = data_type_of(precision);
  gemm_row_major_ex(cublas, CUBLAS_OP_N, CUBLAS_OP_N, N, C, OC, 1.0f, dout, type, OC, weight, C, 0.0f, dinp, type,
                    C);  // beta = 0: dinp is overwritten
}

void matmul_parameter_gradients_16bit(float* dweight, float* dbias, const void* dout, const void* inp, int N, int C,
                                      int OC, Precision precision, float* column_scratch, cublasHandle_t cublas,
                                      cudaStream_t stream) {
  const cudaDataType_t type = data_type_of(precision);
  // fp32 weight gradients from 16-bit operands: the GEMM's C is fp32.
  gemm_row_major_ex(cublas, CUBLAS_OP_T, CUBLAS_OP_N, OC, C, N, 1.0f, dout, type, OC, inp, C, 1.0f, dweight,
                    CUDA_R_32F, C);
  if (dbias != nullptr) {
    add_column_sums(dbias, ConstActPtr(static_cast<const uint16_t*>(dout), precision), N, OC, column_scratch, stream);
  }
}

}  // namespace trident::kernels::cuda
