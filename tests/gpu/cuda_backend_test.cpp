// The CUDA backend against its CPU twin (kernels/cpu, the reference): the backend's own calls
// (names, memory, copies), the embeddings and the elementwise operations, on seeded random
// inputs, run on both backends, copied back and compared (twin_test_support.h: the measure and
// the tolerances). What follows holds for every twin test of the backend's operations.
//
// - Shapes are small but not multiples of 32 (B=2, T=37, C=48, NH=3), so every kernel's partial
//   warps and blocks are exercised; a second, wider case per row-wise operation has rows longer
//   than a block of 256 threads (T=300, C=771), so the strided loops inside a block take several
//   turns; elementwise ops also run on 3M elements, beyond one pass of the capped grid.
// - Backwards that accumulate get gradient outputs pre-filled with non-zero values; outputs
//   that are overwritten are pre-filled with garbage.
// - The vocabulary-parallel embedding runs on a shard in the middle of the vocabulary.
//
// The other operations have files of their own: cuda_matmul_test.cpp,
// cuda_layernorm_gelu_test.cpp, cuda_attention_test.cpp, cuda_adamw_test.cpp and
// cuda_cross_entropy_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/backend.h"              // Backend, BackendOptions
#include "kernels/out_of_memory.h"        // OutOfMemory
#include "tests/gpu/twin_test_support.h"  // TwinBackends, expect_twins_agree, tolerances

namespace trident::kernels::gpu_test {
namespace {

// --- the backend itself ------------------------------------------------------------------------

TEST_F(TwinBackends, CudaBackendNamesItsDevice) {
  EXPECT_EQ(gpu_->device(), Device::kCuda);
  const std::string name = gpu_->name();
  EXPECT_EQ(name.rfind("cuda (", 0), 0u) << name;
  EXPECT_NE(name.find(", sm_"), std::string::npos) << name;
  EXPECT_EQ(name.back(), ')') << name;
}

// trident check counts the 16-bit families from native_16bit_kernels without a backend; the
// backend must claim exactly those, for both attention kernels.
TEST_F(TwinBackends, ClaimsTheNativeFamiliesTridentCheckCounts) {
  EXPECT_EQ(gpu_->native_16bit(), native_16bit_kernels(Device::kCuda));
  EXPECT_EQ(cpu_->native_16bit(), native_16bit_kernels(Device::kCpu));
  BackendOptions flash;
  flash.attention = AttentionKernel::kFlash;
  EXPECT_EQ(make_backend(Device::kCuda, kCpuThreads, 0, flash)->native_16bit(),
            native_16bit_kernels(Device::kCuda, flash));
}

TEST_F(TwinBackends, AllocationsAreAlignedDeviceMemory) {
  for (const std::size_t count :
       {std::size_t{0}, std::size_t{1}, std::size_t{17}, std::size_t{1000}}) {
    float* p = gpu_->allocate(count);
    EXPECT_NE(p, nullptr) << count << " floats";
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u) << count << " floats";
    EXPECT_TRUE(gpu_->is_device_memory(p)) << count << " floats";
    gpu_->release(p);
    int32_t* t = gpu_->allocate_tokens(count);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t) % 64, 0u) << count << " tokens";
    gpu_->release_tokens(t);
  }
  std::vector<float> host(4);
  EXPECT_FALSE(gpu_->is_device_memory(host.data()));
}

TEST_F(TwinBackends, DeviceMemoryHighWaterCountsLiveAllocations) {
  auto gpu = make_backend(Device::kCuda, kCpuThreads);
  EXPECT_EQ(gpu->device_bytes_high_water(), 0u);
  float* a = gpu->allocate(1000);
  int32_t* t = gpu->allocate_tokens(10);
  EXPECT_EQ(gpu->device_bytes_high_water(), 4040u);
  gpu->release(a);
  float* b = gpu->allocate(500);  // fits in what was released: the mark stays
  EXPECT_EQ(gpu->device_bytes_high_water(), 4040u);
  gpu->release(b);
  gpu->release_tokens(t);
  EXPECT_EQ(cpu_->device_bytes_high_water(), 0u);  // host memory: not counted here
}

