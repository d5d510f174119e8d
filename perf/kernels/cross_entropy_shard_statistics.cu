// Playground: the vocabulary-parallel cross-entropy's per-shard statistics (tensor parallelism:
// each rank holds logits[N, Vp_local] for the ids [vocab_begin, vocab_begin + Vp_local), the
// first V_local real). stats[n], stats[N + n], stats[2N + n] = the shard's row max, the float sum
// of exp(l - that max), the target's logit when the shard holds it, else 0 (the contract of
// kernels/cuda/cross_entropy.cuh). Reference: the CPU twin
// trident::kernels::cpu::cross_entropy_shard_statistics.
//
//   playground_cross_entropy_shard_statistics [variant|all] [reps]
//   shape: CE_N (8192) rows; shard CE_SHARD (counted from 1; default 2, the last) of CE_TP (2)
//   over a vocabulary of CE_V (50257) padded to CE_VP (50304; a multiple of CE_TP): the last of
//   2 at GPT-2 shapes is 25,105 real columns and 47 of padding, half of the targets in it.
//
// Variants:
//   1  production cuda::cross_entropy_shard_statistics, fp32: one read of the row (online
//      softmax, kernels/cuda/cross_entropy_math.h), 16-byte loads where it is aligned.
//   2  the former production kernel (perf/kernels/two_pass_cross_entropy.cuh): the shard's max,
//      then the sum on it (the second read of a row right after the first, partly from L2).
//   3  production, bf16 logits.
//   4  the former kernel, bf16 logits.
//   The bf16 variants are checked against the twin on the logits rounded to bf16. Every variant
//   is run twice from the same state: the bits must agree. The online math is replayed on the
//   host against the twin on every build, all-padding and unaligned shards included
//   (tests/unit/kernels/cross_entropy_replay_test.cpp).
//
// GB/s: one read of the shard's real logits in the variant's storage.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cpu/cross_entropy.h"           // cpu::cross_entropy_shard_statistics (the reference)
#include "kernels/cuda/cross_entropy.cuh"        // cuda::cross_entropy_shard_statistics (variants 1, 3)
#include "kernels/stored_element.h"              // stored::Fp32, stored::Bf16
#include "perf/kernels/cross_entropy_cases.h"    // test_logits, test_targets
#include "perf/kernels/playground.cuh"           // harness
#include "perf/kernels/two_pass_cross_entropy.cuh"  // two_pass::shard_statistics (variants 2, 4)

namespace {

namespace pg = trident::playground;
namespace tk = trident::kernels;

// As cross_entropy_forward.cu's kSumTolerance (the reasoning there). The max and the target
// logit are the same values copied, so they are compared exactly (pg::exact: also the max of an
// all-padding shard, -infinity).
constexpr double kSumTolerance = 1e-5;

// Rank `rank` of `tp` over a vocabulary of V padded to Vp.
struct Shard {
  int Vp_local, vocab_begin, V_local;
};

Shard shard_of(int V, int Vp, int tp, int rank) {
  const int Vp_local = Vp / tp;
  const int vocab_begin = rank * Vp_local;
  return {Vp_local, vocab_begin, std::clamp(V - vocab_begin, 0, Vp_local)};
}

// The twin's stats on `logits` (a shard's [N, Vp_local]).
std::vector<float> twin(const std::vector<float>& logits, const std::vector<int32_t>& targets, int N, const Shard& s) {
  std::vector<float> stats(3 * static_cast<std::size_t>(N));
  tk::cpu::cross_entropy_shard_statistics(stats.data(), logits.data(), targets.data(), N, s.V_local, s.Vp_local,
                                          s.vocab_begin);
  return stats;
}

// The three blocks of `stats` checked separately (each against its own scale).
void add_checks(pg::Outcome& outcome, const std::vector<float>& ref, const std::vector<float>& stats, int N) {
  const auto rows = static_cast<std::ptrdiff_t>(N);
  auto block = [rows](const std::vector<float>& v, int b) {
    return std::vector<float>(v.begin() + b * rows, v.begin() + (b + 1) * rows);
  };
  outcome.checks.push_back(pg::exact("shard max", block(stats, 0), block(ref, 0)));
  outcome.checks.push_back(pg::validate("shard sum", block(stats, 1), block(ref, 1), kSumTolerance));
  outcome.checks.push_back(pg::exact("target logit", block(stats, 2), block(ref, 2)));
}

}  // namespace

