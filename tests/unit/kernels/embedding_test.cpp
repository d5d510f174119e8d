// embedding_forward / embedding_backward, with repeated tokens (the scatter-add case), over the
// whole vocabulary and split into vocabulary ranges (vocabulary-parallel tensor parallelism).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
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
  backend.embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), kB, kT, C, 0,
                            kVp);
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
  backend.embedding_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), kB, kT, C, 0,
                             kVp);
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
  backend.embedding_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), kB, kT, C, 0,
                             kVp);
  const auto dwte0 = random_floats(kVp * C, rng), dwpe0 = random_floats(kT * C, rng);
  auto dwte1 = dwte0, dwpe1 = dwpe0;
  backend.embedding_backward(dwte1.data(), dwpe1.data(), dout.data(), tokens.data(), kB, kT, C,
                             0, kVp);
  auto sum = [](const std::vector<float>& a, const std::vector<float>& c) {
    std::vector<double> s(a.size());
    for (std::size_t i = 0; i < a.size(); i++) s[i] = double(a[i]) + double(c[i]);
    return s;
  };
  // Up to 11 float additions of O(1) values in a different order: ~1e-6.
  expect_close(dwte1, sum(dwte0, dwte), 2e-6, 1e-6, "dwte accumulates");
  expect_close(dwpe1, sum(dwpe0, dwpe), 2e-6, 1e-6, "dwpe accumulates");
}

// --- vocabulary ranges ---------------------------------------------------------------------------

// make_tokens plus ids on both sides of the range boundaries used below (3, 7, 11).
std::vector<int32_t> make_split_tokens(std::mt19937& rng) {
  auto tokens = make_tokens(rng);
  tokens[1] = 6;
  tokens[2] = 7;
  tokens[3] = 11;
  tokens[kT + 1] = 10;
  tokens[kT + 2] = 2;
  tokens[kT + 3] = 7;  // a repeat inside the middle range
  return tokens;
}

// Range boundaries {0, b1, ..., Vp}, uneven; wpe_range says which range adds the positions.
struct Split {
  std::vector<int> bounds;
  std::size_t wpe_range;
};
const Split kSplits[] = {{{0, 7, kVp}, 1}, {{0, 3, 11, kVp}, 0}, {{0, 3, 11, kVp}, 2}};

TEST(CpuEmbedding, ForwardOverVocabRangesSumsToUnsplitExactly) {
  const int C = 20;
  std::mt19937 rng(54);
  cpu::CpuBackend backend(kTestThreads);
  const auto tokens = make_split_tokens(rng);
  auto wte = random_floats(kVp * C, rng), wpe = random_floats(kT * C, rng);
  std::vector<float> full(kB * kT * C);
  backend.embedding_forward(full.data(), tokens.data(), wte.data(), wpe.data(), kB, kT, C, 0,
                            kVp);
  for (const Split& split : kSplits) {
    // Each range writes exactly wte, exactly wpe, their float sum, or 0: the sum over ranges is
    // the unsplit result bit for bit (one position's single nonzero wte term plus wpe).
    std::vector<float> sum(full.size(), 0.0f);
    for (std::size_t r = 0; r + 1 < split.bounds.size(); r++) {
      const int begin = split.bounds[r], end = split.bounds[r + 1];
      std::vector<float> out(full.size(), std::numeric_limits<float>::quiet_NaN());
      const float* pos = r == split.wpe_range ? wpe.data() : nullptr;
      backend.embedding_forward(out.data(), tokens.data(), wte.data() + begin * C, pos, kB, kT, C,
                                begin, end);
      for (int bt = 0; bt < kB * kT; bt++) {
        const int32_t tok = tokens[static_cast<std::size_t>(bt)];
        const bool owned = tok >= begin && tok < end;
        for (int c = 0; c < C; c++) {
          const std::size_t i = static_cast<std::size_t>(bt) * C + c;
          if (!owned && pos == nullptr) {
            ASSERT_EQ(out[i], 0.0f) << "range " << r << " wrote a token it does not own";
          }
          sum[i] += out[i];
        }
      }
    }
    for (std::size_t i = 0; i < full.size(); i++)
      ASSERT_EQ(sum[i], full[i]) << "split into " << split.bounds.size() - 1
                                 << " ranges differs at " << i;
  }
}

TEST(CpuEmbedding, BackwardOverVocabRangesTouchesOwnedRowsOnly) {
  const int C = 70;  // two channel blocks
  std::mt19937 rng(55);
  cpu::CpuBackend backend(kTestThreads);
  const auto tokens = make_split_tokens(rng);
  auto dout = random_floats(kB * kT * C, rng);
  std::vector<float> full_dwte(kVp * C, 0.0f), full_dwpe(kT * C, 0.0f);
  backend.embedding_backward(full_dwte.data(), full_dwpe.data(), dout.data(), tokens.data(), kB,
                             kT, C, 0, kVp);
  constexpr float kGuard = 7.5f;  // rows around each shard, which must stay untouched
  for (const Split& split : kSplits) {
    std::vector<float> concatenated;
    std::vector<float> dwpe(kT * C, 0.0f);
    for (std::size_t r = 0; r + 1 < split.bounds.size(); r++) {
      const int begin = split.bounds[r], end = split.bounds[r + 1];
      const std::size_t rows = static_cast<std::size_t>(end - begin);
      // One guard row before and after the shard's rows.
      std::vector<float> buffer((rows + 2) * C, kGuard);
      std::fill(buffer.begin() + C, buffer.end() - C, 0.0f);
      float* pos = r == split.wpe_range ? dwpe.data() : nullptr;  // null dwpe elsewhere
      backend.embedding_backward(buffer.data() + C, pos, dout.data(), tokens.data(), kB, kT, C,
                                 begin, end);
      for (int c = 0; c < C; c++) {
        ASSERT_EQ(buffer[static_cast<std::size_t>(c)], kGuard) << "row before range " << r;
        ASSERT_EQ(buffer[(rows + 1) * C + c], kGuard) << "row after range " << r;
      }
      concatenated.insert(concatenated.end(), buffer.begin() + C, buffer.end() - C);
    }
    // Each owned row receives the same additions in the same order as unsplit: bit for bit.
    ASSERT_EQ(concatenated.size(), full_dwte.size());
    for (std::size_t i = 0; i < full_dwte.size(); i++)
      ASSERT_EQ(concatenated[i], full_dwte[i]) << "dwte element " << i << " (row " << i / C << ")";
    for (std::size_t i = 0; i < full_dwpe.size(); i++)
      ASSERT_EQ(dwpe[i], full_dwpe[i]) << "dwpe element " << i;
  }
}

TEST(CpuEmbedding, BackwardWithoutPositionGradient) {
  const int C = 70;
  std::mt19937 rng(56);
  cpu::CpuBackend backend(kTestThreads);
  const auto tokens = make_split_tokens(rng);
  auto dout = random_floats(kB * kT * C, rng);
  std::vector<float> with_pos(kVp * C, 0.0f), dwpe(kT * C, 0.0f), without_pos(kVp * C, 0.0f);
  backend.embedding_backward(with_pos.data(), dwpe.data(), dout.data(), tokens.data(), kB, kT, C,
                             0, kVp);
  backend.embedding_backward(without_pos.data(), nullptr, dout.data(), tokens.data(), kB, kT, C, 0,
                             kVp);
  for (std::size_t i = 0; i < with_pos.size(); i++)
    ASSERT_EQ(without_pos[i], with_pos[i]) << "dwte element " << i;
}

}  // namespace
}  // namespace trident::kernels::test
