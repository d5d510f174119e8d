// CUDA emulation on the CPU: the device-side half, force-included (g++ -include) ahead of every
// kernels/cuda source that tests/emulation/translate_launches.cpp has rewritten into C++.
//
// Why: the CUDA backend is built on every machine but runs only where a GPU is lent. This
// emulation runs the same kernel code on the CPU, so the GPU twin tests (tests/gpu) execute
// the kernels' indexing, barriers, shuffles, launch shapes and cuBLAS/cuBLASLt argument lists
// on every CI run, instead of skipping. It proves logic, not speed, and not the GPU's memory
// model (see docs/testing-without-a-gpu.md for what it can and cannot catch).
//
// The model: a launch runs its blocks one after another on each OS thread (OpenMP over blocks)
// and the threads of a block as cooperative fibers (Boost.Context) on that OS thread. __syncthreads
// and the warp shuffles (and the host model of mma.sync and ldmatrix in kernels/cuda/warp_mma.cuh,
// built on the same warp exchange) are barriers between fibers; a block that cannot finish (a barrier some
// thread never reaches, a shuffle from a lane that has exited) stops the program with a message
// naming the kernel. A __shared__ variable becomes the block's own heap allocation
// (block_shared, written by translate_launches), made when a thread of the block first reaches
// its declaration and freed when the block ends; outside translated sources, a thread_local
// static. A launch is queued on its stream and runs when the stream's schedule runs it
// (emulated_streams.cpp).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <tuple>
#include <utility>

namespace cuda_emu {

// Where the running fiber is in the grid; set by the scheduler before it resumes a fiber.
struct Coordinates {
  uint3 thread{};
  uint3 block{};
  dim3 block_dim;
  dim3 grid_dim;
};
// constinit: no dynamic initialisation, so that the kernels read it straight from the thread's
// block, with no call of a TLS wrapper. GCC 12's null check (-fsanitize=null) of that wrapper's
// result once tested stale flags in an emulated wgmma kernel and stopped every run of it with
// "member access within null pointer of type 'struct Coordinates'" (2026-11-24).
extern thread_local constinit Coordinates tl_coordinates;

void sync_block();
// __syncwarp: a barrier of the running thread's warp that also orders memory between its lanes.
void sync_warp(unsigned mask);
// The warp shuffle in two steps: every lane publishes its value and waits for the whole warp,
// then reads another lane's.
void warp_publish(unsigned mask, const void* value, std::size_t bytes);
void warp_read(int source_lane, void* out, std::size_t bytes);
int lane_of_current_thread();
void* dynamic_shared_memory();
// cp.async's model (kernels/cuda/async_copy.cuh): the running thread's copies not yet waited
// for, in the order issued (from == nullptr: zero-fill). take_async_copy hands out the oldest
// and forgets it, false when none is left. A thread that returns with copies left is reported.
struct AsyncCopy {
  void* to = nullptr;
  const void* from = nullptr;
  std::size_t bytes = 0;
};
void record_async_copy(void* to, const void* from, std::size_t bytes);
bool take_async_copy(AsyncCopy* copy);
// wgmma's model (kernels/cuda/warpgroup_mma.cuh; the rules it holds kernels to:
// emulated_warpgroup.h): a product as its issue read it, finished at the wait that covers its
// group. The issue reads the lane's operands (and notes each 16-bit element of shared memory it
// read, its window address and bits, for the wait to read again); `finish` adds the product into
// the 32 accumulator values it is handed, k in order (zeros first where it does not accumulate).
struct WarpgroupProduct {
  float* d = nullptr;  // the lane's 32 accumulators
  bool accumulate = false;
  void (*finish)(const WarpgroupProduct& product, float* values) = nullptr;
  float a[2][16];   // the lane's two rows of A (16 w + g and 8 more), k in order
  float b[16][16];  // its 16 columns of B (8 j + 2 t and 8 j + 2 t + 1 for j in [0, 8)), k in order
  int reads = 0;
  std::uint32_t read_address[2 * 16 + 16 * 16];
  std::uint16_t read_bits[2 * 16 + 16 * 16];
};
void fence_warpgroup_products();
void record_warpgroup_product(const WarpgroupProduct& product);
void commit_warpgroup_products();
void wait_warpgroup_products(int in_flight);
// The shared window, as __cvta_generic_to_shared gives it on the GPU (and wgmma's descriptors
// carry): the address of `p` (in the block's shared memory, else a kernel fault), and back from an
// address to the memory of `bytes` there (a fault unless one allocation holds them all). Each
// allocation has an address range of its own; the layout is emulated_grid.cpp's.
std::uint32_t shared_window_address(const void* p);
void* shared_window_pointer(std::uint32_t address, std::size_t bytes);
// The running block's copy of the __shared__ variable whose declaration `key` stands for:
// `bytes` of 0xff (NaN) the first time a thread of the block asks, the same memory after.
void* static_shared_memory(const void* key, std::size_t bytes);
template <class T>
T& block_shared(const void* key) {
  return *static_cast<T*>(static_shared_memory(key, sizeof(T)));
}

struct LaunchConfig {
  dim3 grid;
  dim3 block;
  std::size_t shared_bytes;
  cudaStream_t stream;
  LaunchConfig(dim3 g, dim3 b, std::size_t s = 0, cudaStream_t st = nullptr)
      : grid(g), block(b), shared_bytes(s), stream(st) {}
};

// Validates the shape as the driver does (sets the last error and returns on a bad one), then
// queues the grid on the config's stream: when the stream runs it, body runs once per thread.
void run_grid(const char* kernel_name, const LaunchConfig& config, std::function<void()> body);

// kernel<<<config>>>(args...) after translation: call(args...) calls the kernel (a generic
// lambda, so that a kernel template deduces its parameters from the arguments as the launch
// did). The arguments are evaluated and copied once, at the launch, as the CUDA runtime does,
// and the queued grid owns that copy.
template <class Call, class... A>
void launch(const char* kernel_name, const LaunchConfig& config, Call call, A&&... args) {
  auto values = std::make_shared<decltype(std::make_tuple(std::forward<A>(args)...))>(std::forward<A>(args)...);
  run_grid(kernel_name, config, [call, values] { std::apply(call, *values); });
}

}  // namespace cuda_emu

