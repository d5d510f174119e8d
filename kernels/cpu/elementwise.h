// Elementwise helpers on the CPU: zeroing, residual add, gradient accumulation, scaling,
// squared norm, rounding to a storage precision.
#pragma once

#include <cstddef>

#include "kernels/precision.h"

namespace trident::kernels::cpu {

void fill_zero(float* x, std::size_t n);                               // x = 0
void add(float* out, const float* a, const float* b, std::size_t n);  // out = a + b
void accumulate(float* dst, const float* src, std::size_t n);         // dst += src
void scale(float* x, float factor, std::size_t n);                    // x *= factor
double sum_squares(const float* x, std::size_t n);                    // sum x^2, in double
// dst = src rounded to the precision's storage (dst may alias src)
void round_to_precision(float* dst, const float* src, std::size_t n, Precision precision);

}  // namespace trident::kernels::cpu
