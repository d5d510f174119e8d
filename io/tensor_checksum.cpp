#include "io/tensor_checksum.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include <omp.h>

namespace trident::io {

namespace {

// Compiled for AVX-512, AVX2 and baseline x86-64, picked at load time (as kernels/cpu/
// simd_dispatch.h does for the math): with AVX-512DQ the 64-bit multiplies of mix64 vectorise,
// and hashing keeps up with the disk. (Not under ThreadSanitizer, as simd_dispatch.h says why.)
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__) && !defined(__SANITIZE_THREAD__)
#define TRIDENT_HASH_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TRIDENT_HASH_CLONES
#endif

// The hashes of `count` consecutive elements from global linear index `first`.
TRIDENT_HASH_CLONES uint64_t run_sum(const float* values, int64_t first, int64_t count) {
  uint64_t sum = 0;
  for (int64_t k = 0; k < count; ++k) {
    uint32_t bits = 0;
    std::memcpy(&bits, values + k, sizeof bits);
    sum += element_hash(static_cast<uint64_t>(first + k), bits);
  }
  return sum;
}

}  // namespace

uint64_t box_checksum(const std::vector<int64_t>& global_shape, const Box& box, const float* values, int threads) {
  if (threads <= 0) threads = omp_get_max_threads();
  const std::size_t rank = global_shape.size();
  if (rank == 0) return run_sum(values, 0, 1);
  const int64_t volume = box.volume();
  if (volume == 0) return 0;
  const int64_t run = box.count[rank - 1];  // contiguous in both the box and the tensor
  const int64_t runs = volume / run;
  // Strides of the global tensor, for the outer dimensions.
  std::vector<int64_t> stride(rank, 1);
  for (std::size_t d = rank - 1; d-- > 0;) stride[d] = stride[d + 1] * global_shape[d + 1];
  const auto first_of_run = [&](int64_t r) {
    int64_t linear = box.start[rank - 1];
    for (std::size_t d = rank - 1; d-- > 0;) {
      linear += (box.start[d] + r % box.count[d]) * stride[d];
      r /= box.count[d];
    }
    return linear;
  };
  uint64_t sum = 0;
  if (runs >= 16) {
#pragma omp parallel for reduction(+ : sum) schedule(static) num_threads(threads)
    for (int64_t r = 0; r < runs; ++r) sum += run_sum(values + r * run, first_of_run(r), run);
  } else {
    constexpr int64_t kChunk = 1 << 16;
    for (int64_t r = 0; r < runs; ++r) {
      const int64_t first = first_of_run(r);
      const int64_t chunks = (run + kChunk - 1) / kChunk;
#pragma omp parallel for reduction(+ : sum) schedule(static) num_threads(threads)
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t begin = c * kChunk, count = std::min(kChunk, run - begin);
        sum += run_sum(values + r * run + begin, first + begin, count);
      }
    }
  }
  return sum;
}

}  // namespace trident::io
