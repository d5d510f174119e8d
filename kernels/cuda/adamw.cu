// AdamW (decoupled weight decay), bias-corrected, exactly the CPU twin's arithmetic
// (kernels/cpu/adamw.cpp):
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  mhat = m / (1-b1^t);  vhat = v / (1-b2^t)
//   p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p)
// with g = grad * grad_scale (AdamWArgs::grad_scale: the trainer's unscaling and clipping, in this
// pass instead of one of their own).
// The two bias corrections are the same for every element, so the host computes them once per
// call, in double as the CPU twin does (b2^t for t ~ 1e5 underflows gracefully to 0), and
// passes their float reciprocals: both twins then multiply by the very same scalars. The
// per-element update is fp32 in a grid-stride loop; sqrtf and the division are IEEE-rounded
// (no fast-math), so the twins differ only where nvcc fuses a multiply-add (an ulp or two).
#include <cuda_bf16.h>  // __float2bfloat16_rn
#include <cuda_fp16.h>  // __float2half_rn

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/adamw.cuh"
#include "kernels/cuda/cuda_check.h"      // CUDA_CHECK_LAUNCH
#include "kernels/cuda/launch_shape.cuh"  // elementwise_blocks, grid_first_index, grid_stride

namespace trident::kernels::cuda {

namespace {

// The per-call constants of the update, passed by value to the kernel.
struct AdamWConstants {
  float lr;
  float beta1;
  float beta2;
  float eps;
  float weight_decay;
  float inv_bias_correction1;  // 1 / (1 - beta1^step)
  float inv_bias_correction2;  // 1 / (1 - beta2^step)
  float grad_scale;            // AdamWArgs::grad_scale
  const uint32_t* decay_mask;  // AdamWArgs::decay_mask (device memory), or null

  // Element i's weight decay: 0 where the mask clears its bit (as the CPU twin).
  __device__ __forceinline__ float decay(std::size_t i) const {
    if (decay_mask == nullptr) return weight_decay;
    return (__ldg(decay_mask + (i >> 5)) >> (i & 31)) & 1u ? weight_decay : 0.0f;
  }
};

// One element: updates m, v and returns the new parameter (the only copy of the arithmetic).
__device__ __forceinline__ float updated(const AdamWConstants& k, float wd, float param, float grad, float& m,
                                         float& v) {
  // A product rounded to float on its own (it is no addend, so no contraction fuses it).
  const float g = grad * k.grad_scale;
  const float mi = k.beta1 * m + (1.0f - k.beta1) * g;
  const float vi = k.beta2 * v + (1.0f - k.beta2) * g * g;
  m = mi;
  v = vi;
  const float mhat = mi * k.inv_bias_correction1;
  const float vhat = vi * k.inv_bias_correction2;
  return param - k.lr * (mhat / (sqrtf(vhat) + k.eps) + wd * param);
}

__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, std::size_t n,
                             AdamWConstants k) {
  for (std::size_t i = grid_first_index(); i < n; i += grid_stride()) {
    param[i] = updated(k, k.decay(i), param[i], grad[i], m[i], v[i]);
  }
}

// The compute copy's value: master rounded to P (an fp32 copy holds the rounded float).
template <Precision P>
__device__ __forceinline__ float rounded(float x) {
  if constexpr (P == Precision::kBf16) return __bfloat162float(__float2bfloat16_rn(x));
  if constexpr (P == Precision::kFp16) return __half2float(__float2half_rn(x));
  return x;
}

// Stores a value of the compute copy in its storage: the float as is, or its 16-bit pattern
// (exact: the value is already representable).
__device__ __forceinline__ void store(float* dst, float x) { *dst = x; }
__device__ __forceinline__ void store(__nv_bfloat16* dst, float x) { *dst = __float2bfloat16_rn(x); }
__device__ __forceinline__ void store(__half* dst, float x) { *dst = __float2half_rn(x); }

template <Precision P, class Stored>
__global__ void adamw_master_kernel(float* master, Stored* compute, const float* grad, float* m, float* v,
                                    std::size_t n, AdamWConstants k) {
  for (std::size_t i = grid_first_index(); i < n; i += grid_stride()) {
    const float p = updated(k, k.decay(i), master[i], grad[i], m[i], v[i]);
    master[i] = p;
    store(compute + i, rounded<P>(p));
  }
}

AdamWConstants constants_of(const AdamWArgs& args) {
  AdamWConstants k{};
  k.lr = args.lr;
  k.beta1 = args.beta1;
  k.beta2 = args.beta2;
  k.eps = args.eps;
  k.weight_decay = args.weight_decay;
  k.decay_mask = reinterpret_cast<const uint32_t*>(args.decay_mask);
  k.grad_scale = args.grad_scale;
  k.inv_bias_correction1 =
      static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(args.beta1), args.step)));
  k.inv_bias_correction2 =
      static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(args.beta2), args.step)));
  return k;
}

}  // namespace

void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n,
                  const AdamWArgs& args, cudaStream_t stream) {
  if (n == 0) return;
  adamw_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(param, grad, m, v, n, constants_of(args));
  CUDA_CHECK_LAUNCH();
}

void adamw_update_master(float* master, ActPtr compute, const float* grad, float* m, float* v, std::size_t n,
                         const AdamWArgs& args, Precision precision, cudaStream_t stream) {
  if (n == 0) return;
  if (!compute.is_fp32() && compute.storage() != precision) {
    throw std::logic_error(std::string("adamw_update_master: a ") + precision_name(compute.storage()) +
                           " compute copy cannot hold " + precision_name(precision) + " values");
  }
  const AdamWConstants k = constants_of(args);
  const auto blocks = elementwise_blocks(n);
  if (!compute.is_fp32()) {
    void* bits = compute.bits16();
    if (precision == Precision::kBf16) {
      adamw_master_kernel<Precision::kBf16><<<blocks, kElementwiseThreads, 0, stream>>>(
          master, static_cast<__nv_bfloat16*>(bits), grad, m, v, n, k);
    } else {
      adamw_master_kernel<Precision::kFp16><<<blocks, kElementwiseThreads, 0, stream>>>(
          master, static_cast<__half*>(bits), grad, m, v, n, k);
    }
    CUDA_CHECK_LAUNCH();
    return;
  }
  float* values = compute.f32();
  switch (precision) {
    case Precision::kBf16:
      adamw_master_kernel<Precision::kBf16><<<blocks, kElementwiseThreads, 0, stream>>>(master, values, grad, m, v, n, k);
      break;
    case Precision::kFp16:
      adamw_master_kernel<Precision::kFp16><<<blocks, kElementwiseThreads, 0, stream>>>(master, values, grad, m, v, n, k);
      break;
    case Precision::kFp32:
      adamw_master_kernel<Precision::kFp32><<<blocks, kElementwiseThreads, 0, stream>>>(master, values, grad, m, v, n, k);
      break;
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace trident::kernels::cuda
