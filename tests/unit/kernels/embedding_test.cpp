// embedding_forward / embedding_backward, with repeated tokens (the scatter-add case).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"              // CpuBackend
#include "tests/unit/kernels/kernel_test_util.h"  // random_floats, expect_close, numerical_gradient

namespace trident::kernels::test {
namespace {

constexpr int kB = 2, kT = 5, kVp = 16;

// Tokens with many repeats (0..3) plus the last padded id, so several positions hit one row.
std::vector<int32_t> make_tokens(std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> dist(0, 3);
  std::vector<int32_t> tokens(kB * kT);
  for (auto& t : tokens) t = dist(rng);
  tokens[kT - 1] = kVp - 1;
  return tokens;
}

std::vector<double> embedding_reference(const std::vector<int32_t>& tokens,
                                        const std::vector<double>& wte,
                                        const std::vector<double>& wpe, int C) {
  std::vector<double> out(static_cast<std::size_t>(kB) * kT * C);
  for (int b = 0; b < kB; b++)
    for (int t = 0; t < kT; t++)
      for (int c = 0; c < C; c++)
        out[(b * kT + t) * C + c] = wte[tokens[b * kT + t] * C + c] + wpe[t * C + c];
  return out;
}

TEST(CpuEmbedding, ForwardMatchesReference) {
  const int C = 20;
  std::mt19937 rng(51);
  cpu::CpuBackend backend(kTestThreads);
  const auto tokens = make_tokens(rng);
  auto wte = random_floats(kVp * C, rng), wpe = random_floats(kT * C, rng);
  std::vector<float> out(kB * kT * C);
  backend.embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), kB, kT, C);
  // One float addition: correctly rounded, within half an ulp (~6e-8) of the exact sum.
  expect_close(out, embedding_reference(tokens, to_double(wte), to_double(wpe), C), 0.0, 1.2e-7,
               "out");
}

TEST(CpuEmbedding, BackwardMatchesFiniteDifferences) {
  const int C = 70;  // two channel blocks (64 + 6)
  std::mt19937 rng(52);
  cpu::CpuBackend backend(kTestThreads);
  const auto tokens = make_tokens(rng);
  auto wte = random_floats(kVp * C, rng), wpe = random_floats(kT * C, rng);
  auto dout = random_floats(kB * kT * C, rng);
  std::vector<float> dwte(kVp * C, 0.0f), dwpe(kT * C, 0.0f);
  backend.embedding_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), kB, kT, C);
  const auto wte_d = to_double(wte), wpe_d = to_double(wpe);
  auto loss_wte = [&](const std::vector<double>& x) {
    return weighted_sum(embedding_reference(tokens, x, wpe_d, C), dout);
  };
  auto loss_wpe = [&](const std::vector<double>& x) {
    return weighted_sum(embedding_reference(tokens, wte_d, x, C), dout);
  };
  // Each gradient sums at most B*T = 10 values of size <= 1: float rounding < 1e-6; L is
  // linear, so the finite differences are exact to ~1e-9. Unused rows must be exactly 0.
  expect_close(dwte, numerical_gradient(loss_wte, wte_d), 1e-6, 1e-6, "dwte");
  expect_close(dwpe, numerical_gradient(loss_wpe, wpe_d), 1e-6, 1e-6, "dwpe");
}

TEST(CpuEmbedding, BackwardAccumulatesIntoGradients) {
  const int C = 70;
  std::mt19937 rng(53);
  cpu::CpuBackend backend(kTestThreads);
  const auto tokens = make_tokens(rng);
  auto dout = random_floats(kB * kT * C, rng);
  std::vector<float> dwte(kVp * C, 0.0f), dwpe(kT * C, 0.0f);
  backend.embedding_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), kB, kT, C);
  const auto dwte0 = random_floats(kVp * C, rng), dwpe0 = random_floats(kT * C, rng);
  auto dwte1 = dwte0, dwpe1 = dwpe0;
  backend.embedding_backward(dwte1.data(), dwpe1.data(), dout.data(), tokens.data(), kB, kT, C);
  auto sum = [](const std::vector<float>& a, const std::vector<float>& c) {
    std::vector<double> s(a.size());
    for (std::size_t i = 0; i < a.size(); i++) s[i] = double(a[i]) + double(c[i]);
    return s;
  };
  // Up to 11 float additions of O(1) values in a different order: ~1e-6.
  expect_close(dwte1, sum(dwte0, dwte), 2e-6, 1e-6, "dwte accumulates");
  expect_close(dwpe1, sum(dwpe0, dwpe), 2e-6, 1e-6, "dwpe accumulates");
}

}  // namespace
}  // namespace trident::kernels::test
