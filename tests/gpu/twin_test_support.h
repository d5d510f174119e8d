// Support for the GPU tests: the same inputs in a CPU-backend buffer and a CUDA-backend buffer
// ("twins"), one call run on both backends, and the comparison of the results with the CPU
// backend (kernels/cpu, the reference twin) as the expected side.
//
// The comparison measure is max_i |gpu_i - cpu_i| / max_i |cpu_i| over a whole tensor: the
// error relative to the tensor's scale. An element-wise relative error would blow up on
// entries that are near zero by cancellation (sums of signed terms), whose absolute error is
// still that of the large terms; the tensor's scale is what the rounding is relative to.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"  // Backend, make_backend

namespace trident::kernels::gpu_test {

// --- tolerances: max |gpu - cpu| / max |cpu| ------------------------------------------------
// Elementwise ops. add, accumulate, scale and the embedding forward are one IEEE-rounded
// operation per element on both sides, so they are expected identical; GELU and AdamW add an
// exponential or a square root per element (CUDA's expf, 2 ulp, against the CPU's exp_approx,
// 2 ulp; sqrtf and divisions correctly rounded on both) and nvcc's fused multiply-adds: a few
// ulp, i.e. a few 1e-7. 1e-6 bounds that and nothing looser.
inline constexpr double kElementwiseTolerance = 1e-6;
// GELU's backward is the exception: its s (1 - s) term cancels where the sigmoid s nears 1
// (x > 3), and multiplies the one-ulp difference of the two exponentials by up to ~40. Measured
// on x in [-6, 6] (2026-11-22, both exponentials against glibc's expf, 12M points): up to
// 2.4e-6 of max |cpu| ~ 1.1, and 1.5e-6 on this test's inputs in the CUDA emulation (which
// failed the 1e-6 above). 5e-6 covers that with CUDA's 2-ulp expf; a wrong term shows as 1e-2.
inline constexpr double kGeluBackwardTolerance = 5e-6;
// Reductions in float (matmul, attention, layernorm, cross-entropy, the backwards' sums over
// rows): both twins sum the same terms in different orders (cuBLAS against OpenBLAS blocking,
// block trees against sequential loops), which moves the result by about sqrt(terms) ulp of the
// largest term: below 1e-6 for the few hundred terms here. 1e-5 keeps a margin while an
// indexing or semantic slip (a wrong or missing term, overwrite instead of accumulate) shows
// as 1e-2 or more.
inline constexpr double kReductionTolerance = 1e-5;
// sum_squares accumulates in double on both sides: even the worst-case bound n * 2^-53 is 3e-10
// for the 3M elements here, while a float accumulation anywhere would show as 1e-7 or worse.
inline constexpr double kDoubleSumTolerance = 1e-10;

// --- input lengths -------------------------------------------------------------------------
// Small elementwise length (not a multiple of 32) and a large one (more than
// kMaxElementwiseBlocks * 256 threads, so each thread takes several turns of its loop).
inline constexpr std::size_t kSmallLength = 14213;
inline constexpr std::size_t kLargeLength = 3000017;

// a * b as a size, for buffer lengths and row offsets.
inline std::size_t count_of(int a, int b) {
  return static_cast<std::size_t>(a) * static_cast<std::size_t>(b);
}

// The bit patterns of floats, so that results compare as bits (16-bit values two to a float could
// read as NaN, which never compares equal).
inline std::vector<uint32_t> bits_of(const std::vector<float>& values) {
  std::vector<uint32_t> bits(values.size());
  std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  return bits;
}

// Which twin of a buffer a call uses.
enum class Side { kCpu, kGpu };

// A float buffer on each backend, both filled with the same host values.
class TwinFloats {
 public:
  TwinFloats(Backend& cpu, Backend& gpu, const std::vector<float>& host)
      : cpu_(&cpu), gpu_(&gpu), count_(host.size()) {
    cpu_ptr_ = cpu.allocate(count_);
    gpu_ptr_ = gpu.allocate(count_);
    cpu.copy_to_device(cpu_ptr_, host.data(), count_);
    gpu.copy_to_device(gpu_ptr_, host.data(), count_);
  }
  ~TwinFloats() {
    cpu_->release(cpu_ptr_);
    gpu_->release(gpu_ptr_);
  }
  TwinFloats(const TwinFloats&) = delete;
  TwinFloats& operator=(const TwinFloats&) = delete;

