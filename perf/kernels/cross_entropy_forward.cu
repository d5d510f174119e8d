// Playground: the fused softmax + cross-entropy forward over a padded vocabulary. logits[N, Vp]
// with V real columns (the padding V..Vp never read); losses[n] = logsumexp(row) - row[target],
// and the row max and float sum of exp(l - max) that the backward's one pass needs (the
// contract of kernels/cuda/cross_entropy.cuh). Reference: the CPU twin
// trident::kernels::cpu::cross_entropy_forward.
//
//   playground_cross_entropy_forward [variant|all] [reps]
//   shape: CE_N (8192 rows: GPT-2 124M at micro-batch 8, T = 1024), CE_V (50257), CE_VP (50304)
//
// Variants:
//   1  production cuda::cross_entropy_forward, fp32 logits: a block of 1024 threads per row (256
//      until the fused loss and gradient came: kLossRowThreads, launch_shape.cuh), each
//      thread a running max and rescaled sum (online softmax, kernels/cuda/cross_entropy_math.h)
//      merged over the block: one read of the row, 16-byte loads where it is aligned.
//   2  the former production kernel (perf/kernels/two_pass_cross_entropy.cuh): the block max,
//      then the sum of exp(l - max) on it: two reads of the row (the second partly from L2, a
//      row being 201 KB).
//   3  production, bf16 logits (what train.precision = bf16 runs).
//   4  the former kernel, bf16 logits.
//   The bf16 variants read the logits rounded to bf16 and are checked against the twin on those
//   rounded values. Every variant is run twice from the same state: the bits must agree.
//   The online math is replayed on the host against the twin on every build
//   (tests/unit/kernels/cross_entropy_replay_test.cpp).
//
// GB/s: one read of the real logits in the variant's storage (N * V * 4 or 2 bytes), the least
// any forward must move; so a two-read variant shows at most half the DRAM bandwidth unless its
// second read hits L2.
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/cross_entropy.h"           // cpu::cross_entropy_forward (the reference)
#include "kernels/cuda/cross_entropy.cuh"        // cuda::cross_entropy_forward (variants 1, 3)
#include "kernels/stored_element.h"              // stored::Fp32, stored::Bf16
#include "perf/kernels/cross_entropy_cases.h"    // test_logits, test_targets
#include "perf/kernels/playground.cuh"           // harness
#include "perf/kernels/two_pass_cross_entropy.cuh"  // two_pass::forward (variants 2, 4)

namespace {

namespace pg = trident::playground;
namespace tk = trident::kernels;

using pg::test_logits;
using pg::test_targets;

// The loss log(sum) + max - target (|loss| ~ 10 here) and the sum of exponentials differ from
// the twin's by the order of the double additions (negligible), the float rounding of the sum
// (the same on both sides), expf against the twin's exp_approx (each within 2 ulp: relative
// 2.4e-7 per term, averaging out over the row) and, online, the float rescale factors: each
// value's term is rescaled at most a few times in practice (a thread's max grows about ln k
// times over k random values), but up to once per value of the thread on an increasing row
// (row 0 of the tests: ~200 values a thread at V = 50257), whose largest terms come last and so
// are rescaled least. Measured by the host replay (tests/unit/kernels/cross_entropy_replay_test.cpp)
// well under 1e-6; 1e-5 leaves a margin while a missing rescale, a skipped or twice-read chunk
// or a wrong target gives 1e-3 or more. The max is exact (pg::exact): the same values compared.
constexpr double kLossTolerance = 1e-5;
constexpr double kSumTolerance = 1e-5;

// The twin's answers on `logits`.
struct Reference {
  std::vector<float> losses, max, sum;
};

Reference twin(const std::vector<float>& logits, const std::vector<int32_t>& targets, int N, int V, int Vp) {
  const auto rows = static_cast<std::size_t>(N);
  Reference ref{std::vector<float>(rows), std::vector<float>(rows), std::vector<float>(rows)};
  tk::cpu::cross_entropy_forward(ref.losses.data(), ref.max.data(), ref.sum.data(), logits.data(), targets.data(), N,
                                 V, Vp);
  return ref;
}

void add_checks(pg::Outcome& outcome, const Reference& ref, const std::vector<float>& losses,
                const std::vector<float>& max, const std::vector<float>& sum) {
  outcome.checks.push_back(pg::validate("loss", losses, ref.losses, kLossTolerance));
  outcome.checks.push_back(pg::exact("row max", max, ref.max));
  outcome.checks.push_back(pg::validate("row sum", sum, ref.sum, kSumTolerance));
}

}  // namespace

