// The kernel playground's shared harness (perf/kernels/README.md): what every numbered-variant
// program needs and nothing else.
//
// - check macros that print the failing call, file and line and exit 1 (a playground program
//   is a small tool: it stops at the first failure instead of throwing);
// - require_gpu(): "SKIPPED: no CUDA device visible", exit 77, when there is no GPU;
// - DeviceBuffer<T>: cudaMalloc/cudaFree owned by an object; upload/download;
// - random_floats(): seeded uniform host data;
// - Timer: runs a launch `reps` times after a warm-up, each run alone between CUDA events and
//   after an L2 flush, and returns the median in milliseconds;
// - validate(): max |gpu - ref| / max |ref| against a stated tolerance, NaN/inf caught;
// - run_variants(): the `[variant] [reps]` command line, one printed row per variant, and the
//   exit status (non-zero when a variant fails validation).
//
// Header-only and free of kernels, so the host-side logic (median, validator, argument parser)
// also compiles as plain C++.
#pragma once

#include <cublas_v2.h>     // cublasStatus_t, cublasGetStatusString (cuBLASLt shares the type)
#include <cuda_runtime.h>  // cudaMalloc, cudaEvent*, cudaGetDeviceCount

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cublas_library.h"  // cublas_problem
#include "kernels/precision.h"            // round_to_bf16, encode_bf16, decode_bf16

namespace trident::playground {

[[noreturn]] inline void fail_cuda(cudaError_t status, const char* call, const char* file,
                                   int line) {
  std::fprintf(stderr, "CUDA error %s (%s) in %s at %s:%d\n", cudaGetErrorName(status),
               cudaGetErrorString(status), call, file, line);
  std::exit(1);
}

[[noreturn]] inline void fail_cublas(cublasStatus_t status, const char* call, const char* file,
                                     int line) {
  // cuBLAS is opened on first use (kernels/cuda/cublas_library.h): say so when it did not open.
  const std::string& load_problem = kernels::cuda::cublas_problem();
  std::fprintf(stderr, "cuBLAS error %s in %s at %s:%d%s%s\n", cublasGetStatusString(status), call, file, line,
               load_problem.empty() ? "" : ": ", load_problem.c_str());
  std::exit(1);
}

}  // namespace trident::playground

// Every CUDA runtime call of the playground goes through this one...
#define PG_CUDA_CHECK(call)                                                        \
  do {                                                                             \
    const cudaError_t pg_status_ = (call);                                         \
    if (pg_status_ != cudaSuccess) {                                               \
      ::trident::playground::fail_cuda(pg_status_, #call, __FILE__, __LINE__);     \
    }                                                                              \
  } while (0)
// ...every kernel launch is followed by this one (a bad launch shape shows at once)...
#define PG_CHECK_LAUNCH() PG_CUDA_CHECK(cudaGetLastError())
// ...and every cuBLAS and cuBLASLt call (both return cublasStatus_t) by this one.
#define PG_CUBLAS_CHECK(call)                                                      \
  do {                                                                             \
    const cublasStatus_t pg_status_ = (call);                                      \
    if (pg_status_ != CUBLAS_STATUS_SUCCESS) {                                     \
      ::trident::playground::fail_cublas(pg_status_, #call, __FILE__, __LINE__);   \
    }                                                                              \
  } while (0)

namespace trident::playground {

// Exit status of a program that could not run its checks: ctest's SKIP_RETURN_CODE convention.
inline constexpr int kSkippedExitCode = 77;

// Exits 77 with the SKIPPED line when no GPU is visible (no device, no driver, or any other
// error from cudaGetDeviceCount); otherwise prints the device it will use (device 0).
inline void require_gpu() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    std::printf("SKIPPED: no CUDA device visible\n");
    std::exit(kSkippedExitCode);
  }
  cudaDeviceProp prop{};
  PG_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0;
  PG_CUDA_CHECK(cudaDriverGetVersion(&driver));
  std::printf("device 0: %s, %d SMs, %.1f GiB, L2 %.0f MiB, driver %d.%d\n", prop.name,
              prop.multiProcessorCount, static_cast<double>(prop.totalGlobalMem) / (1 << 30),
              static_cast<double>(prop.l2CacheSize) / (1 << 20), driver / 1000,
              (driver % 1000) / 10);
}

// An integer from the environment (shapes), or `fallback` when unset. A value that is not a
// positive integer ends the program with status 2.
inline int env_int(const char* name, int fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value <= 0 || value > (1L << 30)) {
    std::fprintf(stderr, "%s=%s: expected a positive integer\n", name, text);
    std::exit(2);
  }
  return static_cast<int>(value);
}

