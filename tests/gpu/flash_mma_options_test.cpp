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
// - The blocks' order, head by head (the default) or every head's longest walk first: each block
//   computes the same tile either way. A block given no tile, or another's, leaves values unwritten
//   (each run starts from NaN) or writes them twice; a head or batch element swapped shows where
//   both B and NH exceed 1 (the third shape).
// The twin tests (cuda_bf16_storage_test.cpp) hold the defaults to the CPU; this holds the
// others to the defaults. dQ in the key walk (FlashDq::kInKeyWalk) sums dQ in another order, so
// only its dK and dV must keep the defaults' bits; its dQ must repeat its own bits from run to
// run (the key tiles take turns in a fixed order), and the twin tests hold it to the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/flash_attention_mma.cuh"  // cuda::flash_attention_mma_forward/backward, FlashMmaOptions
#include "kernels/precision.h"                   // encode_16bit, decode_16bit
#include "tests/gpu/twin_test_support.h"

namespace trident::kernels::gpu_test {
namespace {

struct Shape {
  int B, T, C, NH;
};
// A last tile past T (200: zero-filled rows; with 32 rows a warp, a block of 128 queries with 72
// past T; in the backward 4 tiles, the last of 8 rows, so warps of the last key tile with no real
// key) and B > NH; one tile exactly (64: half a block of 128) and B < NH. The options' test adds
// B = 2 and NH = 3 over 3 tiles (2 of 128 queries), for the blocks' orders.
constexpr Shape kShapes[] = {{2, 200, 64, 1}, {1, 64, 128, 2}};
constexpr Shape kOptionShapes[] = {kShapes[0], kShapes[1], {2, 130, 192, 3}};
constexpr float kScale = 0.125f;  // 1 / sqrt(hs), hs = 64

std::string case_name(const Shape& s, Precision p) {
  return std::string(precision_name(p)) + " B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) +
         " NH=" + std::to_string(s.NH);
}

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
  // The wgmma tests' cases: f(shape, precision) for kOptionShapes in bf16 and fp16; under the race
  // checker 3 of the 6, each shape in one precision (kRaceChecker).
  template <class F>
  void for_warpgroup_cases(F&& f) {
    const Precision precisions[] = {Precision::kBf16, Precision::kFp16};
    for (std::size_t si = 0; si < std::size(kOptionShapes); ++si) {
      for (std::size_t pi = 0; pi < std::size(precisions); ++pi) {
        if (kRaceChecker && si % std::size(precisions) != pi) continue;
        f(kOptionShapes[si], precisions[pi]);
      }
    }
  }
  // One case's sizes and inputs on the device: qkv, dout (16-bit), and D = rowsum(dout * out),
  // which the backward reads as given (any values do for a comparison).
  struct Inputs {
    std::size_t n_qkv, n_out, n_stat;
    std::unique_ptr<BackendFloats> qkv, dout, delta;
  };
  Inputs inputs(const Shape& s, Precision p) {
    Inputs in{count_of(s.B * s.T, 3 * s.C), count_of(s.B * s.T, s.C), count_of(s.B * s.NH, s.T), {}, {}, {}};
    in.qkv = sixteen_bit(in.n_qkv, -2.0f, 2.0f, p);
    in.dout = sixteen_bit(in.n_out, -1.0f, 1.0f, p);
    in.delta = std::make_unique<BackendFloats>(*gpu_, uniform(in.n_stat, -0.5f, 0.5f));
    return in;
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
  for (const Shape s : kOptionShapes) {
    for (const Precision p : {Precision::kBf16, Precision::kFp16}) {
      SCOPED_TRACE(case_name(s, p));
      const Inputs in = inputs(s, p);
      const std::size_t n_qkv = in.n_qkv, n_out = in.n_out, n_stat = in.n_stat;
      std::vector<float> backward_lse;  // the first forward's: both backwards read the same L

      struct Run {
        std::vector<float> out, lse, dqkv;
      };
      auto run = [&](const cuda::FlashMmaOptions& options) {
        auto out = nan_words(n_out / 2);
        auto lse = nan_words(n_stat);
        auto dqkv = nan_words(n_qkv / 2);
        cuda::flash_attention_mma_forward(sixteen_bit_at(*out, p), lse->get(), ConstActPtr(sixteen_bit_at(*in.qkv, p)),
                                          s.B, s.T, s.C, s.NH, kScale, nullptr, options);
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        Run r{words_of(*out, n_out / 2), words_of(*lse, n_stat), {}};
        if (backward_lse.empty()) backward_lse = r.lse;
        BackendFloats l(*gpu_, backward_lse);
        cuda::flash_attention_mma_backward(sixteen_bit_at(*dqkv, p), ConstActPtr(sixteen_bit_at(*in.dout, p)),
                                           ConstActPtr(sixteen_bit_at(*in.qkv, p)), l.get(), in.delta->get(), nullptr,
                                           s.B, s.T, s.C, s.NH, kScale, nullptr, options);
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
                    {"both", {.copy = cuda::TileCopy::kSynchronous, .forward_rows_per_warp = 16}},
                    {"longest walks first", {.block_order = FlashBlockOrder::kLongestFirst}},
                    {"longest walks first, 16 query rows per warp",
                     {.forward_rows_per_warp = 16, .block_order = FlashBlockOrder::kLongestFirst}}};
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

// The forward on warpgroup products (FlashProducts::kWarpgroup, wgmma) against the
// default's mma.sync, with each tile copy and block order, with two warpgroups a block (128
// queries: T = 64 leaves the second warpgroup's rows all past T, T = 200 and 130 a first
// warpgroup walking a key tile wholly after its rows), and with the softmax of each key tile
// beside the previous tile's P V (WarpgroupSchedule::kOverlapped: on the emulation, whose wgmma
// model finishes a product only at its wait and fills its accumulators with NaN until then, a
// wait too few or a buffer reused too soon changes the bits or stops the run). The same sums in
// the same 16-wide steps: on the emulation, whose models of the two instructions add in the same order, the same
// bits; on a GPU, where the order inside a step is the tensor cores' own, within two steps of the
// format relative to the largest |out| (the twin tests hold the default to the CPU at that
// scale), and lse within 1e-5 relative. A tile read through a wrong descriptor or swizzle, a
// rescale the products missed, or rows of the wrong warp differ by O(1).
TEST_F(FlashMmaOptions, WarpgroupProductsGiveTheWarpProductsForward) {
  if (!cuda::flash_attention_wgmma_available()) {
    GTEST_SKIP() << "wgmma needs a build for sm_90a and a compute capability 9.0 GPU";
  }
  for_warpgroup_cases([&](const Shape s, const Precision p) {
    SCOPED_TRACE(case_name(s, p));
    const Inputs in = inputs(s, p);
    auto forward = [&](const cuda::FlashMmaOptions& options) {
      auto out = nan_words(in.n_out / 2);
      auto lse = nan_words(in.n_stat);
      cuda::flash_attention_mma_forward(sixteen_bit_at(*out, p), lse->get(), ConstActPtr(sixteen_bit_at(*in.qkv, p)),
                                        s.B, s.T, s.C, s.NH, kScale, nullptr, options);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      return std::make_pair(words_of(*out, in.n_out / 2), words_of(*lse, in.n_stat));
    };
    const auto warp = forward({});
#ifndef TRIDENT_CUDA_EMULATION
    std::vector<uint16_t> warp_bits(in.n_out);
    std::memcpy(warp_bits.data(), warp.first.data(), warp_bits.size() * sizeof(uint16_t));
    double max_out = 0.0;
    for (uint16_t b : warp_bits) max_out = std::fmax(max_out, std::fabs(decode_16bit(b, p)));
    const double tolerance = 2.0 * (p == Precision::kBf16 ? 0x1p-7 : 0x1p-10) * max_out;
#endif
    const struct {
      const char* name;
      cuda::FlashMmaOptions options;
    } runs[] = {{"cp.async", {.forward_products = FlashProducts::kWarpgroup}},
                {"synchronous tile copies",
                 {.copy = cuda::TileCopy::kSynchronous, .forward_products = FlashProducts::kWarpgroup}},
                {"longest walks first",
                 {.block_order = FlashBlockOrder::kLongestFirst,
                  .forward_products = FlashProducts::kWarpgroup}},
                {"softmax beside the previous tile's P V",
                 {.forward_products = FlashProducts::kWarpgroup,
                  .forward_schedule = WarpgroupSchedule::kOverlapped}},
                {"softmax beside P V, longest walks first",
                 {.block_order = FlashBlockOrder::kLongestFirst,
                  .forward_products = FlashProducts::kWarpgroup,
                  .forward_schedule = WarpgroupSchedule::kOverlapped}},
                {"two warpgroups a block", {.forward_products = FlashProducts::kWarpgroup, .forward_warpgroups = 2}},
                {"two warpgroups, synchronous tile copies",
                 {.copy = cuda::TileCopy::kSynchronous,
                  .forward_products = FlashProducts::kWarpgroup,
                  .forward_warpgroups = 2}},
                {"two warpgroups, softmax beside P V",
                 {.forward_products = FlashProducts::kWarpgroup,
                  .forward_warpgroups = 2,
                  .forward_schedule = WarpgroupSchedule::kOverlapped}}};
    for (const auto& run : runs) {
      SCOPED_TRACE(run.name);
      const auto group = forward(run.options);
      EXPECT_EQ(not_finite(group.first, p), 0);
#ifdef TRIDENT_CUDA_EMULATION
      EXPECT_EQ(first_difference(group.first, warp.first), -1) << "out: first differing pair of values";
      EXPECT_EQ(first_difference(group.second, warp.second), -1) << "lse";
#else
      std::vector<uint16_t> bits(in.n_out);
      std::memcpy(bits.data(), group.first.data(), bits.size() * sizeof(uint16_t));
      for (std::size_t i = 0; i < bits.size(); ++i) {
        ASSERT_LE(std::fabs(decode_16bit(bits[i], p) - decode_16bit(warp_bits[i], p)), tolerance)
            << "out value " << i;
      }
      for (std::size_t i = 0; i < group.second.size(); ++i) {
        ASSERT_LE(std::fabs(group.second[i] - warp.second[i]), 1e-5 * std::fabs(warp.second[i])) << "lse " << i;
      }
#endif
    }
    EXPECT_THROW(forward({.forward_products = FlashProducts::kWarpgroup, .forward_warpgroups = 3}),
                 std::invalid_argument);
  });
}

// The backward on warpgroup products (FlashMmaOptions::backward_products = kWarpgroup; with
// backward_schedule = kOverlapped too, each tile's dV, dK or dQ products behind the next tile's
// scores, checked as the overlapped forward is; with two warpgroups a block, 128 keys and 128
// queries, whose first tiles lie wholly past one warpgroup's rows) against
// the mma.sync one with the same dQ option, L from the default forward: each tile copy and block
// order with dQ in its own walk, and dQ in the key walk (the dS^T tile read back as a transposed
// operand, the key tiles taking turns). As the forward's test above: on the emulation the same
// bits; on a GPU within two steps of the format relative to the largest |dQ|, |dK| or |dV| (each
// part its own scale). A tile read through a wrong descriptor, L or D of another query tile, a
// warp whose rows lie past T left out of a product, or a product read before its wait differ by
// O(1); an unwritten value stays NaN.
TEST_F(FlashMmaOptions, WarpgroupProductsGiveTheWarpProductsBackward) {
  if (!cuda::flash_attention_wgmma_available()) {
    GTEST_SKIP() << "wgmma needs a build for sm_90a and a compute capability 9.0 GPU";
  }
  for_warpgroup_cases([&](const Shape s, const Precision p) {
    SCOPED_TRACE(case_name(s, p));
    const Inputs in = inputs(s, p);
    auto out = nan_words(in.n_out / 2);
    auto lse = nan_words(in.n_stat);
    cuda::flash_attention_mma_forward(sixteen_bit_at(*out, p), lse->get(), ConstActPtr(sixteen_bit_at(*in.qkv, p)),
                                      s.B, s.T, s.C, s.NH, kScale, nullptr);
    auto sums = nan_words(cuda::flash_attention_mma_dq_sums_floats(s.B, s.T, s.NH));
    auto backward = [&](const cuda::FlashMmaOptions& options) {
      auto dqkv = nan_words(in.n_qkv / 2);
      cuda::flash_attention_mma_backward(sixteen_bit_at(*dqkv, p), ConstActPtr(sixteen_bit_at(*in.dout, p)),
                                         ConstActPtr(sixteen_bit_at(*in.qkv, p)), lse->get(), in.delta->get(),
                                         sums->get(), s.B, s.T, s.C, s.NH, kScale, nullptr, options);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> words = words_of(*dqkv, in.n_qkv / 2);
      std::vector<uint16_t> bits(in.n_qkv);
      std::memcpy(bits.data(), words.data(), bits.size() * sizeof(uint16_t));
      return bits;
    };
    // The part (0: dQ, 1: dK, 2: dV) of dqkv value i.
    auto part = [&](std::size_t i) { return static_cast<int>(i % (3 * static_cast<std::size_t>(s.C)) / s.C); };
    const double step = p == Precision::kBf16 ? 0x1p-7 : 0x1p-10;
#ifdef TRIDENT_CUDA_EMULATION
    constexpr bool emulated = true;  // the models add in the same order: the same bits
#else
    constexpr bool emulated = false;
#endif
    constexpr FlashProducts kGroup = FlashProducts::kWarpgroup;
    const struct {
      const char* name;
      FlashDq dq;
      cuda::FlashMmaOptions options;
    } runs[] = {{"cp.async", FlashDq::kSeparateWalk, {.backward_products = kGroup}},
                {"synchronous tile copies", FlashDq::kSeparateWalk,
                 {.copy = cuda::TileCopy::kSynchronous, .backward_products = kGroup}},
                {"longest walks first", FlashDq::kSeparateWalk,
                 {.block_order = FlashBlockOrder::kLongestFirst, .backward_products = kGroup}},
                {"the softmax beside the previous tile's products", FlashDq::kSeparateWalk,
                 {.backward_products = kGroup, .backward_schedule = WarpgroupSchedule::kOverlapped}},
                {"the softmax beside the products, longest walks first", FlashDq::kSeparateWalk,
                 {.block_order = FlashBlockOrder::kLongestFirst,
                  .backward_products = kGroup,
                  .backward_schedule = WarpgroupSchedule::kOverlapped}},
                {"two warpgroups a block", FlashDq::kSeparateWalk,
                 {.backward_products = kGroup, .backward_warpgroups = 2}},
                {"two warpgroups, synchronous tile copies", FlashDq::kSeparateWalk,
                 {.copy = cuda::TileCopy::kSynchronous, .backward_products = kGroup, .backward_warpgroups = 2}},
                {"two warpgroups, the softmax beside the products", FlashDq::kSeparateWalk,
                 {.backward_products = kGroup,
                  .backward_warpgroups = 2,
                  .backward_schedule = WarpgroupSchedule::kOverlapped}},
                {"dQ in the key walk", FlashDq::kInKeyWalk,
                 {.dq = FlashDq::kInKeyWalk, .backward_products = kGroup}}};
    FlashDq reference_dq = FlashDq::kSeparateWalk;
    std::vector<uint16_t> warp = backward({});
    for (const auto& run : runs) {
      SCOPED_TRACE(run.name);
      if (run.dq != reference_dq) {
        reference_dq = run.dq;
        warp = backward({.dq = run.dq});
      }
      double max_part[3] = {0.0, 0.0, 0.0};
      for (std::size_t i = 0; i < warp.size(); ++i) {
        max_part[part(i)] = std::fmax(max_part[part(i)], std::fabs(decode_16bit(warp[i], p)));
      }
      const std::vector<uint16_t> group = backward(run.options);
      for (std::size_t i = 0; i < group.size(); ++i) {
        const double got = decode_16bit(group[i], p), want = decode_16bit(warp[i], p);
        ASSERT_TRUE(std::isfinite(got)) << "dqkv value " << i << " not written or not finite";
        const double tolerance = emulated ? 0.0 : 2.0 * step * max_part[part(i)];
        ASSERT_LE(std::fabs(got - want), tolerance) << "dqkv value " << i << " (part " << part(i) << ")";
        if (emulated) {
          ASSERT_EQ(group[i], warp[i]) << "dqkv value " << i << " (part " << part(i) << "): -0 against +0";
        }
      }
    }
    // The overlapped schedule has no kernels for dQ in the key walk or for synchronous copies.
    constexpr WarpgroupSchedule kOverlap = WarpgroupSchedule::kOverlapped;
    EXPECT_THROW(backward({.dq = FlashDq::kInKeyWalk, .backward_products = kGroup, .backward_schedule = kOverlap}),
                 std::invalid_argument);
    EXPECT_THROW(backward({.copy = cuda::TileCopy::kSynchronous, .backward_products = kGroup,
                           .backward_schedule = kOverlap}),
                 std::invalid_argument);
    // Two warpgroups a block take dQ in its own walk; three are none of the choices.
    EXPECT_THROW(backward({.dq = FlashDq::kInKeyWalk, .backward_products = kGroup, .backward_warpgroups = 2}),
                 std::invalid_argument);
    EXPECT_THROW(backward({.backward_products = kGroup, .backward_warpgroups = 3}), std::invalid_argument);
  });
}

TEST_F(FlashMmaOptions, DqInTheKeyWalkKeepsDkAndDvAndRepeatsItsOwnBits) {
  for (const Shape s : kShapes) {
    for (const Precision p : {Precision::kBf16, Precision::kFp16}) {
      SCOPED_TRACE(case_name(s, p));
      const Inputs in = inputs(s, p);
      const std::size_t n_qkv = in.n_qkv;
      BackendFloats lse(*gpu_, uniform(in.n_stat, 2.0f, 3.0f));  // any L will do for a comparison
      // NaN sums: a turn taken out of order reads them, and dQ shows it.
      auto sums = nan_words(cuda::flash_attention_mma_dq_sums_floats(s.B, s.T, s.NH));
      auto run = [&](FlashDq dq) {
        auto dqkv = nan_words(n_qkv / 2);
        cuda::flash_attention_mma_backward(sixteen_bit_at(*dqkv, p), ConstActPtr(sixteen_bit_at(*in.dout, p)),
                                           ConstActPtr(sixteen_bit_at(*in.qkv, p)), lse.get(), in.delta->get(),
                                           sums->get(), s.B, s.T, s.C, s.NH, kScale, nullptr, {.dq = dq});
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<float> words = words_of(*dqkv, n_qkv / 2);
        std::vector<uint16_t> bits(2 * words.size());
        std::memcpy(bits.data(), words.data(), bits.size() * sizeof(uint16_t));
        return bits;
      };
      const std::vector<uint16_t> separate = run(FlashDq::kSeparateWalk);
      const std::vector<uint16_t> in_walk = run(FlashDq::kInKeyWalk);
      const std::vector<uint16_t> again = run(FlashDq::kInKeyWalk);
      EXPECT_EQ(in_walk, again) << "dQ in the key walk: two runs from one state differ";
      auto is_dq = [&](std::size_t i) { return i % (3 * static_cast<std::size_t>(s.C)) < static_cast<std::size_t>(s.C); };
      double max_dq = 0.0;
      for (std::size_t i = 0; i < separate.size(); ++i) {
        if (is_dq(i)) max_dq = std::fmax(max_dq, std::fabs(decode_16bit(separate[i], p)));
      }
      // dQ in another summation order (and on a GPU, dS from S^T = K Q^T instead of S = Q K^T,
      // which may round a probability the other way): within the twin tests' two steps of the
      // format, relative to max |dQ| (those tests bound both against the CPU).
      const double tolerance = 2.0 * (p == Precision::kBf16 ? 0x1p-7 : 0x1p-10) * max_dq;
      int dq_differ = 0;
      for (std::size_t i = 0; i < in_walk.size(); ++i) {
        ASSERT_TRUE(std::isfinite(decode_16bit(in_walk[i], p))) << "dqkv value " << i << " not written or not finite";
        if (is_dq(i)) {
          const double a = decode_16bit(in_walk[i], p), b = decode_16bit(separate[i], p);
          ASSERT_LE(std::fabs(a - b), tolerance) << "dQ value " << i;
          dq_differ += in_walk[i] != separate[i];
        } else {
          ASSERT_EQ(in_walk[i], separate[i]) << "dK or dV value " << i << " differs from the separate walk's";
        }
      }
      // Not a copy of the separate walk's dQ (which a launcher that ran the second kernel anyway
      // would give): at T = 200 most values are sums of several shares in another order.
      if (s.T > 64) {
        EXPECT_GT(dq_differ, 0);
      }
    }
  }
}

}  // namespace
}  // namespace trident::kernels::gpu_test