// An allocation no GPU holds (256 TiB) fails as std::bad_alloc that names the GPU, the size
// and what was free, and leaves the backend usable.
TEST_F(TwinBackends, FailedAllocationSaysWhatRanOut) {
  auto gpu = make_backend(Device::kCuda, kCpuThreads);
  const std::size_t floats = std::size_t{1} << 46;
  try {
    gpu->allocate(floats);
    ADD_FAILURE() << "a 256 TiB device allocation succeeded";
  } catch (const OutOfMemory& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("out of device memory on GPU 0: cudaMalloc of 268435456.0 MiB failed with ", 0), 0u) << what;
    EXPECT_NE(what.find(" free of "), std::string::npos) << what;
  }
  EXPECT_EQ(gpu->device_bytes_high_water(), 0u);
  float* small = gpu->allocate(16);  // the failure is not sticky
  gpu->release(small);
}

TEST_F(TwinBackends, CopiesAndZeroFillRoundTrip) {
  const std::vector<float> host = uniform(kSmallLength, -1.0f, 1.0f);
  float* dev = gpu_->allocate(host.size());
  gpu_->copy_to_device(dev, host.data(), host.size());
  std::vector<float> back(host.size());
  gpu_->copy_to_host(back.data(), dev, host.size());
  EXPECT_EQ(back, host);
  gpu_->fill_zero(dev + 1, host.size() - 2);  // not the first and last: exact extent
  gpu_->copy_to_host(back.data(), dev, host.size());
  EXPECT_EQ(back.front(), host.front());
  EXPECT_EQ(back.back(), host.back());
  EXPECT_EQ(std::count(back.begin() + 1, back.end() - 1, 0.0f),
            static_cast<std::ptrdiff_t>(host.size() - 2));
  gpu_->release(dev);
}


// --- embeddings --------------------------------------------------------------------------------

struct EmbeddingCase {
  const char* name;
  int vocab_begin, vocab_end;
  bool with_positions;
};
constexpr int kEmbB = 2, kEmbT = 37, kEmbC = 48, kEmbVp = 64;
constexpr EmbeddingCase kEmbeddingCases[] = {
    {"whole vocabulary, with positions", 0, kEmbVp, true},
    {"middle shard [20, 41), with positions", 20, 41, true},
    {"middle shard [20, 41), without positions", 20, 41, false},
};

TEST_F(TwinBackends, EmbeddingForwardMatchesCpu) {
  for (const EmbeddingCase& c : kEmbeddingCases) {
    SCOPED_TRACE(c.name);
    const int N = kEmbB * kEmbT;
    auto tokens = twin_tokens(uniform_ids(count_of(N, 1), 0, kEmbVp));
    auto wte = twin(uniform(count_of(c.vocab_end - c.vocab_begin, kEmbC), -1.0f, 1.0f));
    auto wpe = twin(uniform(count_of(kEmbT, kEmbC), -1.0f, 1.0f));
    auto out = twin(uniform(count_of(N, kEmbC), 5.0f, 9.0f));  // garbage: overwritten
    run_on_both([&](Backend& b, Side side) {
      b.embedding_forward(out.on(side), tokens.on(side), wte.on(side),
                          c.with_positions ? wpe.on(side) : nullptr, kEmbB, kEmbT, kEmbC,
                          c.vocab_begin, c.vocab_end);
    });
    expect_twins_agree(out, kElementwiseTolerance, "out");
  }
}

