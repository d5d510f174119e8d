// Vectorisable math helpers for the CPU kernels.
//
// exp_approx: a branch-free float exponential that OpenMP `simd` loops vectorise at the
// baseline ISA (glibc's expf/tanhf are scalar calls at -O2 without -ffast-math, ~5-30 ns each,
// which made GELU and the softmaxes cost as much as the matmuls around them).
//
// Cephes expf: n = round(x log2 e) with the 1.5*2^23 trick, r = x - n ln2 in two parts
// (exact to float), exp(r) by a degree-7 polynomial on |r| <= ln2/2, times 2^n built in the
// exponent bits. Accuracy: within 2 ulp of exp(x) on [-87.3, 88.3]; other numbers are clamped to
// that range, so the result is finite and normal (~1.2e-38 below, ~2.4e38 above), which is
// what a softmax (arguments <= 0) and the GELU sigmoid need. A NaN gives a NaN, as expf does
// (the clamp alone took a NaN for one end of the range, and a NaN logit then gave a finite
// loss on the CPU twin where the GPU's expf gave NaN). The clamp works on the bit patterns
// with integer masks: under GCC's default -ftrapping-math a float compare-and-select (or a
// select GCC can thread into a branch) stops the loop from being vectorised.
#pragma once

#include <bit>
#include <cstdint>

namespace trident::kernels::cpu {

inline float exp_approx(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  constexpr float kLn2Hi = 0.693359375f;      // ln 2 = kLn2Hi + kLn2Lo, kLn2Hi exact in 9 bits
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr std::uint32_t kLowBits = std::bit_cast<std::uint32_t>(-87.3f);
  constexpr std::uint32_t kHighBits = std::bit_cast<std::uint32_t>(88.3f);
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  // A NaN's magnitude bits are above +inf's; its mask sets the quiet-NaN bits of the result.
  const std::uint32_t is_nan = 0u - static_cast<std::uint32_t>((bits & 0x7FFFFFFFu) > 0x7F800000u);
  // Below -87.3 (or -inf): the sign bit is set and the magnitude bits are larger, so the
  // unsigned pattern is larger. Above 88.3 (or +inf): sign clear and larger as a signed int.
  const std::uint32_t too_low = 0u - static_cast<std::uint32_t>(bits > kLowBits);
  const std::uint32_t too_high =
      0u - static_cast<std::uint32_t>(static_cast<std::int32_t>(bits) >
                                      static_cast<std::int32_t>(kHighBits));
  // Masks instead of selects: GCC would turn a select with a constant arm into a branch.
  x = std::bit_cast<float>((bits & ~(too_low | too_high)) | (kLowBits & too_low) |
                           (kHighBits & too_high));
  const float shifted = x * kLog2e + kRoundMagic;
  const float n = shifted - kRoundMagic;
  const std::int32_t ni = std::bit_cast<std::int32_t>(shifted) - 0x4B400000;  // n as an integer
  float r = x - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>((ni + 127) << 23);  // 2^n, n in [-126, 127]
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(p * scale) | (is_nan & 0x7FC00000u));
}

// max_of: max of x[0..n), n >= 1. Sixteen independent running maxima: a single one is a serial
// chain of compare-selects (4 cycles each), and GCC does not vectorise a plain float max
// reduction under its default -ftrapping-math. The `simd` lane loop becomes packed maxps: one
// AVX-512 register, two AVX2 or four SSE2 ones, whichever the caller is compiled for
// (TRIDENT_SIMD_CLONES). A NaN is not propagated reliably (only a first one is): the softmaxes
// that call it get theirs from exp_approx(NaN - max) instead.
inline float max_of(const float* x, int n) {
  constexpr int kLanes = 16;
  float lanes[kLanes];
  for (int j = 0; j < kLanes; j++) lanes[j] = x[0];
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)
#pragma omp simd
    for (int j = 0; j < kLanes; j++) lanes[j] = lanes[j] < x[i + j] ? x[i + j] : lanes[j];
  float m = x[0];
  for (int j = 0; j < kLanes; j++) m = m < lanes[j] ? lanes[j] : m;
  for (; i < n; i++) m = m < x[i] ? x[i] : m;
  return m;
}

}  // namespace trident::kernels::cpu
