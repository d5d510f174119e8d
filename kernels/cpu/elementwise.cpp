// Elementwise kernels: memory-bound, so one static parallel loop each (contiguous chunks per
// thread, no false sharing except at chunk edges) with a vectorised body. out may alias a or b.
// sum_squares accumulates in double: it feeds the global gradient norm over ~1e8 elements,
// where a float sum would lose the small terms. Each loop is compiled per ISA (simd_dispatch.h).
#include "kernels/cpu/elementwise.h"

#include <omp.h>  // omp_get_thread_num, omp_get_num_threads
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>  // _mm256_cvtps_ph, _mm256_cvtph_ps (F16C)
#endif

#include <algorithm>
#include <cstring>

#include "kernels/cpu/simd_dispatch.h"  // TRIDENT_SIMD_CLONES

namespace trident::kernels::cpu {

namespace {

// fp16 conversions with F16C (vcvtps2ph rounds to nearest even: the IEEE conversion that
// round_to_fp16 and encode_fp16 spell out in bits, branchy and scalar; vcvtph2ps is exact),
// eight values at a time. In the CPU twin's fp16 runs the 16-bit buffers are widened before
// and narrowed after every kernel, and the scalar conversions took 40% of the step. Each
// *_f16c function returns false, doing nothing, where the CPU or the compiler lacks them.
// Results equal the scalar functions' bit for bit, except a NaN's payload (a NaN stays a NaN);
// the precision tests compare the two over every kind of value and all 65536 patterns. bf16
// needs no such path: its conversions vectorise as written (kernels/precision.h).
#if defined(__GNUC__) && defined(__x86_64__)
bool cpu_has_f16c() { return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c"); }

__attribute__((target("avx,f16c"))) void round_to_fp16_f16c_loop(float* dst, const float* src,
                                                                 std::ptrdiff_t blocks) {
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t b = 0; b < blocks; b++) {
    const __m128i half = _mm256_cvtps_ph(_mm256_loadu_ps(src + 8 * b), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(dst + 8 * b, _mm256_cvtph_ps(half));
  }
}

__attribute__((target("avx,f16c"))) void encode_fp16_f16c_loop(uint16_t* bits, const float* src,
                                                               std::ptrdiff_t blocks) {
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t b = 0; b < blocks; b++) {
    const __m128i half = _mm256_cvtps_ph(_mm256_loadu_ps(src + 8 * b), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(bits + 8 * b), half);
  }
}

__attribute__((target("avx,f16c"))) void decode_fp16_f16c_loop(float* dst, const uint16_t* bits,
                                                               std::ptrdiff_t blocks) {
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t b = 0; b < blocks; b++) {
    const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + 8 * b));
    _mm256_storeu_ps(dst + 8 * b, _mm256_cvtph_ps(half));
  }
}

// With F16C: loop(blocks) over the whole groups of eight values, then tail(i) on the rest.
template <class Loop, class Tail>
bool in_f16c_groups(std::ptrdiff_t count, Loop loop, Tail tail) {
  if (!cpu_has_f16c()) return false;
  const std::ptrdiff_t blocks = count / 8;
  loop(blocks);
  for (std::ptrdiff_t i = 8 * blocks; i < count; i++) tail(i);
  return true;
}

bool round_to_fp16_f16c(float* dst, const float* src, std::ptrdiff_t count) {
  return in_f16c_groups(
      count, [&](std::ptrdiff_t blocks) { round_to_fp16_f16c_loop(dst, src, blocks); },
      [&](std::ptrdiff_t i) { dst[i] = round_to_fp16(src[i]); });
}

bool encode_fp16_f16c(uint16_t* bits, const float* src, std::ptrdiff_t count) {
  return in_f16c_groups(
      count, [&](std::ptrdiff_t blocks) { encode_fp16_f16c_loop(bits, src, blocks); },
      [&](std::ptrdiff_t i) { bits[i] = encode_fp16(src[i]); });
}

bool decode_fp16_f16c(float* dst, const uint16_t* bits, std::ptrdiff_t count) {
  return in_f16c_groups(
      count, [&](std::ptrdiff_t blocks) { decode_fp16_f16c_loop(dst, bits, blocks); },
      [&](std::ptrdiff_t i) { dst[i] = decode_fp16(bits[i]); });
}
#else
bool round_to_fp16_f16c(float*, const float*, std::ptrdiff_t) { return false; }
bool encode_fp16_f16c(uint16_t*, const float*, std::ptrdiff_t) { return false; }
bool decode_fp16_f16c(float*, const uint16_t*, std::ptrdiff_t) { return false; }
#endif