// ---- device memory ----------------------------------------------------------------------------

// `count` elements of device memory, freed with the object. Move-only.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    if (count_ > 0) PG_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), bytes()));
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) {
      const cudaError_t status = cudaFree(data_);
      if (status != cudaSuccess) fail_cuda(status, "cudaFree(data_)", __FILE__, __LINE__);
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }

  T* data() const { return data_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

template <typename T>
DeviceBuffer<T> upload(const std::vector<T>& host) {
  DeviceBuffer<T> device(host.size());
  if (!host.empty()) {
    PG_CUDA_CHECK(cudaMemcpy(device.data(), host.data(), device.bytes(), cudaMemcpyHostToDevice));
    // A copy from pageable memory may return before its DMA ends, and the programs' streams do
    // not wait for the legacy stream: wait here.
    PG_CUDA_CHECK(cudaDeviceSynchronize());
  }
  return device;
}

// The first `count` elements of `device` (all of them by default); waits for the device.
template <typename T>
std::vector<T> download(const DeviceBuffer<T>& device, std::size_t count = SIZE_MAX) {
  std::vector<T> host(std::min(count, device.size()));
  PG_CUDA_CHECK(cudaDeviceSynchronize());  // the copy below is on the legacy stream
  if (!host.empty()) {
    PG_CUDA_CHECK(cudaMemcpy(host.data(), device.data(), host.size() * sizeof(T),
                             cudaMemcpyDeviceToHost));
  }
  return host;
}

// `n` floats uniform in [lo, hi) from std::mt19937_64(seed). The same seed gives the same data
// on one standard library (the validation compares GPU and CPU on the same data, so that suffices).
inline std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float lo, float hi) {
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<float> uniform(lo, hi);
  std::vector<float> values(n);
  for (float& v : values) v = uniform(engine);
  return values;
}

