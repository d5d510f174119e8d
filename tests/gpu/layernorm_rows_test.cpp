// LayerNorm's two ways of spreading rows over the GPU (cuda::LayerNormRows, kernels/cuda/layernorm.cuh):
// a warp per row, the row held in registers (the default up to kWarpRowMaxC), and a block per row
// (the fallback above it). Each against the CPU twin, in fp32, bf16 and fp16 storage:
// - LayerNorm forward, the fused residual add + LayerNorm and the backward's dinp, dweight and
//   dbias;
// - rows that fill the warp's packs exactly (C = 768, 1024, 1280, 1536), rows that leave packs
//   empty or end within a pack (1600, 300, 37), rows above the warp's limit (2050: both ways
//   take the block); between them every instantiation of the warp's kernels (1600: 64 values a
//   lane, whose walk over the rows asks for more than the default 48 KiB of shared memory);
// - on the GPU, the fused kernel gives the bits of the add followed by the LayerNorm, as the
//   backend's contract says, in each way;
// - the backward's parameter sums both ways (LayerNormParameterSums): apart from dinp, and
//   in the walk over the rows that computes dinp; dinp the same bits either way;
// - a warp-per-row row read through a buffer that is not 16-byte aligned (one value at a time)
//   gives the bits of the aligned one (16-byte packs): the same values in the same order;
// - the walk's chunk count (walk_chunks, which the playground varies) changes only the order of
//   the parameter sums.
// The twin tests of cuda_layernorm_gelu_test.cpp and cuda_bf16_storage_test.cpp take the default
// through the backend; this holds both ways to the CPU directly.
#include <gtest/gtest.h>

#include <cmath>  // NAN
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/layernorm.cuh"  // cuda::layernorm_forward, residual_layernorm_forward, layernorm_backward
#include "kernels/precision.h"  // encode_16bit, decode_16bit
#include "kernels/rounded_storage_backend.h"
#include "tests/gpu/twin_test_support.h"