  float* on(Side side) { return side == Side::kCpu ? cpu_ptr_ : gpu_ptr_; }
  std::size_t size() const { return count_; }
  std::vector<float> values(Side side) {
    std::vector<float> host(count_);
    Backend& backend = side == Side::kCpu ? *cpu_ : *gpu_;
    backend.copy_to_host(host.data(), on(side), count_);
    return host;
  }

 private:
  Backend* cpu_;
  Backend* gpu_;
  std::size_t count_;
  float* cpu_ptr_ = nullptr;
  float* gpu_ptr_ = nullptr;
};

// A float buffer on one backend only (for scratch, whose size each backend chooses), filled
// with host values.
class BackendFloats {
 public:
  BackendFloats(Backend& backend, const std::vector<float>& host)
      : backend_(&backend), ptr_(backend.allocate(host.size())) {
    backend.copy_to_device(ptr_, host.data(), host.size());
  }
  ~BackendFloats() { backend_->release(ptr_); }
  BackendFloats(const BackendFloats&) = delete;
  BackendFloats& operator=(const BackendFloats&) = delete;

  float* get() { return ptr_; }

 private:
  Backend* backend_;
  float* ptr_;
};

// An int32 token buffer on each backend, both filled with the same host values.
class TwinTokens {
 public:
  TwinTokens(Backend& cpu, Backend& gpu, const std::vector<int32_t>& host)
      : cpu_(&cpu), gpu_(&gpu) {
    cpu_ptr_ = cpu.allocate_tokens(host.size());
    gpu_ptr_ = gpu.allocate_tokens(host.size());
    cpu.copy_tokens_to_device(cpu_ptr_, host.data(), host.size());
    gpu.copy_tokens_to_device(gpu_ptr_, host.data(), host.size());
  }
  ~TwinTokens() {
    cpu_->release_tokens(cpu_ptr_);
    gpu_->release_tokens(gpu_ptr_);
  }
  TwinTokens(const TwinTokens&) = delete;
  TwinTokens& operator=(const TwinTokens&) = delete;

  const int32_t* on(Side side) const { return side == Side::kCpu ? cpu_ptr_ : gpu_ptr_; }

