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
//   1  production cuda::adamw_update_master with AdamWLoads::kValues (the default): a grid-stride
//      loop, one element (4-byte loads) per thread and iteration, 1024 blocks of 256 threads;
//   2  production with AdamWLoads::kPacks (run.adamw_loads = packs): each thread takes 4
//      consecutive elements an iteration (one 16-byte load of master, grad, m and v each, one
//      8-byte store of the 4 bf16 values), the same arithmetic element by element, the last n % 4
//      elements one a thread. These buffers start on 16 bytes (cudaMalloc's), so the packs run.
//
// Tolerances: master, m and v differ from the twin only where nvcc contracts a multiply and an
// add into an fma (kernels/cuda/adamw.cu): an ulp or two of each value, under 1e-6 of the
// largest; the bf16 copy is master rounded once, so one bf16 unit (2^-7 of the largest) where
// the two masters straddle a rounding midpoint. Variant 2 must also give variant 1's bits
// exactly (checked): the same arithmetic on the same values.
//
// The rate column counts the 30 bytes an element (and the decay mask's bit) over the time.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <vector>

#include "kernels/backend.h"              // AdamWArgs, AdamWLoads, adamw_decay_mask_words
#include "kernels/cpu/adamw.h"            // cpu::adamw_update_master (the reference)
#include "kernels/cuda/adamw.cuh"         // cuda::adamw_update_master (both variants)
#include "perf/kernels/playground.cuh"    // harness

namespace pg = trident::playground;
namespace tk = trident::kernels;

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
  auto update = [&](tk::AdamWLoads loads) {
    tk::cuda::adamw_update_master(d_master.data(), tk::ActPtr(d_compute.data(), tk::Precision::kBf16), d_grad.data(),
                                  d_m.data(), d_v.data(), n, step, tk::Precision::kBf16, stream.get(), loads);
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
      {"production, AdamWLoads::kValues (4-byte loads)", measure([&] { update(tk::AdamWLoads::kValues); })},
      {"production, AdamWLoads::kPacks (16-byte loads, 4 elements a thread)",
       measure([&] { update(tk::AdamWLoads::kPacks); })},
  };
  const double bytes = 30.0 * static_cast<double>(n) + static_cast<double>(n) / 8.0;
  return pg::run_variants(args, variants, pg::Workload{bytes, 0.0});
}
