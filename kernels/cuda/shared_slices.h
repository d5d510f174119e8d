// Carving one block's dynamic shared memory into slices, one after another.
//
// Why a helper and not pointer sums: an index that runs off the end of one slice lands in the
// next one, inside the allocation, where no bounds check sees it. On a GPU it silently reads or
// overwrites a neighbour's tile, and when the neighbour is loaded again before anyone reads it
// the results are still right, so a twin test passes. Compiled by a host compiler with
// AddressSanitizer (the CUDA emulation of tests/emulation, or a sanitized host replay), each slice
// is followed by a poisoned guard, so the first access past a slice stops the run at its line.
// Everywhere else the guard is empty and the slices lie back to back, as a hand-written carve
// would place them.
//
// A kernel carves with SharedSlices and asks for the bytes with shared_slice_bytes, once per
// slice, so that the launch and the carve agree in both builds.
#pragma once

#include <cstddef>

#if defined(__CUDACC__)
#define TRIDENT_SLICES_HD __host__ __device__ __forceinline__
#else
#define TRIDENT_SLICES_HD inline
#endif

#if defined(__SANITIZE_ADDRESS__) && !defined(__CUDACC__)
#include <sanitizer/asan_interface.h>
#define TRIDENT_SHARED_SLICE_GUARDS 1
#else
#define TRIDENT_SHARED_SLICE_GUARDS 0
#endif

namespace trident::kernels::cuda {

// Bytes of poisoned guard after each slice (32: an index up to 8 floats past the slice lands in
// it). AddressSanitizer tracks memory in 8-byte granules, and a granule can be addressable at its
// start and poisoned at its end, not the other way round; so a guarded slice is rounded up to a
// whole granule, and every slice and every guard starts on one.
#if TRIDENT_SHARED_SLICE_GUARDS
constexpr std::size_t kSharedSliceGuardBytes = 32;
constexpr std::size_t kSharedSliceGranule = 8;
#else
constexpr std::size_t kSharedSliceGuardBytes = 0;
constexpr std::size_t kSharedSliceGranule = 1;
#endif

// Bytes that a slice of `floats` floats takes, its guard included.
TRIDENT_SLICES_HD constexpr std::size_t shared_slice_bytes(std::size_t floats) {
  return (floats * sizeof(float) + kSharedSliceGranule - 1) / kSharedSliceGranule * kSharedSliceGranule +
         kSharedSliceGuardBytes;
}

// Hands out the slices of `base` in order. Every thread of a block carves the same slices
// (poisoning a guard again is harmless), so no barrier is needed before they are used.
class SharedSlices {
 public:
  TRIDENT_SLICES_HD explicit SharedSlices(float* base) : next_(reinterpret_cast<unsigned char*>(base)) {}

  // The next `floats` floats.
  TRIDENT_SLICES_HD float* take(std::size_t floats) {
    float* slice = reinterpret_cast<float*>(next_);
    next_ += shared_slice_bytes(floats);
#if TRIDENT_SHARED_SLICE_GUARDS
    ASAN_POISON_MEMORY_REGION(next_ - kSharedSliceGuardBytes, kSharedSliceGuardBytes);
#endif
    return slice;
  }

 private:
  unsigned char* next_;
};

}  // namespace trident::kernels::cuda