int main(int argc, char** argv) {
  const pg::Args args = pg::parse_args_or_exit(argc, argv, "playground_cross_entropy_forward");
  pg::require_gpu();
  const int N = pg::env_int("CE_N", 8192);
  const int V = pg::env_int("CE_V", 50257);
  const int Vp = pg::env_int("CE_VP", 50304);
  if (Vp < V) {
    std::fprintf(stderr, "CE_VP = %d must be at least CE_V = %d\n", Vp, V);
    return 2;
  }
  std::printf("cross_entropy_forward N = %d rows, V = %d (padded %d), %d reps (median)\n", N, V, Vp, args.reps);

  const std::vector<float> logits = test_logits(N, V, Vp, 51);
  const std::vector<int32_t> targets = test_targets(N, V, 52);
  const std::vector<float> logits16 = pg::rounded_to_bf16(logits);
  const Reference ref = twin(logits, targets, N, V, Vp);
  const Reference ref16 = twin(logits16, targets, N, V, Vp);

  const pg::DeviceBuffer<float> d_logits = pg::upload(logits);
  const pg::DeviceBuffer<uint16_t> d_logits16 = pg::upload(pg::encoded_bf16(logits16));
  const pg::DeviceBuffer<int32_t> d_targets = pg::upload(targets);
  const auto rows = static_cast<std::size_t>(N);
  const pg::DeviceBuffer<float> d_losses(rows), d_max(rows), d_sum(rows);
  const pg::Stream stream;
  pg::Timer timer(stream.get());
  const double fp32_bytes = 4.0 * static_cast<double>(N) * V;

  // Validates a NaN-poisoned run, checks a second run's bits against it, then times.
  auto measure = [&](const Reference& reference, double bytes, auto&& launch) {
    return [&, bytes, launch](int reps) {
      for (const auto* d : {&d_losses, &d_max, &d_sum}) {
        PG_CUDA_CHECK(cudaMemsetAsync(d->data(), 0xff, d->bytes(), stream.get()));
      }
      launch();
      pg::Outcome outcome;
      const std::vector<float> losses = pg::download(d_losses), max = pg::download(d_max), sum = pg::download(d_sum);
      add_checks(outcome, reference, losses, max, sum);
      launch();
      outcome.checks.push_back(pg::identical("run to run (sum)", pg::download(d_sum), sum));
      outcome.checks.push_back(pg::identical("run to run (loss)", pg::download(d_losses), losses));
      outcome.median_ms = timer.median_ms(reps, launch);
      outcome.bytes = bytes;
      return outcome;
    };
  };
  auto production = [&] {
    tk::cuda::cross_entropy_forward(d_losses.data(), d_max.data(), d_sum.data(), tk::ConstActPtr(d_logits.data()),
                                    d_targets.data(), N, V, Vp, stream.get());
  };
  auto production16 = [&] {
    tk::cuda::cross_entropy_forward(d_losses.data(), d_max.data(), d_sum.data(),
                                    tk::ConstActPtr(d_logits16.data(), tk::Precision::kBf16), d_targets.data(), N, V,
                                    Vp, stream.get());
  };
  auto former = [&] {
    PG_CUDA_CHECK(pg::two_pass::forward<tk::stored::Fp32>(d_losses.data(), d_max.data(), d_sum.data(),
                                                          d_logits.data(), d_targets.data(), N, V, Vp, stream.get()));
  };
  auto former16 = [&] {
    PG_CUDA_CHECK(pg::two_pass::forward<tk::stored::Bf16>(d_losses.data(), d_max.data(), d_sum.data(),
                                                          d_logits16.data(), d_targets.data(), N, V, Vp, stream.get()));
  };

  const std::vector<pg::Variant> variants = {
      {"production: online softmax, one read, fp32", measure(ref, fp32_bytes, production)},
      {"former production: max, then sum (two reads), fp32", measure(ref, fp32_bytes, former)},
      {"production: online softmax, one read, bf16", measure(ref16, fp32_bytes / 2, production16)},
      {"former production: max, then sum (two reads), bf16", measure(ref16, fp32_bytes / 2, former16)},
  };
  return pg::run_variants(args, variants, pg::Workload{fp32_bytes, 0.0});
}
