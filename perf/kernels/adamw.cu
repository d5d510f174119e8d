// Playground: the fused AdamW update over every parameter with fp32 master weights and a bf16
// compute copy, as train.precision = bf16 runs it (one call for all parameters, a decay mask
// leaving biases and norms undecayed, the unscale/clip factor read with the gradients). 8.9 ms
// of a GPT-2 774M step on one H100 (2026-11-23): 30 bytes an element (read master, grad, m, v;
// write master, m, v and the bf16 copy), about 77% of the bandwidth. Reference: the CPU twin
// trident::kernels::cpu::adamw_update_master.
//
//   playground_adamw [variant|all] [reps]       ADAMW_N elements (124,475,904: GPT-2 124M)
//
// Variants:
//   1  production cuda::adamw_update_master: a grid-stride loop, one element (4-byte loads) per
//      thread and iteration, 1024 blocks of 256 threads;
//   2  16-byte loads: each thread takes 4 consecutive elements an iteration (one float4 of
//      master, grad, m and v each, one 8-byte store of the 4 bf16 values), the same arithmetic
//      element by element (a copy of production's), the last n % 4 elements one by one. For
//      16-byte aligned buffers (cudaMalloc's; production would fall back to 1 otherwise).
//
// Tolerances: master, m and v differ from the twin only where nvcc contracts a multiply and an
// add into an fma (kernels/cuda/adamw.cu): an ulp or two of each value, under 1e-6 of the
// largest; the bf16 copy is master rounded once, so one bf16 unit (2^-7 of the largest) where
// the two masters straddle a rounding midpoint. Variant 2 must also give variant 1's bits
// exactly (checked): the same arithmetic on the same values.
//
// The rate column counts the 30 bytes an element (and the decay mask's bit) over the time.
#include <cuda_bf16.h>     // __nv_bfloat16, __float2bfloat16_rn
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "kernels/backend.h"              // AdamWArgs, adamw_decay_mask_words
#include "kernels/cpu/adamw.h"            // cpu::adamw_update_master (the reference)
#include "kernels/cuda/adamw.cuh"         // cuda::adamw_update_master (variant 1)
#include "kernels/cuda/launch_shape.cuh"  // elementwise_blocks, kElementwiseThreads, grid_first_index, grid_stride
#include "perf/kernels/playground.cuh"    // harness

namespace {

namespace pg = trident::playground;
namespace tk = trident::kernels;

// ---- variant 2 -------------------------------------------------------------------------------

struct Constants {
  float lr, beta1, beta2, eps, weight_decay, inv_bias_correction1, inv_bias_correction2, grad_scale;
  const std::uint32_t* decay_mask;
};

// Production's per-element arithmetic (kernels/cuda/adamw.cu, `updated`), copied.
__device__ __forceinline__ float updated(const Constants& k, float wd, float param, float grad, float& m, float& v) {
  const float g = grad * k.grad_scale;
  const float mi = k.beta1 * m + (1.0f - k.beta1) * g;
  const float vi = k.beta2 * v + (1.0f - k.beta2) * g * g;
  m = mi;
  v = vi;
  const float mhat = mi * k.inv_bias_correction1;
  const float vhat = vi * k.inv_bias_correction2;
  return param - k.lr * (mhat / (sqrtf(vhat) + k.eps) + wd * param);
}

__device__ __forceinline__ float decay_of(const Constants& k, std::size_t i) {
  if (k.decay_mask == nullptr) return k.weight_decay;
  return (__ldg(k.decay_mask + (i >> 5)) >> (i & 31)) & 1u ? k.weight_decay : 0.0f;
}

__global__ void adamw_quads_kernel(float* master, __nv_bfloat16* compute, const float* grad, float* m, float* v,
                                   std::size_t n, Constants k) {
  const std::size_t quads = n / 4;
  auto* master4 = reinterpret_cast<float4*>(master);
  const auto* grad4 = reinterpret_cast<const float4*>(grad);
  auto* m4 = reinterpret_cast<float4*>(m);
  auto* v4 = reinterpret_cast<float4*>(v);
  for (std::size_t q = tk::cuda::grid_first_index(); q < quads; q += tk::cuda::grid_stride()) {
    float4 p = master4[q];
    const float4 g = grad4[q];
    float4 mq = m4[q];
    float4 vq = v4[q];
    const std::size_t i = 4 * q;
    p.x = updated(k, decay_of(k, i), p.x, g.x, mq.x, vq.x);
    p.y = updated(k, decay_of(k, i + 1), p.y, g.y, mq.y, vq.y);
    p.z = updated(k, decay_of(k, i + 2), p.z, g.z, mq.z, vq.z);
    p.w = updated(k, decay_of(k, i + 3), p.w, g.w, mq.w, vq.w);
    master4[q] = p;
    m4[q] = mq;
    v4[q] = vq;
    __nv_bfloat16 rounded[4] = {__float2bfloat16_rn(p.x), __float2bfloat16_rn(p.y), __float2bfloat16_rn(p.z),
                                __float2bfloat16_rn(p.w)};
    uint2 bits;
    std::memcpy(&bits, rounded, sizeof bits);
    reinterpret_cast<uint2*>(compute)[q] = bits;
  }
  // The last n % 4 elements, by the first threads.
  const std::size_t tail = 4 * quads + tk::cuda::grid_first_index();
  if (tail < n) {
    master[tail] = updated(k, decay_of(k, tail), master[tail], grad[tail], m[tail], v[tail]);
    compute[tail] = __float2bfloat16_rn(master[tail]);
  }
}

Constants constants_of(const tk::AdamWArgs& a) {
  return Constants{a.lr,
                   a.beta1,
                   a.beta2,
                   a.eps,
                   a.weight_decay,
                   static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(a.beta1), a.step))),
                   static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(a.beta2), a.step))),
                   a.grad_scale,
                   reinterpret_cast<const std::uint32_t*>(a.decay_mask)};
}

}  // namespace