// A stream owned by the object (the production launchers and cuBLAS queue on it).
class Stream {
 public:
  Stream() { PG_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~Stream() {
    const cudaError_t status = cudaStreamDestroy(stream_);
    if (status != cudaSuccess) fail_cuda(status, "cudaStreamDestroy", __FILE__, __LINE__);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// ---- timing -----------------------------------------------------------------------------------

// Median of `samples` (mean of the two middle values for an even count; 0 for none).
inline double median(std::vector<double> samples) {
  if (samples.empty()) return 0.0;
  std::sort(samples.begin(), samples.end());
  const std::size_t mid = samples.size() / 2;
  return samples.size() % 2 == 1 ? samples[mid] : 0.5 * (samples[mid - 1] + samples[mid]);
}

// Times launches queued on one stream. Before each timed run a memset of twice the L2 size
// evicts the previous run's data, so every run starts from DRAM as it would inside a training
// step (where the kernel before it touched other tensors); the memset is outside the events.
class Timer {
 public:
  static constexpr int kWarmups = 3;

  explicit Timer(cudaStream_t stream) : stream_(stream) {
    int device = 0;
    int l2_bytes = 0;
    PG_CUDA_CHECK(cudaGetDevice(&device));
    PG_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
    flush_ = DeviceBuffer<unsigned char>(2 * static_cast<std::size_t>(std::max(l2_bytes, 1)));
    PG_CUDA_CHECK(cudaEventCreate(&start_));
    PG_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~Timer() {
    // Destructors report but cannot throw; a failure here means the device is already lost.
    if (cudaEventDestroy(start_) != cudaSuccess || cudaEventDestroy(stop_) != cudaSuccess) {
      std::fprintf(stderr, "cudaEventDestroy failed\n");
    }
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Median milliseconds of `reps` runs of launch() (which queues its work on the stream),
  // after kWarmups untimed runs.
  template <typename Launch>
  double median_ms(int reps, Launch&& launch) {
    for (int i = 0; i < kWarmups; i++) launch();
    std::vector<double> samples;
    samples.reserve(static_cast<std::size_t>(reps));
    for (int i = 0; i < reps; i++) {
      PG_CUDA_CHECK(cudaMemsetAsync(flush_.data(), i & 0xff, flush_.bytes(), stream_));
      PG_CUDA_CHECK(cudaEventRecord(start_, stream_));
      launch();
      PG_CUDA_CHECK(cudaEventRecord(stop_, stream_));
      PG_CUDA_CHECK(cudaEventSynchronize(stop_));
      float ms = 0.0f;
      PG_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
      samples.push_back(ms);
    }
    PG_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return median(std::move(samples));
  }

 private:
  cudaStream_t stream_;
  DeviceBuffer<unsigned char> flush_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

// ---- validation -------------------------------------------------------------------------------

// One output compared with its reference.
struct Check {
  std::string name;        // which output ("out", "mean", ...)
  double max_rel_err = 0;  // max |gpu - ref| / max |ref| (absolute when max |ref| is 0)
  double tolerance = 0;
  bool pass = false;
  std::string detail;      // the worst element, or why it failed
};

// gpu against ref, elementwise: passes when every value is finite, the sizes agree and
// max |gpu - ref| <= tolerance * max |ref|. The error is relative to the largest reference
// value, not to each element: values near zero (where a relative error means nothing) are
// held to the same absolute error as the rest.
inline Check validate(const std::string& name, const std::vector<float>& gpu,
                      const std::vector<float>& ref, double tolerance) {
  Check check{name, 0.0, tolerance, false, ""};
  if (gpu.size() != ref.size()) {
    check.max_rel_err = INFINITY;
    check.detail = name + ": " + std::to_string(gpu.size()) + " values against " +
                   std::to_string(ref.size()) + " in the reference";
    return check;
  }
  double max_ref = 0.0;
  for (std::size_t i = 0; i < ref.size(); i++) {
    if (!std::isfinite(ref[i])) {
      check.max_rel_err = INFINITY;
      check.detail = name + ": reference not finite at " + std::to_string(i);
      return check;
    }
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[i])));
  }
  double max_err = 0.0;
  std::size_t worst = 0;
  std::size_t nonfinite = 0;
  std::size_t first_nonfinite = 0;
  for (std::size_t i = 0; i < gpu.size(); i++) {
    if (!std::isfinite(gpu[i])) {
      if (nonfinite++ == 0) first_nonfinite = i;
      continue;
    }
    const double err = std::fabs(static_cast<double>(gpu[i]) - static_cast<double>(ref[i]));
    if (err > max_err) {
      max_err = err;
      worst = i;
    }
  }
  char text[256];
  if (nonfinite > 0) {
    check.max_rel_err = INFINITY;
    std::snprintf(text, sizeof text, "%s: %zu values not finite, first at %zu (%g, reference %g)",
                  name.c_str(), nonfinite, first_nonfinite,
                  static_cast<double>(gpu[first_nonfinite]),
                  static_cast<double>(ref[first_nonfinite]));
    check.detail = text;
    return check;
  }
  check.max_rel_err = max_ref > 0.0 ? max_err / max_ref : max_err;
  check.pass = check.max_rel_err <= tolerance;
  if (!gpu.empty()) {
    std::snprintf(text, sizeof text, "%s: worst at %zu: %.9g, reference %.9g (max |ref| %.6g)",
                  name.c_str(), worst, static_cast<double>(gpu[worst]),
                  static_cast<double>(ref[worst]), max_ref);
    check.detail = text;
  }
  return check;
}

// ---- the program: variants, rows, exit status -----------------------------------------------

// What one run of a variant gives: its checks (one per output) and its median time.
struct Outcome {
  std::vector<Check> checks;
  double median_ms = 0.0;
  // When > 0, this variant's own minimal traffic in bytes, in place of the program's Workload
  // bytes: for a table whose variants read the same tensor in different storages (fp32, bf16).
  double bytes = 0.0;
};

// A numbered variant: the number is its place in the program's list, from 1.
struct Variant {
  std::string description;           // one line, shown in the row
  std::function<Outcome(int)> run;   // validates, then times `reps` runs
};

// The work of one run, the same for every variant of a program so that the rates compare as
// the times do: the bytes an ideal kernel must move (inputs read once, outputs written once)
// and the floating-point operations (a multiply-add is 2); 0 when not meaningful.
struct Workload {
  double bytes = 0.0;
  double flops = 0.0;
};

struct Args {
  int variant = 0;  // 0: all
  int reps = 50;
};

// `[variant] [reps]`: variant is a number from 1 or "all"; reps >= 1. Returns false (after
// printing why to stderr) on anything else.
inline bool parse_args(int argc, const char* const* argv, Args& args) {
  auto positive = [](const char* text, int& value) {
    char* end = nullptr;
    const long parsed = std::strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || parsed < 1 || parsed > 1000000) return false;
    value = static_cast<int>(parsed);
    return true;
  };
  if (argc > 3) {
    std::fprintf(stderr, "too many arguments\n");
    return false;
  }
  if (argc > 1 && std::string(argv[1]) != "all" && !positive(argv[1], args.variant)) {
    std::fprintf(stderr, "variant '%s': expected a number from 1 or 'all'\n", argv[1]);
    return false;
  }
  if (argc > 2 && !positive(argv[2], args.reps)) {
    std::fprintf(stderr, "reps '%s': expected a positive number\n", argv[2]);
    return false;
  }
  return true;
}

// Parses the command line for `program`; exits 0 after --help, 2 on a bad argument.
inline Args parse_args_or_exit(int argc, const char* const* argv, const char* program) {
  Args args;
  if (argc > 1 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::printf("usage: %s [variant|all] [reps]   (default: all variants, %d reps)\n", program,
                args.reps);
    std::exit(0);
  }
  if (!parse_args(argc, argv, args)) {
    std::fprintf(stderr, "usage: %s [variant|all] [reps]\n", program);
    std::exit(2);
  }
  return args;
}

inline void print_header() {
  std::printf("%3s  %-58s %11s %9s %5s %10s %9s %8s\n", "#", "variant", "max rel err", "tol",
              "check", "median us", "GB/s", "TFLOP/s");
}

// One row: number, description, worst relative error and its tolerance, pass/FAIL, median
// time in microseconds, achieved GB/s (of the outcome's own bytes when it has them) and TFLOP/s
// of `work` ("-" where not meaningful); then
// the detail of each failed check on its own line.
inline void print_row(int number, const std::string& description, const Outcome& outcome,
                      const Workload& work) {
  // The check closest to (or furthest past) its tolerance is the one shown.
  auto ratio = [](const Check& c) {
    if (c.tolerance > 0) return c.max_rel_err / c.tolerance;
    return c.max_rel_err > 0 ? static_cast<double>(INFINITY) : 0.0;
  };
  const Check* worst = nullptr;
  bool pass = !outcome.checks.empty();
  for (const Check& c : outcome.checks) {
    pass = pass && c.pass;
    if (worst == nullptr || ratio(c) > ratio(*worst)) worst = &c;
  }
  const double seconds = outcome.median_ms * 1e-3;
  const double bytes = outcome.bytes > 0 ? outcome.bytes : work.bytes;
  char gbs[32] = "-";
  char tflops[32] = "-";
  if (bytes > 0 && seconds > 0) std::snprintf(gbs, sizeof gbs, "%.1f", bytes / seconds / 1e9);
  if (work.flops > 0 && seconds > 0) {
    std::snprintf(tflops, sizeof tflops, "%.2f", work.flops / seconds / 1e12);
  }
  std::printf("%3d  %-58.58s %11.3e %9.1e %5s %10.2f %9s %8s\n", number, description.c_str(),
              worst != nullptr ? worst->max_rel_err : INFINITY,
              worst != nullptr ? worst->tolerance : 0.0, pass ? "pass" : "FAIL",
              outcome.median_ms * 1e3, gbs, tflops);
  for (const Check& c : outcome.checks) {
    if (!c.pass) std::printf("       FAIL %s (tolerance %.1e)\n", c.detail.c_str(), c.tolerance);
  }
  std::fflush(stdout);
}

// A host replay's row (no time, no rates); true when it has checks and every one passed.
inline bool print_replay_row(int number, const std::string& description, const Outcome& outcome) {
  print_row(number, description, outcome, Workload{});
  bool pass = !outcome.checks.empty();
  for (const Check& c : outcome.checks) pass = pass && c.pass;
  return pass;
}

// Runs the selected variants (all when args.variant is 0), one row each. Returns 0 when every
// one passed validation, 1 otherwise; exits 2 when args.variant names no variant. An exception
// out of a variant (the production launchers throw std::runtime_error) ends the program with 1.
inline int run_variants(const Args& args, const std::vector<Variant>& variants,
                        const Workload& work) {
  if (args.variant > static_cast<int>(variants.size())) {
    std::fprintf(stderr, "variant %d: this program has variants 1..%zu\n", args.variant,
                 variants.size());
    std::exit(2);
  }
  print_header();
  int status = 0;
  for (std::size_t i = 0; i < variants.size(); i++) {
    const int number = static_cast<int>(i) + 1;
    if (args.variant != 0 && args.variant != number) continue;
    Outcome outcome;
    try {
      outcome = variants[i].run(args.reps);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "variant %d: %s\n", number, e.what());
      std::exit(1);
    }
    print_row(number, variants[i].description, outcome, work);
    for (const Check& c : outcome.checks) status |= c.pass ? 0 : 1;
    if (outcome.checks.empty()) status = 1;
  }
  return status;
}

// A cuBLAS handle on `stream` in one math mode, for its lifetime.
class CublasHandle {
 public:
  CublasHandle(cudaStream_t stream, cublasMath_t mode) {
    PG_CUBLAS_CHECK(cublasCreate(&handle_));
    PG_CUBLAS_CHECK(cublasSetStream(handle_, stream));
    PG_CUBLAS_CHECK(cublasSetMathMode(handle_, mode));
  }
  ~CublasHandle() { PG_CUBLAS_CHECK(cublasDestroy(handle_)); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// Passes when `again` has the same bits as `first` everywhere: determinism from run to run.
// The "error" shown is the fraction of values that differ.
inline Check identical(const std::string& name, const std::vector<float>& again, const std::vector<float>& first) {
  Check check{name, 0.0, 0.0, again.size() == first.size(), ""};
  std::size_t differ = 0;
  std::size_t first_at = 0;
  for (std::size_t i = 0; check.pass && i < first.size(); i++) {
    if (std::memcmp(&again[i], &first[i], sizeof(float)) != 0 && differ++ == 0) first_at = i;
  }
  if (!check.pass || differ > 0) {
    check.pass = false;
    check.max_rel_err = first.empty() ? INFINITY : static_cast<double>(differ) / static_cast<double>(first.size());
    char text[200];
    std::snprintf(text, sizeof text, "%s: %zu values differ between two runs, first at %zu", name.c_str(), differ,
                  first_at);
    check.detail = text;
  }
  return check;
}

// Passes when `got` holds exactly the values of `ref` (== elementwise, so -0 equals 0 and
// infinities of the same sign match; NaN anywhere fails): for outputs that copy or compare
// values without arithmetic (a max, a gathered logit), including a max of no values, -infinity,
// which validate() cannot take as a reference. The "error" shown is the fraction that differ.
inline Check exact(const std::string& name, const std::vector<float>& got, const std::vector<float>& ref) {
  Check check{name, 0.0, 0.0, got.size() == ref.size(), ""};
  std::size_t differ = 0;
  std::size_t first_at = 0;
  for (std::size_t i = 0; check.pass && i < ref.size(); i++) {
    if (!(got[i] == ref[i]) && differ++ == 0) first_at = i;
  }
  if (!check.pass || differ > 0) {
    check.pass = false;
    check.max_rel_err = ref.empty() ? INFINITY : static_cast<double>(differ) / static_cast<double>(ref.size());
    char text[200];
    std::snprintf(text, sizeof text, "%s: %zu of %zu values differ, first at %zu (%g, reference %g)", name.c_str(),
                  differ, ref.size(), first_at, got.empty() ? 0.0 : static_cast<double>(got[first_at]),
                  ref.empty() ? 0.0 : static_cast<double>(ref[first_at]));
    check.detail = text;
  }
  return check;
}

// The row of a variant that does not handle this shape: a failed check saying why, nothing run.
inline Outcome unsupported_shape(const std::string& why) { return Outcome{{{"shape", INFINITY, 0.0, false, why}}, 0.0, 0.0}; }

// ---- bf16 buffers -----------------------------------------------------------------------------

// Values rounded to bf16 (what a 16-bit variant reads; the twin's input for it), their bits for
// upload, and downloaded bits as floats for validate().
inline std::vector<float> rounded_to_bf16(std::vector<float> values) {
  for (float& v : values) v = trident::kernels::round_to_bf16(v);
  return values;
}

inline std::vector<uint16_t> encoded_bf16(const std::vector<float>& values) {
  std::vector<uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) bits[i] = trident::kernels::encode_bf16(values[i]);
  return bits;
}

inline std::vector<float> decoded_bf16(const std::vector<uint16_t>& bits) {
  std::vector<float> values(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) values[i] = trident::kernels::decode_bf16(bits[i]);
  return values;
}

}  // namespace trident::playground