int main(int argc, char** argv) {
  const pg::Args args = pg::parse_args_or_exit(argc, argv, "playground_cross_entropy_shard_statistics");
  pg::require_gpu();
  const int N = pg::env_int("CE_N", 8192);
  const int V = pg::env_int("CE_V", 50257);
  const int Vp = pg::env_int("CE_VP", 50304);
  const int tp = pg::env_int("CE_TP", 2);
  const int rank = pg::env_int("CE_SHARD", 2) - 1;  // the tensor rank, from 0
  if (Vp < V || Vp % tp != 0 || rank >= tp) {
    std::fprintf(stderr, "CE_VP = %d must be at least CE_V = %d and a multiple of CE_TP = %d; CE_SHARD at most CE_TP\n",
                 Vp, V, tp);
    return 2;
  }
  const Shard s = shard_of(V, Vp, tp, rank);
  std::printf("cross_entropy_shard_statistics N = %d rows, rank %d (from 0) of %d over V = %d (padded %d): columns "
              "[%d, %d), %d real; %d reps (median)\n",
              N, rank, tp, V, Vp, s.vocab_begin, s.vocab_begin + s.Vp_local, s.V_local, args.reps);

  const std::vector<float> logits = pg::test_logits(N, s.V_local, s.Vp_local, 71);
  const std::vector<int32_t> targets = pg::test_targets(N, V, 72);
  const std::vector<float> logits16 = pg::rounded_to_bf16(logits);
  const std::vector<float> ref = twin(logits, targets, N, s);
  const std::vector<float> ref16 = twin(logits16, targets, N, s);

  const pg::DeviceBuffer<float> d_logits = pg::upload(logits);
  const pg::DeviceBuffer<uint16_t> d_logits16 = pg::upload(pg::encoded_bf16(logits16));
  const pg::DeviceBuffer<int32_t> d_targets = pg::upload(targets);
  const pg::DeviceBuffer<float> d_stats(3 * static_cast<std::size_t>(N));
  const pg::Stream stream;
  pg::Timer timer(stream.get());
  const double fp32_bytes = 4.0 * static_cast<double>(N) * s.V_local;

  // Validates a NaN-poisoned run, checks a second run's bits against it, then times.
  auto measure = [&](const std::vector<float>& reference, double bytes, auto&& launch) {
    return [&, bytes, launch](int reps) {
      PG_CUDA_CHECK(cudaMemsetAsync(d_stats.data(), 0xff, d_stats.bytes(), stream.get()));
      launch();
      pg::Outcome outcome;
      const std::vector<float> stats = pg::download(d_stats);
      add_checks(outcome, reference, stats, N);
      launch();
      outcome.checks.push_back(pg::identical("run to run", pg::download(d_stats), stats));
      outcome.median_ms = timer.median_ms(reps, launch);
      outcome.bytes = bytes;
      return outcome;
    };
  };
  auto production = [&] {
    tk::cuda::cross_entropy_shard_statistics(d_stats.data(), tk::ConstActPtr(d_logits.data()), d_targets.data(), N,
                                             s.V_local, s.Vp_local, s.vocab_begin, stream.get());
  };
  auto production16 = [&] {
    tk::cuda::cross_entropy_shard_statistics(d_stats.data(), tk::ConstActPtr(d_logits16.data(), tk::Precision::kBf16),
                                             d_targets.data(), N, s.V_local, s.Vp_local, s.vocab_begin, stream.get());
  };
  auto former = [&] {
    PG_CUDA_CHECK(pg::two_pass::shard_statistics<tk::stored::Fp32>(d_stats.data(), d_logits.data(), d_targets.data(),
                                                                   N, s.V_local, s.Vp_local, s.vocab_begin,
                                                                   stream.get()));
  };
  auto former16 = [&] {
    PG_CUDA_CHECK(pg::two_pass::shard_statistics<tk::stored::Bf16>(d_stats.data(), d_logits16.data(),
                                                                   d_targets.data(), N, s.V_local, s.Vp_local,
                                                                   s.vocab_begin, stream.get()));
  };

  const std::vector<pg::Variant> variants = {
      {"production: online softmax, one read, fp32", measure(ref, fp32_bytes, production)},
      {"former production: max, then sum (two reads), fp32", measure(ref, fp32_bytes, former)},
      {"production: online softmax, one read, bf16", measure(ref16, fp32_bytes / 2, production16)},
      {"former production: max, then sum (two reads), bf16", measure(ref16, fp32_bytes / 2, former16)},
  };
  return pg::run_variants(args, variants, pg::Workload{fp32_bytes, 0.0});
}