int main(int argc, char** argv) {
  const pg::Args args = pg::parse_args_or_exit(argc, argv, "playground_adamw");
  pg::require_gpu();
  const std::size_t n = static_cast<std::size_t>(pg::env_int("ADAMW_N", 124475904));
  std::printf("adamw_update_master (bf16 compute copy) n = %zu, %d reps (median)\n", n, args.reps);

  // The state of a run some steps in: moments of the gradients' size, masters around +-0.1, a
  // decay mask with a run of undecayed elements every so often (biases and norms).
  const std::vector<float> master0 = pg::random_floats(n, 31, -0.1f, 0.1f);
  const std::vector<float> grad = pg::random_floats(n, 32, -1e-2f, 1e-2f);
  const std::vector<float> m0 = pg::random_floats(n, 33, -1e-3f, 1e-3f);
  const std::vector<float> v0 = pg::random_floats(n, 34, 0.0f, 1e-5f);
  std::vector<std::int32_t> mask(tk::adamw_decay_mask_words(n));
  for (std::size_t w = 0; w < mask.size(); w++) mask[w] = w % 24 == 5 ? 0 : -1;
  tk::AdamWArgs step;
  step.lr = 6e-4f;
  step.weight_decay = 0.1f;
  step.step = 1000;
  step.grad_scale = 0.37f;

  std::vector<float> master_ref = master0, m_ref = m0, v_ref = v0;
  std::vector<std::uint16_t> compute_ref(n);
  pg::DeviceBuffer<std::int32_t> d_mask = pg::upload(mask);
  {
    tk::AdamWArgs host_step = step;
    host_step.decay_mask = mask.data();
    tk::cpu::adamw_update_master(master_ref.data(), tk::ActPtr(compute_ref.data(), tk::Precision::kBf16),
                                 grad.data(), m_ref.data(), v_ref.data(), n, host_step, tk::Precision::kBf16);
  }
  step.decay_mask = d_mask.data();
  const std::vector<float> compute_ref_values = pg::decoded_bf16(compute_ref);

  const pg::DeviceBuffer<float> d_master(n), d_grad = pg::upload(grad), d_m(n), d_v(n);
  const pg::DeviceBuffer<std::uint16_t> d_compute(n);
  const pg::Stream stream;
  pg::Timer timer(stream.get());

  auto reset = [&] {
    for (const auto& [device, host] : {std::pair{&d_master, &master0}, std::pair{&d_m, &m0}, std::pair{&d_v, &v0}}) {
      PG_CUDA_CHECK(cudaMemcpy(device->data(), host->data(), device->bytes(), cudaMemcpyHostToDevice));
    }
    PG_CUDA_CHECK(cudaMemset(d_compute.data(), 0xff, d_compute.bytes()));  // NaN patterns
    PG_CUDA_CHECK(cudaDeviceSynchronize());
  };
  std::vector<std::vector<float>> first_results;  // variant 1's master, m, v and copy: variant 2 must match
  auto measure = [&](std::function<void()> launch) {
    return [&, launch](int reps) {
      reset();
      launch();
      std::vector<std::vector<float>> results = {pg::download(d_master), pg::download(d_m), pg::download(d_v),
                                                 pg::decoded_bf16(pg::download(d_compute))};
      pg::Outcome outcome;
      outcome.checks.push_back(pg::validate("master", results[0], master_ref, 1e-6));
      outcome.checks.push_back(pg::validate("m", results[1], m_ref, 1e-6));
      outcome.checks.push_back(pg::validate("v", results[2], v_ref, 1e-6));
      outcome.checks.push_back(pg::validate("bf16 copy", results[3], compute_ref_values, 1.0 / 128.0));
      if (first_results.empty()) {
        first_results = results;
      } else {
        const char* names[] = {"master bits", "m bits", "v bits", "copy bits"};
        for (std::size_t r = 0; r < results.size(); r++) {
          outcome.checks.push_back(pg::identical(names[r], results[r], first_results[r]));
        }
      }
      outcome.median_ms = timer.median_ms(reps, launch);
      return outcome;
    };
  };
  const std::vector<pg::Variant> variants = {
      {"production cuda::adamw_update_master, 4-byte loads", measure([&] {
         tk::cuda::adamw_update_master(d_master.data(), tk::ActPtr(d_compute.data(), tk::Precision::kBf16),
                                       d_grad.data(), d_m.data(), d_v.data(), n, step, tk::Precision::kBf16,
                                       stream.get());
       })},
      {"16-byte loads, 4 elements a thread", measure([&] {
         const std::size_t quads = n / 4 > 0 ? n / 4 : 1;
         adamw_quads_kernel<<<tk::cuda::elementwise_blocks(quads), tk::cuda::kElementwiseThreads, 0, stream.get()>>>(
             d_master.data(), reinterpret_cast<__nv_bfloat16*>(d_compute.data()), d_grad.data(), d_m.data(),
             d_v.data(), n, constants_of(step));
         PG_CHECK_LAUNCH();
       })},
  };
  const double bytes = 30.0 * static_cast<double>(n) + static_cast<double>(n) / 8.0;
  return pg::run_variants(args, variants, pg::Workload{bytes, 0.0});
}