// B*T*C = 925200 > 1024 blocks * 256 threads: the forward's grid-stride loop takes several
// turns (its i / C and bt % T cross rows and sequences mid-pass); C = 771 leaves the backward's
// last tile of 128 channels partial. Forward and backward add in the CPU's order: identical
// (dwpe: the batch summed in order on both sides; dwte: the device sort keeps each token's
// positions ascending).
TEST_F(TwinBackends, EmbeddingOverSeveralGridPassesMatchesCpu) {
  const int B = 4, T = 300, C = 771, Vp = 64;
  const int N = B * T;
  auto tokens = twin_tokens(uniform_ids(count_of(N, 1), 0, Vp));
  auto wte = twin(uniform(count_of(Vp, C), -1.0f, 1.0f));
  auto wpe = twin(uniform(count_of(T, C), -1.0f, 1.0f));
  auto out = twin(uniform(count_of(N, C), 5.0f, 9.0f));  // garbage: overwritten
  run_on_both([&](Backend& b, Side side) {
    b.embedding_forward(out.on(side), tokens.on(side), wte.on(side), wpe.on(side), B, T, C, 0, Vp);
  });
  expect_twins_agree(out, 0.0, "out");
  auto dout = twin(uniform(count_of(N, C), -1.0f, 1.0f));
  auto dwte = twin(uniform(count_of(Vp, C), -1.0f, 1.0f));
  auto dwpe = twin(uniform(count_of(T, C), -1.0f, 1.0f));
  run_on_both([&](Backend& b, Side side) {
    b.embedding_backward(dwte.on(side), dwpe.on(side), dout.on(side), tokens.on(side), B, T, C, 0, Vp);
  });
  expect_twins_agree(dwte, 0.0, "dwte");
  expect_twins_agree(dwpe, 0.0, "dwpe");
}

// GPT-2's micro-batch and more: 16384 positions (B = 16, T = 1024), few distinct tokens (runs of
// hundreds of positions, as frequent tokens make), so the device sort takes its multi-pass,
// multi-block path: it must still keep each token's positions in order (equal bits), also on a
// vocabulary shard that skips the tokens below it.
TEST_F(TwinBackends, EmbeddingBackwardOfALargeBatchIsTheCpusBitForBit) {
  const int B = 16, T = 1024, C = 64, Vp = 96;
  auto tokens = twin_tokens(uniform_ids(count_of(B * T, 1), 0, Vp));
  auto dout = twin(uniform(count_of(B * T, C), -1.0f, 1.0f));
  for (const int vocab_begin : {0, 40}) {
    SCOPED_TRACE("rows [" + std::to_string(vocab_begin) + ", " + std::to_string(Vp) + ")");
    auto dwte = twin(uniform(count_of(Vp - vocab_begin, C), -1.0f, 1.0f));
    run_on_both([&](Backend& b, Side side) {
      b.embedding_backward(dwte.on(side), nullptr, dout.on(side), tokens.on(side), B, T, C, vocab_begin, Vp);
    });
    expect_twins_agree(dwte, 0.0, "dwte");
  }
}

TEST_F(TwinBackends, EmbeddingBackwardAccumulatesLikeCpu) {
  for (const EmbeddingCase& c : kEmbeddingCases) {
    SCOPED_TRACE(c.name);
    const int N = kEmbB * kEmbT;
    // Few distinct tokens, so rows receive many additions (the scatter's hard case).
    auto tokens = twin_tokens(uniform_ids(count_of(N, 1), 14, 47));
    auto dout = twin(uniform(count_of(N, kEmbC), -1.0f, 1.0f));
    auto dwte = twin(uniform(count_of(c.vocab_end - c.vocab_begin, kEmbC), -1.0f, 1.0f));
    auto dwpe = twin(uniform(count_of(kEmbT, kEmbC), -1.0f, 1.0f));
    run_on_both([&](Backend& b, Side side) {
      b.embedding_backward(dwte.on(side), c.with_positions ? dwpe.on(side) : nullptr, dout.on(side),
                           tokens.on(side), kEmbB, kEmbT, kEmbC, c.vocab_begin, c.vocab_end);
    });
    // The device sorts the positions by token and adds each token's rows in position order, the
    // twin's order, with the same fp32 additions: equal bit for bit (embedding_math.h).
    expect_twins_agree(dwte, 0.0, "dwte");
    expect_twins_agree(dwpe, kReductionTolerance, "dwpe");  // untouched when not passed
  }
}


