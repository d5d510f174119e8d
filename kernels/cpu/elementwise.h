// Elementwise helpers on the CPU: zeroing, residual add, gradient accumulation, scaling,
// squared norm, rounding to a storage precision.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/precision.h"

namespace trident::kernels::cpu {

void fill_zero(float* x, std::size_t n);                               // x = 0
void add(float* out, const float* a, const float* b, std::size_t n);  // out = a + b
void accumulate(float* dst, const float* src, std::size_t n);         // dst += src
void scale(float* x, float factor, std::size_t n);                    // x *= factor
double sum_squares(const float* x, std::size_t n);                    // sum x^2, in double
// dst = src rounded to the precision's storage (dst may alias src)
void round_to_precision(float* dst, const float* src, std::size_t n, Precision precision);
// 16-bit activation storage (precision kBf16 or kFp16): bits[i] = the pattern of src[i] rounded,
// and dst[i] = the value of bits[i] (kernels/precision.h's encode_16bit / decode_16bit).
void encode_16bit(uint16_t* bits, const float* src, std::size_t n, Precision precision);
void decode_16bit(float* dst, const uint16_t* bits, std::size_t n, Precision precision);

}  // namespace trident::kernels::cpu
