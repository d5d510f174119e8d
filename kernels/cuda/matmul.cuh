// Matmul (linear layer) on the device: cuBLAS GEMMs plus small bias kernels. Launchers queue
// on `stream`, which must be the stream of `cublas`.
#pragma once

#include <cublas_v2.h>     // cublasHandle_t
#include <cuda_runtime.h>  // cudaStream_t

namespace trident::kernels::cuda {

// out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC] (bias may be null).
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC, cublasHandle_t cublas, cudaStream_t stream);

// dinp[N,C] += dout @ weight;  dweight[OC,C] += dout^T @ inp;  dbias[OC] += sum_n dout.
// dinp and dbias may be null.
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC, cublasHandle_t cublas,
                     cudaStream_t stream);

}  // namespace trident::kernels::cuda
