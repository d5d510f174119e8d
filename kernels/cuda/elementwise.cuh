// Elementwise kernels on the device: add, accumulate, scale, and the double-precision sum of
// squares behind the global gradient norm. Launchers queue on `stream`.
#pragma once

#include <cuda_runtime.h>  // cudaStream_t

#include <cstddef>

#include "kernels/act_ptr.h"  // ActPtr, ConstActPtr
#include "kernels/element_range.h"
#include "kernels/precision.h"

namespace trident::kernels::cuda {

// out = a + b (out may alias a or b); all fp32, or all 16-bit of one format (rounded once).
void add(ActPtr out, ConstActPtr a, ConstActPtr b, std::size_t n, cudaStream_t stream);
// dst += src
void accumulate(float* dst, const float* src, std::size_t n, cudaStream_t stream);
// x *= factor
void scale(float* x, float factor, std::size_t n, cudaStream_t stream);
// dst = src rounded to the precision's storage with the device's own conversions
// (__float2bfloat16_rn, __float2half_rn); dst may alias src.
void round_to_precision(float* dst, const float* src, std::size_t n, Precision precision, cudaStream_t stream);

// Partial sums sum_squares needs on the device: kSumSquaresBlocks + 1 doubles. At most 1024
// blocks of 256 threads: 8 resident a SM on 132 SMs (H100), each thread with two 16-byte loads in
// flight; fewer for a short range (sum_squares_blocks).
inline constexpr int kSumSquaresBlocks = 1024;
inline constexpr std::size_t kSumSquaresScratch = kSumSquaresBlocks + 1;

// The blocks sum_squares launches for n floats: one per 2048 (a pass of two 16-byte loads a
// thread), from 1 to kSumSquaresBlocks. A function of n alone, so each length has one order of
// additions; from 2048 x 1024 floats on, all of them.
constexpr int sum_squares_blocks(std::size_t n) {
  const std::size_t wanted = (n + 2047) / 2048;
  return wanted < 1 ? 1 : wanted > kSumSquaresBlocks ? kSumSquaresBlocks : static_cast<int>(wanted);
}

// sum_i x[i]^2 accumulated in double. scratch: kSumSquaresScratch doubles of device memory.
// Waits for the stream (the result is needed on the host).
double sum_squares(const float* x, std::size_t n, double* scratch, cudaStream_t stream);

// The sums of squares of `count` ranges of base, each reduced as sum_squares reduces it into
// totals[i] (device memory, count doubles; scratch as above), then copied back at once and
// added in order from 0 on the host: sum_squares' bits per range, one wait for the stream.
// host_totals: count doubles of host memory.
double sum_squares_of_ranges(const float* base, const ElementRange* ranges, std::size_t count, double* scratch,
                             double* totals, double* host_totals, cudaStream_t stream);

}  // namespace trident::kernels::cuda