// --- elementwise -------------------------------------------------------------------------------

TEST_F(TwinBackends, AddAccumulateAndScaleMatchCpu) {
  for (const std::size_t n : {kSmallLength, kLargeLength}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    auto a = twin(uniform(n, -1.0f, 1.0f));
    auto b = twin(uniform(n, -1.0f, 1.0f));
    auto out = twin(uniform(n, 5.0f, 9.0f));  // garbage: overwritten
    run_on_both([&](Backend& be, Side side) { be.add(out.on(side), a.on(side), b.on(side), n); });
    expect_twins_agree(out, kElementwiseTolerance, "add");
    // out aliasing an input, as the residual stream does.
    run_on_both([&](Backend& be, Side side) { be.add(a.on(side), a.on(side), b.on(side), n); });
    expect_twins_agree(a, kElementwiseTolerance, "add in place");
    run_on_both([&](Backend& be, Side side) { be.accumulate(out.on(side), b.on(side), n); });
    expect_twins_agree(out, kElementwiseTolerance, "accumulate");
    run_on_both([&](Backend& be, Side side) { be.scale(out.on(side), -0.37f, n); });
    expect_twins_agree(out, kElementwiseTolerance, "scale");
  }
}

// The device's own conversions (__float2bfloat16_rn, __float2half_rn) against the CPU's bit
// arithmetic (kernels/precision.h): both round to nearest, ties to even, so every bit agrees,
// over values that reach fp16's overflow and subnormal range.
TEST_F(TwinBackends, RoundToPrecisionIsBitIdenticalToCpu) {
  for (const Precision p : {Precision::kBf16, Precision::kFp16, Precision::kFp32}) {
    SCOPED_TRACE(precision_name(p));
    std::vector<float> values = uniform(kLargeLength, -70000.0f, 70000.0f);
    const std::vector<float> small = uniform(kSmallLength, -1e-6f, 1e-6f);
    values.insert(values.end(), small.begin(), small.end());
    auto x = twin(values);
    auto out = twin(uniform(values.size(), 5.0f, 9.0f));  // overwritten
    run_on_both([&](Backend& be, Side side) { be.round_to_precision(out.on(side), x.on(side), values.size(), p); });
    expect_twins_agree(out, 0.0, "round_to_precision");
    run_on_both([&](Backend& be, Side side) { be.round_to_precision(x.on(side), x.on(side), values.size(), p); });
    expect_twins_agree(x, 0.0, "round_to_precision in place");
  }
}

TEST_F(TwinBackends, SumSquaresMatchesCpuInDouble) {
  EXPECT_EQ(gpu_->sum_squares(nullptr, 0), 0.0);
  for (const std::size_t n : {std::size_t{1}, kSmallLength, kLargeLength}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    auto x = twin(uniform(n, -1.0f, 1.0f));
    const double want = cpu_->sum_squares(x.on(Side::kCpu), n);
    const double got = gpu_->sum_squares(x.on(Side::kGpu), n);
    EXPECT_LE(std::abs(got - want), kDoubleSumTolerance * want)
        << "gpu " << got << ", cpu " << want;
  }
}

