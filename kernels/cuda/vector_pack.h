// 16 bytes of elements moved as one: 4 fp32 or 8 16-bit values per load or store, for the
// row-wise kernels that read a row with a warp or a block (cross_entropy_math.h,
// layernorm.cu). A 128-bit access on the device, a copy on the host, so that host replays and
// the CUDA emulation run the same functions.
//
// A pack needs its address 16-byte aligned: a row of a buffer is when the buffer starts aligned
// (cudaMalloc's and the workspace's are) and the row length is a whole number of packs. Callers
// check with starts_aligned and fall back to one value per access otherwise.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_runtime.h>  // uint4
#define TRIDENT_PACK_HD __host__ __device__ __forceinline__
#else
#define TRIDENT_PACK_HD inline
#endif

namespace trident::kernels::cuda {

inline constexpr int kVectorBytes = 16;

template <class E>
struct Pack {
  static constexpr int kCount = kVectorBytes / static_cast<int>(sizeof(E));
  E values[kCount];
};

template <class E>
TRIDENT_PACK_HD Pack<E> load_pack(const E* src) {
  Pack<E> pack;
#ifdef __CUDA_ARCH__
  const uint4 raw = *reinterpret_cast<const uint4*>(src);
  memcpy(&pack, &raw, sizeof pack);
#else
  std::memcpy(&pack, src, sizeof pack);
#endif
  return pack;
}

template <class E>
TRIDENT_PACK_HD void store_pack(E* dst, const Pack<E>& pack) {
#ifdef __CUDA_ARCH__
  uint4 raw;
  memcpy(&raw, &pack, sizeof raw);
  *reinterpret_cast<uint4*>(dst) = raw;
#else
  std::memcpy(dst, &pack, sizeof pack);
#endif
}

TRIDENT_PACK_HD bool starts_aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % kVectorBytes == 0;
}

}  // namespace trident::kernels::cuda
