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
//   1  production cuda::cross_entropy_forward, fp32 logits: a block of 256 threads per row, a
//      block max, then the sum of exp(l - max) on it: two reads of the row (the second partly
//      from L2, a row being 201 KB).
//   2  online softmax (perf/kernels/online_cross_entropy.cuh), fp32, one value per load: each
//      thread a running max and rescaled sum, merged over the block: one read of the row.
//   3  2 with 16-byte loads (4 floats).
//   4  production, bf16 logits (what train.precision = bf16 runs).
//   5  online softmax, bf16, 16-byte loads (8 values).
//   The bf16 variants read the logits rounded to bf16 and are checked against the twin on those
//   rounded values. Every variant is run twice from the same state: the bits must agree.
//
//   playground_cross_entropy_forward replay   (no GPU needed) runs the online kernel's threads and
//   its block merge on the host (online_ce::replay_forward) against the twin, with and without
//   vector loads, fp32 and bf16, on shapes with tails, rows shorter than the block and rows
//   that are not 16-byte aligned. CTest runs it on every build (unit.cross_entropy_online_replay).
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
#include "kernels/cuda/cross_entropy.cuh"        // cuda::cross_entropy_forward (variants 1, 4)
#include "kernels/stored_element.h"              // stored::Fp32, stored::Bf16
#include "perf/kernels/cross_entropy_cases.h"    // test_logits, test_targets
#include "perf/kernels/online_cross_entropy.cuh"  // online_ce::forward, replay_forward (2, 3, 5)
#include "perf/kernels/playground.cuh"           // harness

namespace {

namespace pg = trident::playground;
namespace oce = trident::playground::online_ce;
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
// are rescaled least. Measured by the replay (the file's end) well under 1e-6; 1e-5 leaves a
// margin while a missing rescale, a skipped or twice-read chunk or a wrong target gives 1e-3 or
// more. The max is exact (pg::exact): the same values compared.
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

// `replay`: the online kernel's per-thread loops and block merge on the host against the twin.
int replay() {
  struct Shape {
    int N, V, Vp;
    const char* what;
  };
  const Shape shapes[] = {
      {3, 1000, 1024, "aligned rows"},
      {3, 100, 128, "fewer values than threads"},
      {3, 1001, 1003, "odd Vp: rows not 16-byte aligned, tails"},
      {2, 50257, 50304, "GPT-2 rows"},
  };
  pg::print_header();
  int number = 0;
  bool all_pass = true;
  for (const Shape& sh : shapes) {
    const std::vector<float> logits = test_logits(sh.N, sh.V, sh.Vp, 41);
    const std::vector<int32_t> targets = test_targets(sh.N, sh.V, 42);
    const std::vector<float> logits16 = pg::rounded_to_bf16(logits);
    const std::vector<uint16_t> bits = pg::encoded_bf16(logits16);
    const Reference ref = twin(logits, targets, sh.N, sh.V, sh.Vp);
    const Reference ref16 = twin(logits16, targets, sh.N, sh.V, sh.Vp);
    for (const bool bf16 : {false, true}) {
      for (const bool vectorized : {false, true}) {
        const auto rows = static_cast<std::size_t>(sh.N);
        std::vector<float> losses(rows, NAN), max(rows, NAN), sum(rows, NAN);
        if (bf16) {
          oce::replay_forward<tk::stored::Bf16>(losses.data(), max.data(), sum.data(), bits.data(), targets.data(),
                                                sh.N, sh.V, sh.Vp, vectorized);
        } else {
          oce::replay_forward<tk::stored::Fp32>(losses.data(), max.data(), sum.data(), logits.data(), targets.data(),
                                                sh.N, sh.V, sh.Vp, vectorized);
        }
        pg::Outcome outcome;
        add_checks(outcome, bf16 ? ref16 : ref, losses, max, sum);
        const std::string name = std::string("replay ") + (bf16 ? "bf16" : "fp32") +
                                 (vectorized ? " 16B" : " 1/load") + " V=" + std::to_string(sh.V) + " " + sh.what;
        all_pass = pg::print_replay_row(++number, name, outcome) && all_pass;
      }
    }
  }
  return all_pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "replay") return replay();
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
  auto online = [&](bool vectors) {
    return [&, vectors] {
      PG_CUDA_CHECK(oce::forward<tk::stored::Fp32>(d_losses.data(), d_max.data(), d_sum.data(), d_logits.data(),
                                                   d_targets.data(), N, V, Vp, vectors, stream.get()));
    };
  };
  auto online16 = [&] {
    PG_CUDA_CHECK(oce::forward<tk::stored::Bf16>(d_losses.data(), d_max.data(), d_sum.data(), d_logits16.data(),
                                                 d_targets.data(), N, V, Vp, true, stream.get()));
  };

  const std::vector<pg::Variant> variants = {
      {"production cuda::cross_entropy_forward, fp32 (max, then sum)", measure(ref, fp32_bytes, production)},
      {"online softmax, one read, fp32, one value per load", measure(ref, fp32_bytes, online(false))},
      {"online softmax, one read, fp32, 16-byte loads", measure(ref, fp32_bytes, online(true))},
      {"production cuda::cross_entropy_forward, bf16 logits", measure(ref16, fp32_bytes / 2, production16)},
      {"online softmax, one read, bf16, 16-byte loads", measure(ref16, fp32_bytes / 2, online16)},
  };
  return pg::run_variants(args, variants, pg::Workload{fp32_bytes, 0.0});
}