 private:
  Backend* cpu_;
  Backend* gpu_;
  int32_t* cpu_ptr_ = nullptr;
  int32_t* gpu_ptr_ = nullptr;
};

// With TRIDENT_TWIN_MARGINS=FILE in the environment, every comparison appends a line to FILE:
// test, what, the measured max |gpu - cpu| / max |cpu|, the tolerance and their ratio (tab
// separated). The margin of each tolerance, measured where the tests run: on a GPU
// (perf/gpu_check.sh keeps it) and on the emulation with and without fused multiply-adds
// (docs/testing-without-a-gpu.md).
inline void record_margin(const std::string& what, double relative, double tolerance) {
  const char* path = std::getenv("TRIDENT_TWIN_MARGINS");
  if (path == nullptr || *path == '\0') return;
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::ofstream out(path, std::ios::app);
  out << (test != nullptr ? std::string(test->test_suite_name()) + "." + test->name() : std::string("?")) << '\t'
      << what << '\t' << relative << '\t' << tolerance << '\t' << (tolerance > 0.0 ? relative / tolerance : relative)
      << '\n';
}

// Asserts max|gpu - cpu| / max|cpu| <= tolerance (see the file comment). Non-finite expected
// values (the -infinity of an all-padding shard's row max) must be matched exactly and are
// left out of the measure; a NaN or infinity where the CPU has a finite value fails.
inline void expect_twins_agree(const std::vector<float>& gpu, const std::vector<float>& cpu,
                               double tolerance, const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  double max_error = 0.0;
  double max_value = 0.0;
  std::size_t worst = 0;
  std::size_t non_finite_mismatches = 0;
  for (std::size_t i = 0; i < cpu.size(); i++) {
    const double want = static_cast<double>(cpu[i]);
    const double got = static_cast<double>(gpu[i]);
    if (!std::isfinite(want)) {
      if (!(got == want)) non_finite_mismatches++;
      continue;
    }
    const double error = std::isfinite(got) ? std::abs(got - want) : INFINITY;
    if (error > max_error) {
      max_error = error;
      worst = i;
    }
    max_value = std::max(max_value, std::abs(want));
  }
  EXPECT_EQ(non_finite_mismatches, 0u) << what << ": non-finite expected values not matched";
  // An all-zero expected tensor must be matched exactly.
  const double relative = max_value > 0.0 ? max_error / max_value : max_error;
  record_margin(what, relative, tolerance);
  EXPECT_LE(relative, tolerance) << what << ": max |gpu - cpu| / max |cpu| = " << relative
                                 << " (tolerance " << tolerance << "); worst at [" << worst
                                 << "] of " << cpu.size() << ": gpu " << gpu[worst] << ", cpu "
                                 << cpu[worst] << ", max |cpu| " << max_value;
}

inline void expect_twins_agree(TwinFloats& twin, double tolerance, const std::string& what) {
  expect_twins_agree(twin.values(Side::kGpu), twin.values(Side::kCpu), tolerance, what);
}

// Fixture: one CPU backend (the reference) and one CUDA backend, and a seeded generator so
// every run draws the same inputs.
class TwinBackends : public ::testing::Test {
 protected:
  void SetUp() override {
    cpu_ = make_backend(Device::kCpu, kCpuThreads);
    gpu_ = make_backend(Device::kCuda, kCpuThreads);
  }

  // Runs call(backend, side) on the CPU backend, then on the CUDA backend, and waits for the
  // GPU, so a kernel fault is reported by this call.
  template <typename Call>
  void run_on_both(Call call) {
    call(*cpu_, Side::kCpu);
    call(*gpu_, Side::kGpu);
    gpu_->synchronize();
  }

  std::vector<float> uniform(std::size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng_);
    return v;
  }

  std::vector<int32_t> uniform_ids(std::size_t n, int32_t lo, int32_t hi_exclusive) {
    std::uniform_int_distribution<int32_t> dist(lo, hi_exclusive - 1);
    std::vector<int32_t> v(n);
    for (auto& x : v) x = dist(rng_);
    return v;
  }

  TwinFloats twin(const std::vector<float>& host) { return TwinFloats(*cpu_, *gpu_, host); }
  TwinTokens twin_tokens(const std::vector<int32_t>& host) {
    return TwinTokens(*cpu_, *gpu_, host);
  }

#if defined(__SANITIZE_THREAD__)
  // One thread under ThreadSanitizer (the CUDA emulation's race checker): libgomp is not built
  // with it, so the order OpenMP's barriers give the CPU twin's threads is invisible to it, and
  // the twin's loops would be reported as races, slowly, by the thousand.
  static constexpr int kCpuThreads = 1;
  // The race checker pays for every barrier of every emulated thread in proportion to the
  // threads it has seen (ThreadSanitizer's vector clocks, an entry per fiber), so a test that
  // runs a grid of cases (shapes by options by precisions) runs a slice of the grid under it,
  // each shape and each option at least once: every kernel instantiation and launch geometry
  // still passes through the race checker. The whole grid runs in the emulation and on a GPU.
  static constexpr bool kRaceChecker = true;
#else
  static constexpr int kCpuThreads = 2;
  static constexpr bool kRaceChecker = false;
#endif
  std::unique_ptr<Backend> cpu_;
  std::unique_ptr<Backend> gpu_;
  std::mt19937 rng_{20250611};
};

}  // namespace trident::kernels::gpu_test
