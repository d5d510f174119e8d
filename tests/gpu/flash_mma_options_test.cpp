// The tensor-core flash kernels' speed options (cuda::FlashMmaOptions,
// kernels/cuda/flash_attention_mma.cuh; perf/kernels' attention programs time them) do the same
// arithmetic in the same order for every row, so they must give the same bits as the defaults:
// out, lse and dqkv, bf16 and fp16.
// - The tile copy, cp.async (the default) or through registers: a copy that lands late, into the
//   buffer the warps are still reading, or not at all changes values (in the emulation such a
//   read gives NaN: kernels/cuda/async_copy.cuh), so does a row past T that is not zero-filled.
// - The forward's 32 query rows per warp (the default) against 16: each row walks the same key tiles in the
//   same order; a key tile after all of a warp's rows is skipped, where 16 rows never reach it
//   (computing it would add exact zeros). A row set given the wrong rows, keys or mask shows.
// The twin tests (cuda_bf16_storage_test.cpp) hold the defaults to the CPU; this holds the
// others to the defaults.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/flash_attention_mma.cuh"  // cuda::flash_attention_mma_forward/backward, FlashMmaOptions
#include "kernels/precision.h"                   // encode_16bit, decode_16bit
#include "tests/gpu/twin_test_support.h"

namespace trident::kernels::gpu_test {
namespace {

class FlashMmaOptions : public TwinBackends {
 protected:
  // n 16-bit values in p (n even), uniform in [lo, hi), two to a float, on the device.
  std::unique_ptr<BackendFloats> sixteen_bit(std::size_t n, float lo, float hi, Precision p) {
    const std::vector<float> values = uniform(n, lo, hi);
    std::vector<uint16_t> bits(n);
    for (std::size_t i = 0; i < n; ++i) bits[i] = encode_16bit(values[i], p);
    std::vector<float> words(n / 2);
    std::memcpy(words.data(), bits.data(), n * sizeof(uint16_t));
    return std::make_unique<BackendFloats>(*gpu_, words);
  }
  // `floats` words of 0xff bytes: NaN as fp32 and in both 16-bit halves.
  std::unique_ptr<BackendFloats> nan_words(std::size_t floats) {
    std::vector<float> words(floats);
    std::memset(words.data(), 0xff, floats * sizeof(float));
    return std::make_unique<BackendFloats>(*gpu_, words);
  }
  std::vector<float> words_of(BackendFloats& b, std::size_t floats) {
    std::vector<float> host(floats);
    gpu_->copy_to_host(host.data(), b.get(), floats);
    return host;
  }
};

ActPtr sixteen_bit_at(BackendFloats& b, Precision p) { return ActPtr(reinterpret_cast<uint16_t*>(b.get()), p); }

// The first word where two buffers' bits differ, or -1.
long first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<long>(i);
  }
  return a.size() == b.size() ? -1 : static_cast<long>(a.size());
}

// How many of the 16-bit values packed in `words` are not finite (each run starts from NaN).
int not_finite(const std::vector<float>& words, Precision p) {
  std::vector<uint16_t> bits(2 * words.size());
  std::memcpy(bits.data(), words.data(), bits.size() * sizeof(uint16_t));
  int count = 0;
  for (uint16_t b : bits) count += std::isfinite(decode_16bit(b, p)) ? 0 : 1;
  return count;
}

TEST_F(FlashMmaOptions, AllGiveTheSameBitsAsTheDefaults) {
  struct Shape {
    int B, T, C, NH;
  };
  // A last tile past T (200: zero-filled rows; with 32 rows a warp, a block of 128 queries with
  // 72 past T) and B > NH; one tile exactly (64: half a block of 128) and B < NH.
  for (const Shape s : {Shape{2, 200, 64, 1}, Shape{1, 64, 128, 2}}) {
    for (const Precision p : {Precision::kBf16, Precision::kFp16}) {
      SCOPED_TRACE(std::string(precision_name(p)) + " B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) +
                   " NH=" + std::to_string(s.NH));
      const std::size_t n_qkv = count_of(s.B * s.T, 3 * s.C), n_out = count_of(s.B * s.T, s.C);
      const std::size_t n_stat = count_of(s.B * s.NH, s.T);
      const float scale = 0.125f;  // 1 / sqrt(hs), hs = 64
      auto qkv = sixteen_bit(n_qkv, -2.0f, 2.0f, p);
      auto dout = sixteen_bit(n_out, -1.0f, 1.0f, p);
      // The backward reads D = rowsum(dout * out) as given; any values do for a comparison.
      BackendFloats delta(*gpu_, uniform(n_stat, -0.5f, 0.5f));
      std::vector<float> backward_lse;  // the first forward's: both backwards read the same L

      struct Run {
        std::vector<float> out, lse, dqkv;
      };
      auto run = [&](const cuda::FlashMmaOptions& options) {
        auto out = nan_words(n_out / 2);
        auto lse = nan_words(n_stat);
        auto dqkv = nan_words(n_qkv / 2);
        cuda::flash_attention_mma_forward(sixteen_bit_at(*out, p), lse->get(), ConstActPtr(sixteen_bit_at(*qkv, p)),
                                          s.B, s.T, s.C, s.NH, scale, nullptr, options);
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        Run r{words_of(*out, n_out / 2), words_of(*lse, n_stat), {}};
        if (backward_lse.empty()) backward_lse = r.lse;
        BackendFloats l(*gpu_, backward_lse);
        cuda::flash_attention_mma_backward(sixteen_bit_at(*dqkv, p), ConstActPtr(sixteen_bit_at(*dout, p)),
                                           ConstActPtr(sixteen_bit_at(*qkv, p)), l.get(), delta.get(), s.B, s.T, s.C,
                                           s.NH, scale, nullptr, options);
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        r.dqkv = words_of(*dqkv, n_qkv / 2);
        return r;
      };
      const Run defaults = run({});
      // Every output written (equal NaNs would compare equal too).
      EXPECT_EQ(not_finite(defaults.out, p), 0);
      EXPECT_EQ(not_finite(defaults.dqkv, p), 0);
      for (float x : defaults.lse) ASSERT_TRUE(std::isfinite(x));
      const struct {
        const char* name;
        cuda::FlashMmaOptions options;
      } others[] = {{"synchronous tile copies", {.copy = cuda::TileCopy::kSynchronous}},
                    {"16 query rows per warp", {.forward_rows_per_warp = 16}},
                    {"both", {.copy = cuda::TileCopy::kSynchronous, .forward_rows_per_warp = 16}}};
      for (const auto& other : others) {
        SCOPED_TRACE(other.name);
        const Run r = run(other.options);
        EXPECT_EQ(first_difference(r.out, defaults.out), -1) << "out: first differing pair of values";
        EXPECT_EQ(first_difference(r.lse, defaults.lse), -1) << "lse";
        EXPECT_EQ(first_difference(r.dqkv, defaults.dqkv), -1) << "dqkv: first differing pair of values";
      }
    }
  }
}

}  // namespace
}  // namespace trident::kernels::gpu_test
