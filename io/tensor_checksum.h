// Per-tensor checksums that any layout can verify (docs/checkpoint-format.md).
//
// checksum(tensor) = sum over its elements of element_hash(global linear index, value bits),
// modulo 2^64. A sum does not depend on the order of its terms, so ranks hash the pieces they
// own, in any tiling, and add the partial sums (MPI_SUM on uint64 wraps like C): a file
// written by dp x tp x pp ranks is verified by any number of readers. element_hash is a
// bijection of the value bits for a fixed index, so changing any ONE element always changes the
// checksum; other changes go unnoticed with probability about 2^-64.
#pragma once

#include <cstdint>
#include <vector>

#include "io/tensor_boxes.h"

namespace trident::io {

inline uint64_t mix64(uint64_t x) {  // the splitmix64 finaliser: a bijection on 64 bits
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// (index * odd constant) spreads the index over all 64 bits; XOR with the value bits is a
// bijection of the bits for a fixed index, and mix64 keeps it one.
inline uint64_t element_hash(uint64_t global_index, uint32_t value_bits) {
  return mix64((global_index * 0x9e3779b97f4a7c15ULL) ^ value_bits);
}

// The name written beside the checksums, so a reader knows how they were computed.
inline constexpr const char* kChecksumAlgorithm = "sum64-splitmix64-v1";

// The partial checksum of one box of a tensor of `global_shape`, whose values lie in `values`
// in the box's row-major order (box.volume() floats). threads: OpenMP threads to use (0: the
// process's setting).
uint64_t box_checksum(const std::vector<int64_t>& global_shape, const Box& box, const float* values,
                      int threads = 0);

}  // namespace trident::io
