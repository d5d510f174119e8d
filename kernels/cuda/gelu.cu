// GELU, tanh approximation (GPT-2):  y = 0.5 x (1 + tanh(u)),  u = k (x + a x^3),
// k = sqrt(2/pi), a = 0.044715. The same algebra as the CPU twin (kernels/cpu/gelu.cpp):
// 0.5 (1 + tanh u) = sigmoid(2u) = s, so y = x s with one exponential and no cancellation, and
//   dy/dx = s + 2 x s (1 - s) k (1 + 3 a x^2).
// expf is CUDA's full-accuracy exponential (2 ulp, no fast-math), where the CPU uses its
// vectorised exp_approx (also 2 ulp): the twins agree to a few ulp. For very negative x,
// expf(-2u) overflows to +inf and y = x / inf = -0, the right limit.
// Elementwise and memory-bound: one grid-stride loop per direction. Templated on the storage
// (kernels/stored_element.h): fp32 buffers, or bf16/fp16 ones read and written as they are
// (fp32 math, each stored value rounded once), with no widened copies.
#include "kernels/cuda/cuda_check.h"  // CUDA_CHECK_LAUNCH
#include "kernels/cuda/gelu.cuh"
#include "kernels/cuda/launch_shape.cuh"  // elementwise_blocks, grid_first_index, grid_stride
#include "kernels/stored_element.h"        // stored::with_policy, elements, common_storage

namespace trident::kernels::cuda {

namespace {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluCubic = 0.044715f;

template <class S>
__global__ void gelu_forward_kernel(typename S::Element* out, const typename S::Element* inp, std::size_t n) {
  for (std::size_t i = grid_first_index(); i < n; i += grid_stride()) {
    const float x = S::load(inp[i]);
    const float u = kGeluScale * (x + kGeluCubic * x * x * x);
    out[i] = S::store(x / (1.0f + expf(-2.0f * u)));
  }
}

template <class S>
__global__ void gelu_backward_kernel(typename S::Element* dinp, const typename S::Element* inp,
                                     const typename S::Element* dout, std::size_t n) {
  for (std::size_t i = grid_first_index(); i < n; i += grid_stride()) {
    const float x = S::load(inp[i]);
    const float u = kGeluScale * (x + kGeluCubic * x * x * x);
    const float s = 1.0f / (1.0f + expf(-2.0f * u));
    const float local =
        s + 2.0f * x * s * (1.0f - s) * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
    dinp[i] = S::store(local * S::load(dout[i]));  // after reading dout[i]: dinp may be dout
  }
}

}  // namespace

void gelu_forward(ActPtr out, ConstActPtr inp, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  stored::with_policy(stored::common_storage({out, inp}, "gelu_forward"), [&](auto policy) {
    using S = decltype(policy);
    gelu_forward_kernel<S><<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(
        stored::elements<S>(out), stored::elements<S>(inp), n);
  });
  CUDA_CHECK_LAUNCH();
}

void gelu_backward(ActPtr dinp, ConstActPtr inp, ConstActPtr dout, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  stored::with_policy(stored::common_storage({dinp, inp, dout}, "gelu_backward"), [&](auto policy) {
    using S = decltype(policy);
    gelu_backward_kernel<S><<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(
        stored::elements<S>(dinp), stored::elements<S>(inp), stored::elements<S>(dout), n);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trident::kernels::cuda
