// The token-embedding gradient kernel of kernels/cuda/embedding.cu replayed on the host: the
// device sort stood in for by std::stable_sort of the (token, position) pairs (CUB's radix sort
// is stable too), then every block of the grid (sorted index, channel tile) and every thread in
// it calling the same functions (kernels/cuda/embedding_math.h), against the CPU twin. The kernel
// is meant to add in the twin's order, so the results must be equal bit for bit; this checks
// the run detection, the ownership test (vocabulary shards) and the channel tiles on every
// build, GPU or not. tests/gpu checks the device does the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/embedding.h"             // cpu::embedding_backward
#include "kernels/cuda/embedding_math.h"       // embedding::starts_run, add_run, kChannelTile
#include "kernels/stored_element.h"            // stored::Fp32, Bf16
#include "tests/unit/kernels/kernel_test_util.h"  // random_floats, encoded, decoded

namespace trident::kernels::test {
namespace {

namespace emb = cuda::embedding;

// embedding_backward_wte_kernel<S> with its sort, on the host.
template <class S, class E = typename S::Element>
void replay_wte(std::vector<float>& dwte, const std::vector<E>& dout, const std::vector<int32_t>& tokens, int C,
                int vocab_begin, int vocab_end) {
  const int positions = static_cast<int>(tokens.size());
  std::vector<int32_t> order(tokens.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return tokens[a] < tokens[b]; });
  std::vector<int32_t> sorted_tokens(tokens.size());
  for (std::size_t i = 0; i < order.size(); ++i) sorted_tokens[i] = tokens[order[i]];
  const int tiles = (C + emb::kChannelTile - 1) / emb::kChannelTile;
  for (int first = 0; first < positions; ++first) {
    for (int tile = 0; tile < tiles; ++tile) {
      if (!emb::starts_run(sorted_tokens.data(), first)) continue;  // the block returns
      for (int tx = 0; tx < emb::kChannelTile; ++tx) {
        emb::add_run<S>(dwte.data(), dout.data(), sorted_tokens.data(), order.data(), positions, first, C,
                        tile * emb::kChannelTile + tx, vocab_begin, vocab_end);
      }
    }
  }
}

struct Case {
  const char* name;
  int B, T, C, vocab, vocab_begin, vocab_end;
};
// Skewed tokens over a small vocabulary: long runs (the frequent ids), single occurrences, and
// ids no position uses. 200 channels: a partial second tile. Shards: the lower rows, a middle
// slice, and a shard that owns no token of the batch.
const Case kCases[] = {
    {"unsharded", 4, 64, 200, 50, 0, 50},
    {"lower shard", 4, 64, 200, 50, 0, 17},
    {"middle shard", 3, 50, 130, 50, 17, 34},
    {"owns nothing", 2, 32, 64, 50, 40, 50},
};

std::vector<int32_t> skewed_tokens(int n, int vocab, int owned_limit, std::mt19937& rng) {
  std::vector<int32_t> tokens(static_cast<std::size_t>(n));
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int32_t& t : tokens) {
    // ~ 1/rank: the first ids take most positions; never an id at or past owned_limit.
    t = static_cast<int32_t>(std::min<double>(owned_limit - 1, std::floor(std::pow(vocab, u(rng)) - 1.0)));
  }
  return tokens;
}

TEST(EmbeddingRunsReplay, WteGradientIsTheCpuTwinsBitForBit) {
  std::mt19937 rng(17);
  for (const Case& c : kCases) {
    // "owns nothing": the batch's tokens all fall below the shard.
    const int limit = std::string(c.name) == "owns nothing" ? c.vocab_begin : c.vocab;
    const std::vector<int32_t> tokens = skewed_tokens(c.B * c.T, c.vocab, limit, rng);
    const std::vector<float> dout = random_floats(static_cast<std::size_t>(c.B) * c.T * c.C, rng);
    const std::vector<float> start =
        random_floats(static_cast<std::size_t>(c.vocab_end - c.vocab_begin) * c.C, rng);
    for (const bool bf16 : {false, true}) {
      const std::vector<float> values = bf16 ? decoded(encoded(dout, Precision::kBf16), Precision::kBf16) : dout;
      std::vector<float> want(start);
      cpu::embedding_backward(want.data(), nullptr, values.data(), tokens.data(), c.B, c.T, c.C, c.vocab_begin,
                              c.vocab_end);
      std::vector<float> got(start);
      if (bf16) {
        replay_wte<stored::Bf16>(got, encoded(dout, Precision::kBf16), tokens, c.C, c.vocab_begin, c.vocab_end);
      } else {
        replay_wte<stored::Fp32>(got, dout, tokens, c.C, c.vocab_begin, c.vocab_end);
      }
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
          << c.name << (bf16 ? ", bf16" : ", fp32") << ": not the twin's bits";
      if (std::string(c.name) == "owns nothing") {
        EXPECT_EQ(got, start) << "a shard that owns no token changed";
      }
    }
  }
}

}  // namespace
}  // namespace trident::kernels::test
