// Fully connected layer on the CPU: out = inp @ weight^T + bias, and its backward (accumulating).
#pragma once

namespace trident::kernels::cpu {

// out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC]; bias may be null. Overwrites out.
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC);

// dinp[N,C] += dout[N,OC] @ weight[OC,C];  dweight[OC,C] += dout^T @ inp;  dbias[OC] += sum_n dout.
// dinp and dbias may be null.
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int N, int C, int OC);

}  // namespace trident::kernels::cpu
