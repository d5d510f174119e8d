// Blocks adding into one buffer in a fixed order, without atomics on the values: each adder
// waits for its turn on a counter, adds, and passes the turn on. So the sum comes out with the
// same bits on every run, which atomicAdd on floats would not give (its order is whatever order
// the blocks reach it in). Used by the flash attention backward's dQ in the key walk
// (kernels/cuda/flash_dq_sums.cuh, FlashDq::kInKeyWalk; the mma.sync and wgmma backwards).
//
// Why waiting cannot deadlock: a block may only wait for blocks that started before it. A block
// takes its place in the order from a ticket counter when it starts (take_ticket), not from
// blockIdx, whose blocks the GPU may start in any order; every block holding a smaller ticket
// is then already running or done, and it waits only for blocks with smaller tickets still (CUB's
// decoupled look-back scan finds its predecessors the same way). A wait that never ends (a bug in
// the order) stops the kernel (a trap on the GPU, a message on the emulation) instead of hanging.
//
// The memory protocol, per warp: the adding lanes store with .cg (to L2: L1 is not coherent
// between SMs), fence, __syncwarp, then lane 0 publishes the next turn with a release store;
// the next adder's lane 0 waits with acquire loads, __syncwarp, and its lanes read with .cg.
//
// Where this runs: on the GPU, the PTX. In the CUDA emulation (tests/emulation), std::atomic_ref
// with the same acquire and release (which the race checker sees), the loads and stores plain.
#pragma once

#if defined(__CUDACC__) && !defined(TRIDENT_CUDA_EMULATION)
#define TRIDENT_TURNS_DEVICE __device__ __forceinline__
#else
#define TRIDENT_TURNS_DEVICE inline
#endif

#if defined(TRIDENT_CUDA_EMULATION)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#endif

namespace trident::kernels::cuda::turns {

// A wait this long means a wrong order, not a slow predecessor (normally one tile, a few
// microseconds, ahead): on a GPU 2^28 polls of at least 64 ns each (17 s and more), in the
// emulation 60 s (its blocks are a million times slower; the race checker's run one at a time,
// so a predecessor has always finished there).
constexpr unsigned kMaxPolls = 1u << 28;
constexpr int kEmulatedWaitSeconds = 60;

// The next ticket of `counter` (zero before the launch): one thread of the block takes it.
TRIDENT_TURNS_DEVICE unsigned take_ticket(unsigned* counter) {
#if defined(__CUDA_ARCH__)
  return atomicAdd(counter, 1u);
#elif defined(TRIDENT_CUDA_EMULATION)
  return std::atomic_ref<unsigned>(*counter).fetch_add(1u, std::memory_order_acq_rel);
#else  // nvcc's host pass: device code only
  (void)counter;
  return 0;
#endif
}

// Until *turn == value (one lane polls; the warp then passes __syncwarp).
TRIDENT_TURNS_DEVICE void wait_for_turn(const unsigned* turn, unsigned value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  for (unsigned polls = 0;; ++polls) {
    unsigned now;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(turn) : "memory");
    if (now == value) return;
    if (polls == kMaxPolls) __trap();
    __nanosleep(64);
  }
#elif defined(__CUDA_ARCH__)  // before sm_70 (no acquire loads): volatile polls, then a fence
  for (unsigned polls = 0; *static_cast<const volatile unsigned*>(turn) != value; ++polls) {
    if (polls == kMaxPolls) __trap();
  }
  __threadfence();
#elif defined(TRIDENT_CUDA_EMULATION)
  std::atomic_ref<unsigned> at(*const_cast<unsigned*>(turn));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kEmulatedWaitSeconds);
  while (at.load(std::memory_order_acquire) != value) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "ordered turns: waited %d s for turn %u, the counter stays at %u\n", kEmulatedWaitSeconds,
                   value, at.load(std::memory_order_acquire));
      std::abort();
    }
    std::this_thread::yield();
  }
#else
  (void)turn, (void)value;
#endif
}

// Sets *turn = value after this lane's earlier stores (the other lanes fenced theirs and passed
// __syncwarp first).
TRIDENT_TURNS_DEVICE void pass_turn(unsigned* turn, unsigned value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(turn), "r"(value) : "memory");
#elif defined(__CUDA_ARCH__)
  __threadfence();
  *static_cast<volatile unsigned*>(turn) = value;
#elif defined(TRIDENT_CUDA_EMULATION)
  std::atomic_ref<unsigned>(*turn).store(value, std::memory_order_release);
#else
  (void)turn, (void)value;
#endif
}

// Each adding lane's stores visible GPU-wide before the turn passes (nothing in the emulation:
// the release store and the warp barrier order them there).
TRIDENT_TURNS_DEVICE void fence_stores() {
#if defined(__CUDA_ARCH__)
  __threadfence();
#endif
}

// Two adjacent floats of the shared sums (8-byte aligned), through L2.
TRIDENT_TURNS_DEVICE void load_pair(const float* at, float& x, float& y) {
#if defined(__CUDA_ARCH__)
  const float2 v = __ldcg(reinterpret_cast<const float2*>(at));
  x = v.x;
  y = v.y;
#else
  x = at[0];
  y = at[1];
#endif
}
TRIDENT_TURNS_DEVICE void store_pair(float* at, float x, float y) {
#if defined(__CUDA_ARCH__)
  __stcg(reinterpret_cast<float2*>(at), make_float2(x, y));
#else
  at[0] = x;
  at[1] = y;
#endif
}

}  // namespace trident::kernels::cuda::turns
