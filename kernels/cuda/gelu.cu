// GELU, tanh approximation (GPT-2):  y = 0.5 x (1 + tanh(u)),  u = k (x + a x^3),
// k = sqrt(2/pi), a = 0.044715. The same algebra as the CPU twin (kernels/cpu/gelu.cpp):
// 0.5 (1 + tanh u) = sigmoid(2u) = s, so y = x s with one exponential and no cancellation, and
//   dy/dx = s + 2 x s (1 - s) k (1 + 3 a x^2).
// expf is CUDA's full-accuracy exponential (2 ulp, no fast-math), where the CPU uses its
// vectorised exp_approx (also 2 ulp): the twins agree to a few ulp. For very negative x,
// expf(-2u) overflows to +inf and y = x / inf = -0, the right limit.
// Elementwise and memory-bound: one grid-stride loop per direction.
#include "kernels/cuda/cuda_check.h"  // CUDA_CHECK_LAUNCH
#include "kernels/cuda/gelu.cuh"
#include "kernels/cuda/launch_shape.cuh"  // elementwise_blocks, grid_first_index, grid_stride

namespace trident::kernels::cuda {

namespace {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluCubic = 0.044715f;

__global__ void gelu_forward_kernel(float* out, const float* inp, std::size_t n) {
  for (std::size_t i = grid_first_index(); i < n; i += grid_stride()) {
    const float x = inp[i];
    const float u = kGeluScale * (x + kGeluCubic * x * x * x);
    out[i] = x / (1.0f + expf(-2.0f * u));
  }
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout,
                                     std::size_t n) {
  for (std::size_t i = grid_first_index(); i < n; i += grid_stride()) {
    const float x = inp[i];
    const float u = kGeluScale * (x + kGeluCubic * x * x * x);
    const float s = 1.0f / (1.0f + expf(-2.0f * u));
    const float local =
        s + 2.0f * x * s * (1.0f - s) * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
    dinp[i] += local * dout[i];
  }
}

}  // namespace

void gelu_forward(float* out, const float* inp, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  gelu_forward_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(out, inp, n);
  CUDA_CHECK_LAUNCH();
}

void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n,
                   cudaStream_t stream) {
  if (n == 0) return;
  gelu_backward_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(dinp, inp, dout,
                                                                                  n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trident::kernels::cuda
