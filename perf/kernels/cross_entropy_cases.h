// Test data of the cross-entropy playground programs (cross_entropy_forward,
// cross_entropy_shard_statistics) and their host replays: logits that exercise the online
// softmax's rescaling, with padding a kernel must never read, and targets.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "perf/kernels/playground.cuh"  // random_floats

namespace trident::playground {

// logits[N, Vp]: uniform in [-6, 6) in the first V columns; the padding NaN, so that a kernel
// reading it fails; row 0 an increasing ramp (each thread's max grows with each value: the most
// rescaling), row 1 a decreasing one (a thread's first value is its max).
inline std::vector<float> test_logits(int N, int V, int Vp, std::uint64_t seed) {
  std::vector<float> logits = random_floats(static_cast<std::size_t>(N) * Vp, seed, -6.0f, 6.0f);
  for (int n = 0; n < N; n++) {
    float* row = logits.data() + static_cast<std::size_t>(n) * Vp;
    for (int v = V; v < Vp; v++) row[v] = NAN;
    if (n < 2) {
      for (int v = 0; v < V; v++) {
        const float ramp = -6.0f + 12.0f * static_cast<float>(v) / static_cast<float>(V);
        row[v] = n == 0 ? ramp : -ramp;
      }
    }
  }
  return logits;
}

// N targets uniform in [0, V).
inline std::vector<int32_t> test_targets(int N, int V, std::uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::uniform_int_distribution<int32_t> pick(0, V - 1);
  std::vector<int32_t> targets(static_cast<std::size_t>(N));
  for (int32_t& t : targets) t = pick(engine);
  return targets;
}

}  // namespace trident::playground
