// Test support: a tiny GPT and its inputs, shared by the whole-model tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/precision.h"
#include "src/model/gpt.h"

namespace trident::test_support {

// layers, heads 2, hidden 8, context 8, vocab 11 padded to 16.
inline model::GptConfig tiny_config(int layers = 2) { return {layers, 2, 8, 8, 11, 16}; }

inline std::vector<int32_t> random_tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(0, vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = pick(rng);
  return t;
}

// GPT-2 initialisation plus noise, so that norms and biases are not at their trivial values
// and every tensor's gradient is exercised. rounded: the precision the values are rounded to
// first (an fp32 arena then holds what a 16-bit one would; a 16-bit arena rounds anyway).
inline void init_with_noise(model::Gpt& gpt, uint64_t seed, kernels::Precision rounded = kernels::Precision::kFp32) {
  std::vector<float> host(gpt.params().total_count());
  model::initialize_parameters(gpt.params(), seed, host.data());
  std::mt19937 rng(5);
  std::normal_distribution<float> noise(0.0f, 0.1f);
  for (auto& v : host) v = kernels::round_to_precision(v + noise(rng), rounded);
  gpt.set_parameters(0, host.data(), host.size());
}

}  // namespace trident::test_support
