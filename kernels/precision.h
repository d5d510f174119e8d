// Storage precision of activations and compute weights (train.precision): fp32, bf16, fp16.
//
// Mixed precision keeps the master weights, the optimizer moments and the gradients in fp32 and
// stores what the kernels exchange (activations, their gradients, the compute copy of the
// weights) in 16 bits. Every kernel computes in fp32; the narrowing happens when a result is
// stored, with IEEE round-to-nearest-even, as __float2bfloat16_rn / __float2half_rn do on the GPU.
// The functions here are that narrowing, kept in a float (the value is exactly representable in
// the 16-bit format afterwards), so that the CPU twin can reproduce 16-bit storage bit for bit.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace trident::kernels {

enum class Precision { kFp32, kBf16, kFp16 };

inline const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
    case Precision::kFp32: break;
  }
  return "fp32";
}

// The deck's spelling (fp32 | bf16 | fp16); throws std::invalid_argument on anything else (the
// deck schema has already rejected it with a user error).
Precision parse_precision(const std::string& name);

// Bytes one element takes in this precision's storage.
inline std::size_t precision_bytes(Precision p) { return p == Precision::kFp32 ? 4 : 2; }

namespace detail {
inline uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
}  // namespace detail

// x rounded to the nearest bfloat16 (8 bits of significand), ties to even. NaN stays a (quiet)
// NaN; values beyond the largest bf16 round to infinity like any other float overflow.
inline float round_to_bf16(float x) {
  const uint32_t u = detail::bits_of(x);
  // Adding 0x7fff plus the lowest kept bit and truncating is round-to-nearest-even on the 16 bits
  // dropped; a carry into the exponent is the correct rounding up (to infinity at the top).
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  // NaN by a select, not an early return, so that the bulk loops over it vectorise.
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  return detail::float_of(nan ? u | 0x00400000u : rounded);
}

// x rounded to the nearest IEEE binary16 (11 bits of significand, exponent -14..15, subnormals
// down to 2^-24), ties to even. |x| >= 65520 (halfway past the largest half, 65504) becomes
// infinity: an fp16 overflow, which the loss scaler looks for.
inline float round_to_fp16(float x) {
  const uint32_t u = detail::bits_of(x);
  const uint32_t sign = u & 0x80000000u;
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) return magnitude > 0x7f800000u ? detail::float_of(u | 0x00400000u) : x;
  if (magnitude >= 0x477ff000u) return detail::float_of(sign | 0x7f800000u);  // >= 65520: overflow
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  // Bits of the float significand dropped: 13 for normal halves, more below 2^-14 (subnormals,
  // whose spacing stays 2^-24). Below 2^-25 everything rounds to zero (or to 2^-24 past half).
  const int dropped = exponent >= -14 ? 13 : 13 + (-14 - exponent);
  if (dropped > 24) return detail::float_of(sign);  // |x| < 2^-25: rounds to (signed) zero
  if (exponent >= -14) {
    uint32_t r = magnitude + (0xfffu + ((magnitude >> 13) & 1u));
    return detail::float_of(sign | (r & ~0x1fffu));
  }
  // Subnormal half: round the full significand (implicit bit included) to a multiple of
  // 2^(dropped), then rebuild the float from it.
  const uint32_t significand = (magnitude & 0x007fffffu) | 0x00800000u;
  const uint32_t half = 1u << (dropped - 1);
  const uint32_t lowest_kept = (significand >> dropped) & 1u;
  const uint32_t units = (significand + half - 1u + lowest_kept) >> dropped;  // multiples of 2^-24
  return detail::float_of(sign | detail::bits_of(static_cast<float>(units) * 5.9604644775390625e-8f));
}

inline float round_to_precision(float x, Precision p) {
  switch (p) {
    case Precision::kBf16: return round_to_bf16(x);
    case Precision::kFp16: return round_to_fp16(x);
    case Precision::kFp32: break;
  }
  return x;
}

// --- 16-bit encodings (what gradients travel as under parallel.grad_reduce) ---------------------
// The bit pattern of x rounded to bf16 or fp16 (round-to-nearest-even, as round_to_precision),
// and its exact value back. decode_16bit(encode_16bit(x, p), p) == round_to_precision(x, p) for
// every float, NaNs staying NaNs. p must be kBf16 or kFp16.
inline uint16_t encode_bf16(float x) { return static_cast<uint16_t>(detail::bits_of(round_to_bf16(x)) >> 16); }
inline float decode_bf16(uint16_t bits) { return detail::float_of(static_cast<uint32_t>(bits) << 16); }

inline uint16_t encode_fp16(float x) {
  const uint32_t u = detail::bits_of(round_to_fp16(x));  // now exactly a half (or inf / NaN / 0)
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u : 0u));
  if (magnitude < 0x38800000u) {  // below 2^-14: a subnormal half, a whole number of 2^-24 units
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(detail::float_of(magnitude) * 16777216.0f));
  }
  // Normal: rebias the exponent (127 -> 15) and keep the top 10 significand bits (the rest are 0).
  return static_cast<uint16_t>(sign | ((magnitude - 0x38000000u) >> 13));
}
inline float decode_fp16(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t significand = bits & 0x3ffu;
  if (exponent == 0x1f) return detail::float_of(sign | 0x7f800000u | (significand << 13));
  if (exponent == 0) return detail::float_of(sign | detail::bits_of(static_cast<float>(significand) * 5.9604644775390625e-8f));
  return detail::float_of(sign | ((exponent + 112u) << 23) | (significand << 13));
}

inline uint16_t encode_16bit(float x, Precision p) { return p == Precision::kFp16 ? encode_fp16(x) : encode_bf16(x); }
inline float decode_16bit(uint16_t bits, Precision p) { return p == Precision::kFp16 ? decode_fp16(bits) : decode_bf16(bits); }

}  // namespace trident::kernels