// Every element counted once, whatever the start's alignment (the kernel reads 16 bytes at a time
// from the first 16-byte boundary, the up to 3 floats around that apart): values k / 8 have
// squares that are multiples of 2^-6, so every sum here is exact in double in any order, and
// one element dropped or counted twice shows as an inequality.
TEST_F(TwinBackends, SumSquaresCountsEveryElementOnceAtAnyAlignment) {
  // 2.2M floats: more than two passes of the grid (1024 x 256 threads x 4 floats), so threads
  // take both the two-load loop and the one-load remainder; once, misaligned (slow emulated).
  constexpr std::size_t kPasses = 2200003;
  const std::size_t n = kPasses + 8;
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<float>(static_cast<int>(i * 7919 % 17) - 8) / 8.0f;
  BackendFloats x(*gpu_, values);
  const auto check = [&](std::size_t offset, std::size_t count) {
    double want = 0.0;
    for (std::size_t i = offset; i < offset + count; ++i) want += static_cast<double>(values[i]) * values[i];
    EXPECT_EQ(gpu_->sum_squares(x.get() + offset, count), want) << "offset " << offset << ", count " << count;
  };
  for (const std::size_t offset : {0, 1, 2, 3, 5}) {
    for (const std::size_t count : {1, 2, 3, 4, 5, 7, 8, 9, 4099}) check(offset, count);
  }
  check(3, kPasses);
}

// One wait for all ranges: each range's total is sum_squares' (same kernels, same bits), added
// in order from 0 on the host; an empty range adds 0 (its total is cleared, not left stale).
TEST_F(TwinBackends, SumSquaresOfRangesMatchesOneCallPerRange) {
  const std::size_t n = kLargeLength;
  auto x = twin(uniform(n, -1.0f, 1.0f));
  const ElementRange ranges[] = {{0, 1}, {10, 0}, {17, kSmallLength}, {kSmallLength + 100, n - kSmallLength - 200}};
  double want = 0.0;
  for (const ElementRange& r : ranges) want += gpu_->sum_squares(x.on(Side::kGpu) + r.offset, r.count);
  EXPECT_EQ(gpu_->sum_squares_of_ranges(x.on(Side::kGpu), ranges, 4), want);
  const double cpu = cpu_->sum_squares_of_ranges(x.on(Side::kCpu), ranges, 4);
  EXPECT_LE(std::abs(want - cpu), kDoubleSumTolerance * cpu) << "gpu " << want << ", cpu " << cpu;
  EXPECT_EQ(gpu_->sum_squares_of_ranges(x.on(Side::kGpu), ranges, 0), 0.0);
  // The empty range's slot after a range with a large total: it must add 0.
  const ElementRange after[] = {{0, n}, {0, 0}};
  EXPECT_EQ(gpu_->sum_squares_of_ranges(x.on(Side::kGpu), after, 2), gpu_->sum_squares(x.on(Side::kGpu), n));
}

// The trainer's divergence check (src/train/trainer.cpp) reads an inf or NaN gradient from the
// norm's sum of squares: one such element, in the misaligned head, the 16-byte loads or the
// remainder, must make the device's sum non-finite too (a max or a fast-math reduction could
// drop a NaN).
TEST_F(TwinBackends, SumSquaresOfANonFiniteElementIsNotFinite) {
  const std::size_t n = kSmallLength + 7;
  std::vector<float> values(n, 0.5f);
  BackendFloats x(*gpu_, values);
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()}) {
    for (const std::size_t at : {std::size_t{1}, std::size_t{6}, n / 2, n - 2}) {
      SCOPED_TRACE("value " + std::to_string(bad) + " at " + std::to_string(at));
      gpu_->copy_to_device(x.get() + at, &bad, 1);
      EXPECT_FALSE(std::isfinite(gpu_->sum_squares(x.get() + 1, n - 1)));  // from a misaligned start
      const ElementRange ranges[] = {{0, at}, {at, n - at}};
      EXPECT_FALSE(std::isfinite(gpu_->sum_squares_of_ranges(x.get(), ranges, 2)));
      const float fine = 0.5f;
      gpu_->copy_to_device(x.get() + at, &fine, 1);
      EXPECT_TRUE(std::isfinite(gpu_->sum_squares(x.get(), n)));
    }
  }
}


}  // namespace
}  // namespace trident::kernels::gpu_test
