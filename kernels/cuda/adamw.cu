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
//
// AdamWLoads::kPacks (run.adamw_loads = packs) walks the arrays four elements a thread, on 16-byte
// loads and stores of the fp32 arrays (8-byte stores of a 16-bit compute copy), where every array
// starts on a whole pack; the same `updated` on each element, so the same bits as kValues. The
// last n % 4 elements go one a thread, and arrays not starting on a pack (a ZeRO-1 shard may
// begin anywhere in the gradients) take the one-element kernels.
#include <cuda_bf16.h>  // __float2bfloat16_rn
#include <cuda_fp16.h>  // __float2half_rn

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "kernels/cuda/adamw.cuh"
#include "kernels/cuda/cuda_check.h"      // CUDA_CHECK_LAUNCH
#include "kernels/cuda/launch_shape.cuh"  // elementwise_blocks, grid_first_index, grid_stride
#include "kernels/cuda/vector_pack.h"     // Pack, load_pack, store_pack, starts_aligned

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
  // The weight decays of elements i .. i + 3, i a multiple of 4 (one word of the mask holds them).
  __device__ __forceinline__ void decay_of_four(std::size_t i, float (&wd)[4]) const {
    const uint32_t word = decay_mask == nullptr ? ~0u : __ldg(decay_mask + (i >> 5)) >> (i & 31);
    for (int j = 0; j < 4; j++) wd[j] = (word >> j) & 1u ? weight_decay : 0.0f;
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

// Elements 4q .. 4q + 3 (AdamWLoads::kPacks): param, m and v updated in their packs, and the new
// parameters returned for the compute copy.
__device__ __forceinline__ Pack<float> update_four(const AdamWConstants& k, float* param, const float* grad,
                                                   float* m, float* v, std::size_t q) {
  const std::size_t i = 4 * q;
  Pack<float> p = load_pack(param + i);
  const Pack<float> g = load_pack(grad + i);
  Pack<float> mq = load_pack(m + i);
  Pack<float> vq = load_pack(v + i);
  float wd[4];
  k.decay_of_four(i, wd);
  for (int j = 0; j < 4; j++) p.values[j] = updated(k, wd[j], p.values[j], g.values[j], mq.values[j], vq.values[j]);
  store_pack(param + i, p);
  store_pack(m + i, mq);
  store_pack(v + i, vq);
  return p;
}

__global__ void adamw_packs_kernel(float* param, const float* grad, float* m, float* v, std::size_t n,
                                   AdamWConstants k) {
  const std::size_t packs = n / 4;
  for (std::size_t q = grid_first_index(); q < packs; q += grid_stride()) (void)update_four(k, param, grad, m, v, q);
  const std::size_t i = 4 * packs + grid_first_index();  // the last n % 4, one a thread
  if (i < n) param[i] = updated(k, k.decay(i), param[i], grad[i], m[i], v[i]);
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

// Four values of the compute copy in one store: 16 bytes of fp32, or 8 of 16-bit values (dst on
// 8 bytes). The values as store() writes them one at a time.
template <Precision P>
__device__ __forceinline__ void store_four(float* dst, const Pack<float>& p) {
  Pack<float> out;
  for (int j = 0; j < 4; j++) out.values[j] = rounded<P>(p.values[j]);
  store_pack(dst, out);
}
template <Precision P, class Half>
__device__ __forceinline__ void store_four(Half* dst, const Pack<float>& p) {
  Half out[4];
  for (int j = 0; j < 4; j++) store(&out[j], rounded<P>(p.values[j]));
#ifdef __CUDA_ARCH__
  uint2 bits;
  memcpy(&bits, out, sizeof bits);
  *reinterpret_cast<uint2*>(dst) = bits;
#else
  memcpy(dst, out, sizeof out);
#endif
}

template <Precision P, class Stored>
__global__ void adamw_master_packs_kernel(float* master, Stored* compute, const float* grad, float* m, float* v,
                                          std::size_t n, AdamWConstants k) {
  const std::size_t packs = n / 4;
  for (std::size_t q = grid_first_index(); q < packs; q += grid_stride()) {
    store_four<P>(compute + 4 * q, update_four(k, master, grad, m, v, q));
  }
  const std::size_t i = 4 * packs + grid_first_index();  // the last n % 4, one a thread
  if (i < n) {
    const float p = updated(k, k.decay(i), master[i], grad[i], m[i], v[i]);
    master[i] = p;
    store(compute + i, rounded<P>(p));
  }
}

// Whether the pack kernels may run on these fp32 arrays: each starts on 16 bytes.
bool packs_fit(std::initializer_list<const void*> fp32_arrays) {
  for (const void* p : fp32_arrays) {
    if (!starts_aligned(p)) return false;
  }
  return true;
}

// The master kernel of (P, Stored), the pack one or the one-element one.
template <Precision P, class Stored>
void launch_master(bool packs, float* master, Stored* compute, const float* grad, float* m, float* v, std::size_t n,
                   const AdamWConstants& k, cudaStream_t stream) {
  if (packs) {
    adamw_master_packs_kernel<P><<<elementwise_blocks(std::max<std::size_t>(n / 4, 1)), kElementwiseThreads, 0,
                                   stream>>>(master, compute, grad, m, v, n, k);
  } else {
    adamw_master_kernel<P><<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(master, compute, grad, m, v, n,
                                                                                      k);
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
                  const AdamWArgs& args, cudaStream_t stream, AdamWLoads loads) {
  if (n == 0) return;
  if (loads == AdamWLoads::kPacks && packs_fit({param, grad, m, v})) {
    adamw_packs_kernel<<<elementwise_blocks(std::max<std::size_t>(n / 4, 1)), kElementwiseThreads, 0, stream>>>(
        param, grad, m, v, n, constants_of(args));
  } else {
    adamw_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(param, grad, m, v, n, constants_of(args));
  }
  CUDA_CHECK_LAUNCH();
}

void adamw_update_master(float* master, ActPtr compute, const float* grad, float* m, float* v, std::size_t n,
                         const AdamWArgs& args, Precision precision, cudaStream_t stream, AdamWLoads loads) {
  if (n == 0) return;
  if (!compute.is_fp32() && compute.storage() != precision) {
    throw std::logic_error(std::string("adamw_update_master: a ") + precision_name(compute.storage()) +
                           " compute copy cannot hold " + precision_name(precision) + " values");
  }
  const AdamWConstants k = constants_of(args);
  const bool state_packs = loads == AdamWLoads::kPacks && packs_fit({master, grad, m, v});
  if (!compute.is_fp32()) {
    void* bits = compute.bits16();
    // Four 16-bit values a store: the copy on 8 bytes.
    const bool packs = state_packs && reinterpret_cast<std::uintptr_t>(bits) % (4 * sizeof(uint16_t)) == 0;
    if (precision == Precision::kBf16) {
      launch_master<Precision::kBf16>(packs, master, static_cast<__nv_bfloat16*>(bits), grad, m, v, n, k, stream);
    } else {
      launch_master<Precision::kFp16>(packs, master, static_cast<__half*>(bits), grad, m, v, n, k, stream);
    }
    CUDA_CHECK_LAUNCH();
    return;
  }
  float* values = compute.f32();
  const bool packs = state_packs && starts_aligned(values);
  switch (precision) {
    case Precision::kBf16: launch_master<Precision::kBf16>(packs, master, values, grad, m, v, n, k, stream); break;
    case Precision::kFp16: launch_master<Precision::kFp16>(packs, master, values, grad, m, v, n, k, stream); break;
    case Precision::kFp32: launch_master<Precision::kFp32>(packs, master, values, grad, m, v, n, k, stream); break;
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace trident::kernels::cuda