// Below this many floats (1 MiB) a single memset beats waking the thread team.
constexpr std::size_t kParallelZeroMin = std::size_t{1} << 18;
constexpr std::size_t kLineFloats = 16;  // a 64-byte cache line: chunk edges fall on line edges
}  // namespace

// One memset per thread over contiguous, line-aligned chunks: zeroing the 124M-float gradient
// arena every step is bound by memory bandwidth, and one core alone reaches about half of it.
void fill_zero(float* x, std::size_t n) {
  if (n == 0) return;
  if (n < kParallelZeroMin) {
    std::memset(x, 0, n * sizeof(float));
    return;
  }
#pragma omp parallel
  {
    const auto threads = static_cast<std::size_t>(omp_get_num_threads());
    const auto thread = static_cast<std::size_t>(omp_get_thread_num());
    const std::size_t chunk = (n / threads + kLineFloats - 1) / kLineFloats * kLineFloats;
    const std::size_t begin = std::min(n, thread * chunk);
    const std::size_t end = thread + 1 == threads ? n : std::min(n, begin + chunk);
    if (end > begin) std::memset(x + begin, 0, (end - begin) * sizeof(float));
  }
}

TRIDENT_SIMD_CLONES
void add(float* out, const float* a, const float* b, std::size_t n) {
  const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < count; i++) out[i] = a[i] + b[i];
}

TRIDENT_SIMD_CLONES
void accumulate(float* dst, const float* src, std::size_t n) {
  const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < count; i++) dst[i] += src[i];
}

TRIDENT_SIMD_CLONES
void scale(float* x, float factor, std::size_t n) {
  const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < count; i++) x[i] *= factor;
}

namespace {

// sum_squares' parts: a fixed number, whatever the thread count, each summed by one thread and
// added in order, so that the gradient norm has the same bits with 1 thread or 16 (an OpenMP
// reduction adds one partial sum per thread).
constexpr int kSumParts = 64;

TRIDENT_SIMD_CLONES
double sum_squares_part(const float* x, std::ptrdiff_t count) {
  double total = 0.0;
#pragma omp simd reduction(+ : total)
  for (std::ptrdiff_t i = 0; i < count; i++) {
    const double xi = static_cast<double>(x[i]);
    total += xi * xi;
  }
  return total;
}

}  // namespace

double sum_squares(const float* x, std::size_t n) {
  const auto count = static_cast<std::ptrdiff_t>(n);
  double parts[kSumParts];
#pragma omp parallel for schedule(static)
  for (int p = 0; p < kSumParts; p++) {
    const std::ptrdiff_t begin = count * p / kSumParts, end = count * (p + 1) / kSumParts;
    parts[p] = sum_squares_part(x + begin, end - begin);
  }
  double total = 0.0;
  for (const double part : parts) total += part;
  return total;
}

void round_to_precision(float* dst, const float* src, std::size_t n, Precision precision) {
  const auto count = static_cast<std::ptrdiff_t>(n);
  switch (precision) {
    case Precision::kFp32:
      if (dst != src) std::memcpy(dst, src, n * sizeof(float));
      return;
    case Precision::kBf16:
#pragma omp parallel for simd schedule(static)
      for (std::ptrdiff_t i = 0; i < count; i++) dst[i] = round_to_bf16(src[i]);
      return;
    case Precision::kFp16:
      if (round_to_fp16_f16c(dst, src, count)) return;
#pragma omp parallel for schedule(static)
      for (std::ptrdiff_t i = 0; i < count; i++) dst[i] = round_to_fp16(src[i]);
      return;
  }
}

TRIDENT_SIMD_CLONES
void encode_16bit(uint16_t* bits, const float* src, std::size_t n, Precision precision) {
  const auto count = static_cast<std::ptrdiff_t>(n);
  if (precision == Precision::kFp16) {
    if (encode_fp16_f16c(bits, src, count)) return;
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t i = 0; i < count; i++) bits[i] = encode_fp16(src[i]);
  } else {
#pragma omp parallel for simd schedule(static)
    for (std::ptrdiff_t i = 0; i < count; i++) bits[i] = encode_bf16(src[i]);
  }
}

TRIDENT_SIMD_CLONES
void decode_16bit(float* dst, const uint16_t* bits, std::size_t n, Precision precision) {
  const auto count = static_cast<std::ptrdiff_t>(n);
  if (precision == Precision::kFp16) {
    if (decode_fp16_f16c(dst, bits, count)) return;
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t i = 0; i < count; i++) dst[i] = decode_fp16(bits[i]);
  } else {
#pragma omp parallel for simd schedule(static)
    for (std::ptrdiff_t i = 0; i < count; i++) dst[i] = decode_bf16(bits[i]);
  }
}

}  // namespace trident::kernels::cpu
