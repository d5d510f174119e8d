// Matmul (linear layer) on the device: cuBLAS GEMMs plus the bias broadcast and bias-gradient
// kernels. Launchers queue on `stream`, which must be the stream of `cublas`.
#pragma once

#include <cublas_v2.h>     // cublasHandle_t
#include <cuda_runtime.h>  // cudaStream_t

#include "kernels/precision.h"  // Precision

namespace trident::kernels::cuda {

// out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC] (bias may be null).
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC, cublasHandle_t cublas, cudaStream_t stream);

// The same with 16-bit activations and weights (the model's buffers under train.precision =
// bf16 | fp16): inp, weight and bias (may be null) hold `precision`'s bit patterns (kBf16 or
// kFp16); out too, or, with fp32_out, fp32 values (the LM head's logits). Products accumulate in
// fp32 on the tensor cores and each stored value is rounded once; no fp32 copies are made.
void matmul_forward_16bit(void* out, bool fp32_out, const void* inp, const void* weight, const void* bias, int N,
                          int C, int OC, Precision precision, cublasHandle_t cublas, cudaStream_t stream);

// A linear layer's backward in two halves, so that a caller may queue them on two streams
// (CudaBackend under run.matmul_backward_streams = two) or one after the other on one:
//   input gradient:      dinp[N,C] = dout @ weight (overwritten; on `cublas`'s stream);
//   parameter gradients: dweight[OC,C] += dout^T @ inp, and dbias[OC] += sum_n dout when dbias is
//                        not null (`cublas` bound to `stream`); column_scratch:
//                        columns::sum_scratch_floats(OC) floats of device workspace for the bias
//                        sums (column_sums.cuh), null when dbias is.
// Neither writes what the other reads, so they may run at once.
void matmul_input_gradient(float* dinp, const float* dout, const float* weight, int N, int C, int OC,
                           cublasHandle_t cublas);
void matmul_parameter_gradients(float* dweight, float* dbias, const float* dout, const float* inp, int N, int C,
                                int OC, float* column_scratch, cublasHandle_t cublas, cudaStream_t stream);
// The same with 16-bit dout, inp, weight and dinp (`precision`'s bit patterns); dinp is rounded
// once, dweight and dbias stay fp32.
void matmul_input_gradient_16bit(void* dinp, const void* dout, const void* weight, int N, int C, int OC,
                                 Precision precision, cublasHandle_t cublas);
void matmul_parameter_gradients_16bit(float* dweight, float* dbias, const void* dout, const void* inp, int N, int C,
                                      int OC, Precision precision, float* column_scratch, cublasHandle_t cublas,
                                      cudaStream_t stream);

}  // namespace trident::kernels::cuda
