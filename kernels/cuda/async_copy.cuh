// Copies from global to shared memory that do not pass through registers (cp.async, sm_80 and
// later): a thread issues them and goes on computing, and they land by the time it waits. A
// block can so fetch its next tile into a second buffer while its warps work on the current
// one (kernels/cuda/flash_mma_tiles.cuh), instead of stalling on each load before a barrier.
//
// The contract, as PTX's: what a thread copies is in shared memory for that thread after its
// wait_all(), and for the block's other threads after a __syncthreads that follows the wait.
// Rows past the end of a buffer are zero-filled (`valid` false: nothing is read from `from`,
// which must still be an address inside the buffer).
//
// Where this runs: on the GPU, the PTX (on a GPU before sm_80, a plain copy: nothing waits). In
// the CUDA emulation (tests/emulation), a model that makes the contract's breaches show: at the
// issue the destination is filled with 0xff bytes (a NaN in every 16-bit and fp32 format), and
// the copy happens at the issuing thread's wait, so a thread that reads before the wait and the
// barrier reads NaN; a copy never waited for stops the program at the thread's return. The
// copies' reads and writes are the kernel's own to the race checker (they are made here, in the
// kernel's translation unit), so one issued while another thread still reads the buffer is
// reported as a race.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__) && !defined(TRIDENT_CUDA_EMULATION)
#define TRIDENT_ASYNC_COPY_DEVICE __device__ __forceinline__
#else
#define TRIDENT_ASYNC_COPY_DEVICE inline
#endif

namespace trident::kernels::cuda::async_copy {

#if defined(TRIDENT_CUDA_EMULATION)
namespace emulated {

inline void issue(void* to, const void* from, std::size_t bytes, bool valid) {
  std::memset(to, 0xff, bytes);
  ::cuda_emu::record_async_copy(to, valid ? from : nullptr, bytes);
}

}  // namespace emulated
#endif

// kBytes (16, or 4: one float) from global `from` to shared `to`, both aligned to kBytes.
template <int kBytes>
TRIDENT_ASYNC_COPY_DEVICE void copy(void* to, const void* from, bool valid) {
  static_assert(kBytes == 16 || kBytes == 4, "cp.async copies 4, 8 or 16 bytes; the kernels use 16 and 4");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(to));
  if constexpr (kBytes == 16) {  // .cg: cached in L2, not L1 (the blocks that reuse a tile run on other SMs)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(from), "r"(valid ? 16 : 0)
                 : "memory");
  } else {  // .cg takes 16 bytes only
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(address), "l"(from), "r"(valid ? 4 : 0)
                 : "memory");
  }
#elif defined(__CUDA_ARCH__)
  if (valid) {
    memcpy(to, from, kBytes);
  } else {
    memset(to, 0, kBytes);
  }
#elif defined(TRIDENT_CUDA_EMULATION)
  if (reinterpret_cast<std::uintptr_t>(to) % kBytes != 0 || reinterpret_cast<std::uintptr_t>(from) % kBytes != 0) {
    __builtin_trap();  // the GPU faults on it
  }
  emulated::issue(to, from, kBytes, valid);
#else
  (void)to, (void)from, (void)valid;  // nvcc's host pass: device code, never called on the host
#endif
}

// Waits until every copy this thread has issued has landed (cp.async.wait_all).
TRIDENT_ASYNC_COPY_DEVICE void wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#elif defined(TRIDENT_CUDA_EMULATION)
  ::cuda_emu::AsyncCopy copy;
  while (::cuda_emu::take_async_copy(&copy)) {
    if (copy.from != nullptr) {
      std::memcpy(copy.to, copy.from, copy.bytes);
    } else {
      std::memset(copy.to, 0, copy.bytes);
    }
  }
#endif
}

}  // namespace trident::kernels::cuda::async_copy