namespace trident::kernels::gpu_test {
namespace {

// The instantiation each row length takes (2-byte and 4-byte elements): GPT-2's widths fit a
// warp exactly or nearly, and 2048 is the last that fits.
static_assert(cuda::warp_row_values_per_lane(768, 2) == 24 && cuda::warp_row_values_per_lane(768, 4) == 24);
static_assert(cuda::warp_row_values_per_lane(1024, 2) == 32 && cuda::warp_row_values_per_lane(1280, 2) == 40);
static_assert(cuda::warp_row_values_per_lane(1280, 4) == 40 && cuda::warp_row_values_per_lane(1100, 4) == 40);
static_assert(cuda::warp_row_values_per_lane(1536, 2) == 48 && cuda::warp_row_values_per_lane(1600, 4) == 64);
static_assert(cuda::warp_row_values_per_lane(1600, 2) == 64 && cuda::warp_row_values_per_lane(2048, 4) == 64);
static_assert(cuda::warp_row_values_per_lane(300, 2) == 16 && cuda::warp_row_values_per_lane(37, 4) == 16);
static_assert(cuda::warp_row_values_per_lane(2049, 2) == 0 && cuda::warp_row_values_per_lane(0, 4) == 0);

constexpr double kOneBf16Unit = 1.0 / 128.0;   // a bf16 step relative to the largest value's binade
constexpr double kOneFp16Unit = 1.0 / 1024.0;  // an fp16 step, likewise

class LayerNormRowsTwins : public TwinBackends {
 protected:
  // Host values in storage p: fp32 as they are, 16-bit as patterns two to a float, with `offset`
  // leading values of padding (so that the buffer's values start `offset` elements in).
  static std::vector<float> stored(const std::vector<float>& values, Precision p, std::size_t offset = 0) {
    if (p == Precision::kFp32) {
      std::vector<float> out(offset, 0.0f);
      out.insert(out.end(), values.begin(), values.end());
      return out;
    }
    std::vector<uint16_t> bits(offset + values.size() + 1, 0);  // + 1: a whole number of floats
    for (std::size_t i = 0; i < values.size(); ++i) bits[offset + i] = encode_16bit(values[i], p);
    std::vector<float> words(bits.size() / 2);
    std::memcpy(words.data(), bits.data(), words.size() * sizeof(float));
    return words;
  }
  // The n values of storage p in `words`, from element `offset`, as floats.
  static std::vector<float> values_of(const std::vector<float>& words, Precision p, std::size_t n,
                                      std::size_t offset = 0) {
    std::vector<float> out(n);
    if (p == Precision::kFp32) {
      std::memcpy(out.data(), words.data() + offset, n * sizeof(float));
      return out;
    }
    std::vector<uint16_t> bits(words.size() * 2);
    std::memcpy(bits.data(), words.data(), words.size() * sizeof(float));
    for (std::size_t i = 0; i < n; ++i) out[i] = decode_16bit(bits[offset + i], p);
    return out;
  }
  static ActPtr at(TwinFloats& t, Side side, Precision p, std::size_t offset = 0) {
    if (p == Precision::kFp32) return ActPtr(t.on(side) + offset);
    return ActPtr(reinterpret_cast<uint16_t*>(t.on(side)) + offset, p);
  }
  TwinFloats twin_in(std::size_t n, float lo, float hi, Precision p) { return twin(stored(uniform(n, lo, hi), p)); }
};

struct Shape {
  int N, C;
};

std::string name_of(Precision p, const Shape& s, cuda::LayerNormRows rows) {
  return std::string(precision_name(p)) + " N=" + std::to_string(s.N) + " C=" + std::to_string(s.C) +
         (rows == cuda::LayerNormRows::kWarpPerRow ? " warp per row" : " block per row");
}

// Values a lane (bf16 and fp32): 24, 32, 40, 64, 48, 16, 16, then the block.
constexpr Shape kShapes[] = {{37, 768}, {7, 1024}, {9, 1280}, {4, 1600}, {9, 1536}, {6, 300}, {11, 37}, {5, 2050}};

TEST_F(LayerNormRowsTwins, BothWaysMatchTheCpuInEveryStorage) {
  for (const Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
    const double unit =
        p == Precision::kFp32 ? kReductionTolerance : p == Precision::kBf16 ? kOneBf16Unit : kOneFp16Unit;
    // The CPU twin on 16-bit buffers widens them, computes in fp32 and rounds what it stores.
    std::unique_ptr<RoundedStorageBackend> rounded;
    if (p != Precision::kFp32) rounded = std::make_unique<RoundedStorageBackend>(*cpu_, p);
    Backend& cpu = rounded ? static_cast<Backend&>(*rounded) : *cpu_;
    for (const Shape s : kShapes) {
      std::vector<std::vector<float>> statistics;  // each way's forward mean and rstd, bits
      for (const cuda::LayerNormRows rows : {cuda::LayerNormRows::kWarpPerRow, cuda::LayerNormRows::kBlockPerRow}) {
        SCOPED_TRACE(name_of(p, s, rows));
        rng_.seed(static_cast<unsigned>(s.N * 10000 + s.C));  // both ways draw the same inputs
        const std::size_t n = count_of(s.N, s.C);
        auto values = [&](TwinFloats& t, Side side, std::size_t count) { return values_of(t.values(side), p, count); };
        auto expect_agree = [&](TwinFloats& t, std::size_t count, double tolerance, const std::string& what) {
          expect_twins_agree(values(t, Side::kGpu, count), values(t, Side::kCpu, count), tolerance, what);
        };
        auto x = twin_in(n, -2.0f, 3.0f, p);  // mean ~0.5: centring matters
        auto weight = twin_in(s.C, 0.5f, 1.5f, p);
        auto bias = twin_in(s.C, -0.5f, 0.5f, p);
        auto out = twin_in(n, 5.0f, 9.0f, p);  // garbage: overwritten
        auto mean = twin(uniform(s.N, 5.0f, 9.0f));
        auto rstd = twin(uniform(s.N, 5.0f, 9.0f));
        const Side c = Side::kCpu, g = Side::kGpu;
        cpu.layernorm_forward(at(out, c, p), mean.on(c), rstd.on(c), at(x, c, p), at(weight, c, p), at(bias, c, p),
                              s.N, s.C);
        cuda::layernorm_forward(at(out, g, p), mean.on(g), rstd.on(g), at(x, g, p), at(weight, g, p), at(bias, g, p),
                                s.N, s.C, nullptr, rows);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        expect_agree(out, n, unit, "out");
        expect_twins_agree(mean, kReductionTolerance, "mean");
        expect_twins_agree(rstd, kReductionTolerance, "rstd");
        const std::vector<float> layernorm_out = out.values(g);
        statistics.push_back(mean.values(g));
        const std::vector<float> rstd_bits = rstd.values(g);
        statistics.back().insert(statistics.back().end(), rstd_bits.begin(), rstd_bits.end());

        // The fused residual add, the residual in place of a (as the model calls it): against
        // the CPU's, and on the GPU against the backend's add, then the LayerNorm of the sum.
        auto a = twin(x.values(c));
        auto b = twin_in(n, -1.0f, 1.0f, p);
        auto sum = twin_in(n, 5.0f, 9.0f, p);
        auto parts_out = twin_in(n, 5.0f, 9.0f, p);
        gpu_->add(at(sum, g, p), at(a, g, p), at(b, g, p), n);
        gpu_->synchronize();  // the backend's stream, then the launchers' default stream
        cuda::layernorm_forward(at(parts_out, g, p), mean.on(g), rstd.on(g), at(sum, g, p), at(weight, g, p),
                                at(bias, g, p), s.N, s.C, nullptr, rows);
        cpu.residual_layernorm_forward(at(a, c, p), at(out, c, p), mean.on(c), rstd.on(c), at(a, c, p), at(b, c, p),
                                       at(weight, c, p), at(bias, c, p), s.N, s.C);
        cuda::residual_layernorm_forward(at(a, g, p), at(out, g, p), mean.on(g), rstd.on(g), at(a, g, p), at(b, g, p),
                                         at(weight, g, p), at(bias, g, p), s.N, s.C, nullptr, rows);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        expect_agree(a, n, 0.0, "residual (one sum of the same values, rounded once)");
        expect_agree(out, n, unit, "residual layernorm out");
        expect_twins_agree(mean, kReductionTolerance, "residual layernorm mean");
        EXPECT_EQ(a.values(g), sum.values(g)) << "fused residual against the add";
        EXPECT_EQ(out.values(g), parts_out.values(g)) << "fused LayerNorm against the add then the LayerNorm";

        // Backward on the CPU forward's statistics of x.
        auto x_mean = twin(std::vector<float>(s.N));
        auto x_rstd = twin(std::vector<float>(s.N));
        cpu.layernorm_forward(at(out, c, p), x_mean.on(c), x_rstd.on(c), at(x, c, p), at(weight, c, p),
                              at(bias, c, p), s.N, s.C);
        auto stats_mean = twin(x_mean.values(c));
        auto stats_rstd = twin(x_rstd.values(c));
        auto dout = twin_in(n, -1.0f, 1.0f, p);
        const std::vector<float> dinp_start = stored(uniform(n, -1.0f, 1.0f), p);  // accumulated into
        const std::vector<float> dweight_start = uniform(s.C, -1.0f, 1.0f), dbias_start = uniform(s.C, -1.0f, 1.0f);
        // Scratch of NaN: a partial sum the backward reads before writing it shows.
        BackendFloats scratch(*gpu_, std::vector<float>(cuda::layernorm_backward_scratch_floats(s.C), NAN));
        std::vector<std::vector<float>> gradients;  // each way of summing: dinp, then dweight and dbias, bits
        using Sums = LayerNormParameterSums;
        for (const Sums sums : {Sums::kSeparatePass, Sums::kInRowWalk}) {
          SCOPED_TRACE(sums == Sums::kInRowWalk ? "sums in the row walk" : "sums apart");
          auto dinp = twin(dinp_start);
          auto dweight = twin(dweight_start);
          auto dbias = twin(dbias_start);
          cpu.layernorm_backward(at(dinp, c, p), dweight.on(c), dbias.on(c), at(dout, c, p), at(x, c, p),
                                 at(weight, c, p), stats_mean.on(c), stats_rstd.on(c), s.N, s.C);
          cuda::layernorm_backward(at(dinp, g, p), dweight.on(g), dbias.on(g), at(dout, g, p), at(x, g, p),
                                   at(weight, g, p), stats_mean.on(g), stats_rstd.on(g), s.N, s.C, scratch.get(),
                                   nullptr, rows, sums);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          expect_agree(dinp, n, unit, "dinp");
          expect_twins_agree(dweight, kReductionTolerance, "dweight");
          expect_twins_agree(dbias, kReductionTolerance, "dbias");
          gradients.push_back(dinp.values(g));
          std::vector<float> parameters = dweight.values(g);
          const std::vector<float> dbias_bits = dbias.values(g);
          parameters.insert(parameters.end(), dbias_bits.begin(), dbias_bits.end());
          gradients.push_back(parameters);
        }
        // dinp is the same arithmetic either way: the same bits. The parameter sums add in
        // another order in the walk, so in fp32 they differ in some bits where the walk ran (a
        // warp per row that fits; were they equal, the walk would not have run); elsewhere the
        // walk falls back to the separate pass: the same bits. (16-bit inputs: often exact sums.)
        EXPECT_EQ(gradients[0], gradients[2]) << "dinp, sums in the walk against apart";
        const bool walked = rows == cuda::LayerNormRows::kWarpPerRow && s.C <= cuda::kWarpRowMaxC;
        if (!walked) {
          EXPECT_EQ(gradients[1], gradients[3]) << "dweight and dbias where the walk falls back";
        } else if (p == Precision::kFp32) {
          EXPECT_NE(gradients[1], gradients[3]) << "dweight and dbias: the walk did not run";
        }

        // A row read value by value through an unaligned buffer: the aligned run's bits.
        if (rows == cuda::LayerNormRows::kWarpPerRow) {
          auto x_shifted = twin(stored(values_of(x.values(g), p, n), p, 1));
          auto out_shifted = twin_in(n + 2, 5.0f, 9.0f, p);
          cuda::layernorm_forward(at(out_shifted, g, p, 1), mean.on(g), rstd.on(g), at(x_shifted, g, p, 1),
                                  at(weight, g, p), at(bias, g, p), s.N, s.C, nullptr, rows);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          EXPECT_EQ(values_of(out_shifted.values(g), p, n, 1), values_of(layernorm_out, p, n))
              << "unaligned rows against aligned ones";
        }
      }
      // The two ways sum in different orders, so where a row fits a warp their fp32 statistics
      // differ in some bits (were they equal, the warp's kernel would not have run); above the
      // limit both take the block's kernel: the same bits. Not in 16-bit storage: there the
      // values have 8 or 11 significant bits, and their fp32 sums are often exact in any order.
      if (p != Precision::kFp32) continue;
      if (s.C <= cuda::kWarpRowMaxC) {
        EXPECT_NE(statistics[0], statistics[1]) << name_of(p, s, cuda::LayerNormRows::kWarpPerRow);
      } else {
        EXPECT_EQ(statistics[0], statistics[1]) << name_of(p, s, cuda::LayerNormRows::kWarpPerRow);
      }
    }
  }
}

// The walk's chunk count (the playground's walk_chunks; the model takes kWalkChunks) changes only
// the order of the parameter sums: dinp keeps its bits, dweight and dbias stay with the CPU's,
// and the fp32 sums of 37 rows in 3 chunks differ in some bits from those in 37 (were they equal,
// the count would not have reached the kernel). A count below 1 is refused.
TEST_F(LayerNormRowsTwins, WalkChunksChangeOnlyTheOrderOfTheParameterSums) {
  const Shape s{37, 768};
  const std::size_t n = count_of(s.N, s.C);
  const Precision p = Precision::kFp32;
  auto x = twin_in(n, -2.0f, 3.0f, p);
  auto weight = twin_in(s.C, 0.5f, 1.5f, p);
  auto bias = twin_in(s.C, -0.5f, 0.5f, p);
  auto out = twin(std::vector<float>(n));
  auto mean = twin(std::vector<float>(s.N));
  auto rstd = twin(std::vector<float>(s.N));
  cpu_->layernorm_forward(at(out, Side::kCpu, p), mean.on(Side::kCpu), rstd.on(Side::kCpu), at(x, Side::kCpu, p),
                          at(weight, Side::kCpu, p), at(bias, Side::kCpu, p), s.N, s.C);
  auto stats_mean = twin(mean.values(Side::kCpu));
  auto stats_rstd = twin(rstd.values(Side::kCpu));
  auto dout = twin_in(n, -1.0f, 1.0f, p);
  const std::vector<float> dinp_start = uniform(n, -1.0f, 1.0f);
  const std::vector<float> dweight_start = uniform(s.C, -1.0f, 1.0f), dbias_start = uniform(s.C, -1.0f, 1.0f);
  BackendFloats scratch(*gpu_, std::vector<float>(cuda::layernorm_backward_scratch_floats(s.C, s.N), NAN));
  std::vector<std::vector<float>> dinps, sums;
  for (const int chunks : {cuda::kWalkChunks, 3, s.N}) {
    SCOPED_TRACE("walk_chunks = " + std::to_string(chunks));
    auto dinp = twin(dinp_start);
    auto dweight = twin(dweight_start);
    auto dbias = twin(dbias_start);
    cpu_->layernorm_backward(at(dinp, Side::kCpu, p), dweight.on(Side::kCpu), dbias.on(Side::kCpu),
                             at(dout, Side::kCpu, p), at(x, Side::kCpu, p), at(weight, Side::kCpu, p),
                             stats_mean.on(Side::kCpu), stats_rstd.on(Side::kCpu), s.N, s.C);
    cuda::layernorm_backward(at(dinp, Side::kGpu, p), dweight.on(Side::kGpu), dbias.on(Side::kGpu),
                             at(dout, Side::kGpu, p), at(x, Side::kGpu, p), at(weight, Side::kGpu, p),
                             stats_mean.on(Side::kGpu), stats_rstd.on(Side::kGpu), s.N, s.C, scratch.get(), nullptr,
                             cuda::LayerNormRows::kWarpPerRow, LayerNormParameterSums::kInRowWalk, chunks);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    expect_twins_agree(dinp, kReductionTolerance, "dinp");
    expect_twins_agree(dweight, kReductionTolerance, "dweight");
    expect_twins_agree(dbias, kReductionTolerance, "dbias");
    dinps.push_back(dinp.values(Side::kGpu));
    sums.push_back(dweight.values(Side::kGpu));
  }
  EXPECT_EQ(dinps[0], dinps[1]) << "dinp with 3 chunks against 256";
  EXPECT_EQ(dinps[0], dinps[2]) << "dinp with 37 chunks against 256";
  EXPECT_EQ(sums[0], sums[2]) << "256 chunks of 37 rows are 37 of one row each";
  EXPECT_NE(sums[0], sums[1]) << "3 chunks summed as 37: the count did not reach the kernel";
  auto dinp = twin(dinp_start);
  EXPECT_THROW(cuda::layernorm_backward(at(dinp, Side::kGpu, p), scratch.get(), scratch.get(), at(dout, Side::kGpu, p),
                                        at(x, Side::kGpu, p), at(weight, Side::kGpu, p), stats_mean.on(Side::kGpu),
                                        stats_rstd.on(Side::kGpu), s.N, s.C, scratch.get(), nullptr,
                                        cuda::LayerNormRows::kWarpPerRow, LayerNormParameterSums::kInRowWalk, 0),
               std::invalid_argument);
}

}  // namespace
}  // namespace trident::kernels::gpu_test
