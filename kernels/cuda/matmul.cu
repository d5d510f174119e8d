// Matmul: out[N,OC] = inp[N,C] @ W[OC,C]^T + b, as the CPU twin (kernels/cpu/matmul.cpp) does
// it, call for call, with sgemm_row_major (gemm.cu: the row-major -> column-major mapping)
// taking the place of cblas_sgemm(CblasRowMajor, ...):
//   forward : out  = inp @ W^T      (N, T), bias first broadcast into out, then beta = 1
//   backward: dinp += dout @ W      (N, N), beta = 1 (accumulate)
//             dW   += dout^T @ inp  (T, N), beta = 1 (accumulate)
//             db   += column sums of dout: one thread per column walks the rows in order
//                     (deterministic, the CPU twin's order; OC threads suffice because OC is
//                     a multiple of C in GPT-2 and the GEMMs dominate anyway).
// fp32 math (CUBLAS_DEFAULT_MATH, cuda_backend.cu) unless the backend was told that every GEMM
// input is bf16- or fp16-representable (set_gemm_input_precision): then TF32 tensor cores, exact
// on such inputs.
#include <cstddef>

#include "kernels/cuda/cuda_check.h"      // CUDA_CHECK_LAUNCH
#include "kernels/cuda/gemm.cuh"          // sgemm_row_major
#include "kernels/cuda/launch_shape.cuh"  // elementwise_blocks, blocks_for, grid-stride helpers
#include "kernels/cuda/matmul.cuh"

namespace trident::kernels::cuda {

namespace {

// out[n, o] = bias[o] for every row: the GEMM then adds the product onto it (beta = 1).
__global__ void broadcast_bias_kernel(float* out, const float* bias, int OC, std::size_t count) {
  for (std::size_t i = grid_first_index(); i < count; i += grid_stride()) out[i] = bias[i % OC];
}

// dbias[o] += sum_n dout[n, o]: one thread per column o, rows in order.
__global__ void bias_backward_kernel(float* dbias, const float* dout, int N, int OC) {
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= OC) return;
  float sum = 0.0f;
  for (int n = 0; n < N; n++) sum += dout[static_cast<std::size_t>(n) * OC + o];
  dbias[o] += sum;
}

}  // namespace

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC, cublasHandle_t cublas, cudaStream_t stream) {
  const std::size_t count = static_cast<std::size_t>(N) * OC;
  if (count == 0) return;
  float beta = 0.0f;
  if (bias != nullptr) {
    broadcast_bias_kernel<<<elementwise_blocks(count), kElementwiseThreads, 0, stream>>>(out, bias,
                                                                                         OC, count);
    CUDA_CHECK_LAUNCH();
    beta = 1.0f;
  }
  sgemm_row_major(cublas, CUBLAS_OP_N, CUBLAS_OP_T, N, OC, C, 1.0f, inp, C, weight, C, beta, out,
                  OC);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC, cublasHandle_t cublas,
                     cudaStream_t stream) {
  if (dinp != nullptr) {
    sgemm_row_major(cublas, CUBLAS_OP_N, CUBLAS_OP_N, N, C, OC, 1.0f, dout, OC, weight, C, 1.0f,
                    dinp, C);
  }
  sgemm_row_major(cublas, CUBLAS_OP_T, CUBLAS_OP_N, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight,
                  C);
  if (dbias != nullptr && OC > 0) {
    bias_backward_kernel<<<blocks_for(OC, kColumnThreads), kColumnThreads, 0, stream>>>(dbias, dout,
                                                                                        N, OC);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace trident::kernels::cuda