#define threadIdx (::cuda_emu::tl_coordinates.thread)
#define blockIdx (::cuda_emu::tl_coordinates.block)
#define blockDim (::cuda_emu::tl_coordinates.block_dim)
#define gridDim (::cuda_emu::tl_coordinates.grid_dim)

#undef __shared__
#define __shared__ static thread_local
#undef __launch_bounds__
#define __launch_bounds__(...)

inline void __syncthreads() { ::cuda_emu::sync_block(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::cuda_emu::sync_warp(mask); }

template <class T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32) {
  ::cuda_emu::warp_publish(mask, &value, sizeof(T));
  const int lane = ::cuda_emu::lane_of_current_thread();
  int source = lane ^ lane_mask;
  if (source / width != lane / width) source = lane;  // outside the lane's segment: its own value
  T result;
  ::cuda_emu::warp_read(source, &result, sizeof(T));
  return result;
}

// The C++ wrappers cuda_runtime.h declares only under nvcc.
template <class T>
cudaError_t cudaFuncSetAttribute(T* kernel, cudaFuncAttribute attribute, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attribute, value);
}
template <class T>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, T* kernel) {
  return ::cudaFuncGetAttributes(attributes, reinterpret_cast<const void*>(kernel));
}

// CUDA's min and max for device code, on the types the kernels use.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }

template <class T>
T __ldg(const T* p) {
  return *p;
}
// A store with the evict-first hint (st.global.cs): the emulation has no cache, so a plain store.
template <class T>
void __stcs(T* p, T value) {
  *p = value;
}

inline float __uint_as_float(unsigned bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
