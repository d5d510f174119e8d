// The CUDA emulation's own promises (CTest emulated.emulation): the deferred stream schedule that
// lets the GPU tests and emulated.training see a missing event between streams; the reverse
// thread order (TRIDENT_CUDA_EMULATION_THREAD_ORDER, for runs by hand) that shows a race inside
// a block; the TF32 rounding that lets them see a GEMM input that is not exact in TF32; the NCCL
// emulation's report of a send buffer overwritten before its stream reached the call; the stops of
// UndefinedBehaviorSanitizer where x86 and a GPU give different answers; and the guards between
// slices of a block's dynamic shared memory; the host model of the tensor-core instructions
// (kernels/cuda/warp_mma.cuh) with the loading recipes the flash kernels use; the model of cp.async
// (kernels/cuda/async_copy.cuh), whose copies land at the wait and not before; and the fused
// multiply-adds of the translated kernels, as nvcc's. If the emulation ran
// everything at once, or read fp32 inputs whole in TF32 mode, the other emulated tests would
// pass on code that can fail on a GPU; these tests fail instead.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <nccl.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cuda/shared_slices.h"
#include "tests/emulation/cuda_emulation.h"
#include "tests/emulation/multiply_add_probe.h"
// After the prelude, as in a translated kernel source.
#include "kernels/cuda/async_copy.cuh"    // async_copy::copy, wait_all
#include "kernels/cuda/warpgroup_mma.cuh" // wgmma::multiply_shared, fence, commit, wait
#include "tests/support/warp_products.h"       // warp_products, expected_warp_product
#include "tests/support/warpgroup_products.h"  // warpgroup_products, warpgroup_product_mismatches

namespace {

// Device memory for n ints, zeroed.
int* device_ints(std::size_t n) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, n * sizeof(int)), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(p, 0, n * sizeof(int), nullptr), cudaSuccess);
  return static_cast<int*>(p);
}

// One int read back through the legacy default stream (which waits for the blocking streams).
int read_back(const int* device) {
  int value = -1;
  EXPECT_EQ(cudaMemcpy(&value, device, sizeof value, cudaMemcpyDeviceToHost), cudaSuccess);
  return value;
}

class Streams : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaStreamCreate(&blocking_), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    EXPECT_EQ(cudaStreamDestroy(blocking_), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(side_), cudaSuccess);
  }
  cudaStream_t blocking_ = nullptr;
  cudaStream_t side_ = nullptr;
};

// A copy on one stream that reads what another stream writes sees the write only after waiting
// for an event recorded behind it; without the wait it reads the old value, as a GPU may.
TEST_F(Streams, WorkOnAnotherStreamSeesAWriteOnlyThroughAnEvent) {
  int* source = device_ints(1);
  int* copy = device_ints(1);
  ASSERT_EQ(cudaMemsetAsync(source, 0x01, sizeof(int), blocking_), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(copy, source, sizeof(int), cudaMemcpyDeviceToDevice, side_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(side_), cudaSuccess);
  EXPECT_EQ(read_back(copy), 0) << "the side stream ran after the write it never waited for";

  cudaEvent_t written;
  ASSERT_EQ(cudaEventCreateWithFlags(&written, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(source, 0x02, sizeof(int), blocking_), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(written, blocking_), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(side_, written, 0), cudaSuccess);
  ASSERT_EQ(cudaEventDestroy(written), cudaSuccess);  // a queued wait outlives its event
  ASSERT_EQ(cudaMemcpyAsync(copy, source, sizeof(int), cudaMemcpyDeviceToDevice, side_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(side_), cudaSuccess);
  EXPECT_EQ(read_back(copy), 0x02020202);
  EXPECT_EQ(cudaFree(source), cudaSuccess);
  EXPECT_EQ(cudaFree(copy), cudaSuccess);
}

// The legacy default stream (cudaMemcpy) waits for blocking streams, not for non-blocking ones.
TEST_F(Streams, TheLegacyStreamDoesNotWaitForANonBlockingStream) {
  int* on_blocking = device_ints(1);
  int* on_side = device_ints(1);
  ASSERT_EQ(cudaMemsetAsync(on_blocking, 0x03, sizeof(int), blocking_), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(on_side, 0x04, sizeof(int), side_), cudaSuccess);
  EXPECT_EQ(read_back(on_blocking), 0x03030303);
  EXPECT_EQ(read_back(on_side), 0);
  ASSERT_EQ(cudaStreamSynchronize(side_), cudaSuccess);
  EXPECT_EQ(read_back(on_side), 0x04040404);
  EXPECT_EQ(cudaFree(on_blocking), cudaSuccess);
  EXPECT_EQ(cudaFree(on_side), cudaSuccess);
}

// cudaEventQuery answers "not ready" without running the work (and leaves that as the last
// error, as the runtime does); a loop that keeps polling ends.
TEST_F(Streams, EventQueryDoesNotRunWorkButAPollingLoopEnds) {
  int* target = device_ints(1);
  cudaEvent_t done;
  ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(target, 0x05, sizeof(int), side_), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(done, side_), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(done), cudaErrorNotReady);
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotReady);
  EXPECT_EQ(read_back(target), 0);
  int polls = 1;
  while (cudaEventQuery(done) == cudaErrorNotReady) ++polls;
  (void)cudaGetLastError();
  EXPECT_GT(polls, 1);
  EXPECT_LE(polls, 1000);
  EXPECT_EQ(read_back(target), 0x05050505);
  EXPECT_EQ(cudaEventDestroy(done), cudaSuccess);
  EXPECT_EQ(cudaFree(target), cudaSuccess);
}

// cudaEventElapsedTime (the playground's timer) waits for both events, as on a GPU, and says 0
// ms: the emulation keeps no device clock.
TEST_F(Streams, EventElapsedTimeWaitsForItsEventsAndSaysZero) {
  int* target = device_ints(1);
  cudaEvent_t start, end;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&end), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(start, side_), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(target, 0x06, sizeof(int), side_), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(end, side_), cudaSuccess);
  EXPECT_EQ(read_back(target), 0) << "the non-blocking stream ran before anything waited for it";
  float ms = -1.0f;
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  EXPECT_EQ(ms, 0.0f);
  EXPECT_EQ(read_back(target), 0x06060606);
  EXPECT_EQ(cudaEventDestroy(start), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(end), cudaSuccess);
  EXPECT_EQ(cudaFree(target), cudaSuccess);
}

// cudaFree waits for the device: work queued on any stream has run once it returns.
TEST_F(Streams, FreeRunsQueuedWork) {
  int* target = device_ints(1);
  int* other = device_ints(1);
  ASSERT_EQ(cudaMemsetAsync(target, 0x06, sizeof(int), side_), cudaSuccess);
  EXPECT_EQ(read_back(target), 0);
  ASSERT_EQ(cudaFree(other), cudaSuccess);
  EXPECT_EQ(read_back(target), 0x06060606);
  EXPECT_EQ(cudaFree(target), cudaSuccess);
}

// A host source is staged at the call (pageable memory): changing it afterwards changes nothing.
TEST_F(Streams, HostToDeviceCopiesStageTheirSource) {
  int* target = device_ints(1);
  int host = 7;
  ASSERT_EQ(cudaMemcpyAsync(target, &host, sizeof host, cudaMemcpyHostToDevice, side_), cudaSuccess);
  host = 8;
  ASSERT_EQ(cudaStreamSynchronize(side_), cudaSuccess);
  EXPECT_EQ(read_back(target), 7);
  EXPECT_EQ(cudaFree(target), cudaSuccess);
}

void store_value(int* out, int value) { *out = value; }

// Kernel arguments are copied at the launch; the grid runs when its stream is run.
TEST_F(Streams, KernelArgumentsAreCopiedAtTheLaunch) {
  int* target = device_ints(1);
  int value = 9;
  cuda_emu::launch("store_value", cuda_emu::LaunchConfig(dim3(1), dim3(1), 0, side_),
                   [](auto&... a) { store_value(a...); }, target, value);
  value = 10;
  EXPECT_EQ(read_back(target), 0);
  ASSERT_EQ(cudaStreamSynchronize(side_), cudaSuccess);
  EXPECT_EQ(read_back(target), 9);
  EXPECT_EQ(cudaFree(target), cudaSuccess);
}

// A race: thread 0 publishes a value in shared memory and the others read it with no barrier
// between. Run forward, thread 0 happens to write first and every thread reads the value; run
// in reverse (TRIDENT_CUDA_EMULATION_THREAD_ORDER), the other threads read first and the race
// shows, as it can on a GPU.
void racy_broadcast(int* out, int value) {
  __shared__ int published;
  if (threadIdx.x == 0) published = value;
  out[threadIdx.x] = published;  // a __syncthreads() belongs before this read
}

std::vector<int> run_racy_broadcast(const char* order, int value) {
  constexpr int kThreads = 4;
  setenv("TRIDENT_CUDA_EMULATION_THREAD_ORDER", order, 1);
  int* out = device_ints(kThreads);
  cuda_emu::launch("racy_broadcast", cuda_emu::LaunchConfig(dim3(1), dim3(kThreads)),
                   [](auto&... a) { racy_broadcast(a...); }, out, value);
  std::vector<int> host(kThreads, -1);
  EXPECT_EQ(cudaMemcpy(host.data(), out, kThreads * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaFree(out), cudaSuccess);
  unsetenv("TRIDENT_CUDA_EMULATION_THREAD_ORDER");
  return host;
}

TEST(ThreadOrder, ReverseOrderShowsARaceTheForwardOrderHides) {
  EXPECT_EQ(run_racy_broadcast("forward", 11), std::vector<int>(4, 11));
  const std::vector<int> reversed = run_racy_broadcast("reverse", 12);
  EXPECT_EQ(reversed[0], 12);
  EXPECT_NE(reversed[3], 12) << "the last thread read before thread 0 wrote";
}

// A warp may return at once while the block's other warps shuffle among themselves (a
// warp-per-row kernel's warps past the last row do); only a lane of the shuffling warp itself
// returning first is a fault. Two warps: `idle_warp` returns, the other sums its lane numbers by
// a butterfly and every lane writes the sum; `early_lane` of the busy warp, when not -1, returns
// before the shuffle.
void warp_sum_beside_an_idle_warp(int* out, int idle_warp, int early_lane) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (warp == idle_warp || lane == early_lane) return;
  int sum = lane;
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  out[threadIdx.x] = sum;
}

std::vector<int> run_warp_sum(const char* order, int idle_warp, int early_lane) {
  setenv("TRIDENT_CUDA_EMULATION_THREAD_ORDER", order, 1);
  int* out = device_ints(64);
  const std::vector<int> unwritten(64, -1);
  EXPECT_EQ(cudaMemcpy(out, unwritten.data(), 64 * sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
  cuda_emu::launch("warp_sum_beside_an_idle_warp", cuda_emu::LaunchConfig(dim3(1), dim3(64)),
                   [](auto&... a) { warp_sum_beside_an_idle_warp(a...); }, out, idle_warp, early_lane);
  std::vector<int> host(64, 0);
  EXPECT_EQ(cudaMemcpy(host.data(), out, host.size() * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaFree(out), cudaSuccess);
  unsetenv("TRIDENT_CUDA_EMULATION_THREAD_ORDER");
  return host;
}

TEST(WarpShuffles, AWarpThatReturnsAtOnceLeavesTheOtherWarpShuffling) {
  // Each order runs the idle warp first in one of the two cases (the warp it starts from).
  for (const char* order : {"forward", "reverse"}) {
    for (const int idle : {0, 1}) {
      SCOPED_TRACE(std::string(order) + ", idle warp " + std::to_string(idle));
      const std::vector<int> out = run_warp_sum(order, idle, -1);
      for (int t = 0; t < 64; ++t) EXPECT_EQ(out[static_cast<std::size_t>(t)], t / 32 == idle ? -1 : 496) << t;
    }
  }
}

// Reported as the lane returning while the others wait, or as a shuffle after it returned,
// whichever the run order meets first.
TEST(WarpShuffles, AShuffleAfterALaneOfItsWarpReturnedIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process, not a fork of an MPI one
  const char* fault =
      "warp shuffle after another lane of the warp has returned|returned while other lanes of its warp wait";
  for (const char* order : {"forward", "reverse"}) {
    EXPECT_DEATH(run_warp_sum(order, 0, 31), fault);
    EXPECT_DEATH(run_warp_sum(order, 1, 0), fault);
  }
}

// What x86 forgives and a GPU does not: UndefinedBehaviorSanitizer, built with the address
// sanitizer (CMakeLists.txt, trident_emulation_ubsan), stops the run at the kernel's line.
// Without it each of these kernels gives its CPU answer here and another one on a GPU, and a
// twin test could pass on the emulation while failing on the device.
#if defined(TRIDENT_EMULATION_UBSAN)
// x86 takes a shift count modulo 32, so bit 37 reads bit 5; a GPU's shift by 32 or more gives 0.
void bit_of(int* out, unsigned word, int bit) { out[0] = static_cast<int>((word >> bit) & 1u); }
// x86 converts an out-of-range float to INT_MIN; a GPU saturates to INT_MAX.
void to_int(int* out, float x) { out[0] = static_cast<int>(x); }
// An index past a row of a 2-D array lands in the next row, inside the allocation, where the
// address sanitizer cannot see it.
void past_a_row(int* out, int column) {
  int rows[2][4] = {};
  rows[0][column] = 1;
  out[0] = rows[1][0];
}

template <class Kernel, class... A>
void run_one_thread(const char* name, Kernel kernel, A... args) {
  int* out = device_ints(1);
  cuda_emu::launch(name, cuda_emu::LaunchConfig(dim3(1), dim3(1)), kernel, out, args...);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaFree(out), cudaSuccess);
}

TEST(UndefinedBehaviour, StopsTheRunWhereAGpuWouldGiveAnotherAnswer) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process, not a fork of an MPI one
  run_one_thread("bit_of", [](auto&... a) { bit_of(a...); }, 0x20u, 5);  // in range: runs
  EXPECT_DEATH(run_one_thread("bit_of", [](auto&... a) { bit_of(a...); }, 0x20u, 37),
               "shift exponent 37 is too large for 32-bit type");
  EXPECT_DEATH(run_one_thread("to_int", [](auto&... a) { to_int(a...); }, 3e9f),
               "is outside the range of representable values of type 'int'");
  EXPECT_DEATH(run_one_thread("past_a_row", [](auto&... a) { past_a_row(a...); }, 4),
               "index 4 out of bounds for type 'int \\[4\\]'");
}
#endif

// The address sanitizer's promise (CMakeLists.txt): device memory and a block's shared memory are
// heap allocations of their exact size, so a kernel's access past a cudaMalloc'd buffer, past its
// block's dynamic shared memory or past a static __shared__ variable stops the run at that access.
// The scheduler (emulated_grid.cpp) is built without the sanitizer, for speed; these hold that the
// memory it hands out is still the sanitizer's (its allocator is the process's) and the kernels'
// accesses still checked, where the kernels are compiled.
#if defined(__SANITIZE_ADDRESS__)
enum class Memory { kDevice, kDynamicShared, kStaticShared };

// Writes cell `index` of four ints in `memory`.
void write_cell(int* out, Memory memory, int index) {
  static const int key = 0;  // the identity of a static __shared__ int[4], as translated kernels pass it
  int* cells = out;
  if (memory == Memory::kDynamicShared) cells = static_cast<int*>(cuda_emu::dynamic_shared_memory());
  if (memory == Memory::kStaticShared) cells = static_cast<int*>(cuda_emu::static_shared_memory(&key, 4 * sizeof(int)));
  cells[index] = 1;
}

void run_write_cell(Memory memory, int index) {
  int* out = device_ints(4);
  cuda_emu::launch("write_cell", cuda_emu::LaunchConfig(dim3(1), dim3(1), 4 * sizeof(int)),
                   [](auto&... a) { write_cell(a...); }, out, memory, index);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaFree(out), cudaSuccess);
}

TEST(AddressSanitizer, AKernelWritingPastItsMemoryIsStoppedThere) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process, not a fork of an MPI one
  for (const Memory memory : {Memory::kDevice, Memory::kDynamicShared, Memory::kStaticShared}) {
    SCOPED_TRACE(static_cast<int>(memory));
    run_write_cell(memory, 3);  // the last cell is the kernel's own
    EXPECT_DEATH(run_write_cell(memory, 4), "heap-buffer-overflow.*WRITE.*in write_cell");
  }
}
#endif

// An index past the end of one slice of a block's dynamic shared memory lands in the next slice,
// inside the allocation; a poisoned guard between them (kernels/cuda/shared_slices.h, on under
// AddressSanitizer) stops the run at the access instead of letting it overwrite a neighbour.
#if TRIDENT_SHARED_SLICE_GUARDS
// Two slices of 4 floats; writes first[index] and reads second[0] back.
void write_past_a_slice(int* out, int index) {
  trident::kernels::cuda::SharedSlices slices(static_cast<float*>(cuda_emu::dynamic_shared_memory()));
  float* first = slices.take(4);
  float* second = slices.take(4);
  second[0] = 2.0f;
  first[index] = 1.0f;
  out[0] = static_cast<int>(second[0]);
}

int run_write_past_a_slice(int index) {
  int* out = device_ints(1);
  const std::size_t bytes = 2 * trident::kernels::cuda::shared_slice_bytes(4);
  cuda_emu::launch("write_past_a_slice", cuda_emu::LaunchConfig(dim3(1), dim3(1), bytes),
                   [](auto&... a) { write_past_a_slice(a...); }, out, index);
  const int value = read_back(out);
  EXPECT_EQ(cudaFree(out), cudaSuccess);
  return value;
}

TEST(SharedSlices, AGuardStopsAnIndexThatRunsIntoTheNextSlice) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process, not a fork of an MPI one
  EXPECT_EQ(trident::kernels::cuda::shared_slice_bytes(4), 16 + trident::kernels::cuda::kSharedSliceGuardBytes);
  EXPECT_EQ(run_write_past_a_slice(3), 2) << "the last float of the first slice is its own";
  // Packed back to back (as on a GPU), first[4] would be second[0] and the read would give 1.
  EXPECT_DEATH(run_write_past_a_slice(4), "use-after-poison");
}
#endif

// One warp of tensor-core products (tests/support/warp_products.h) in the emulation.
template <class S>
void warp_products_kernel(const uint16_t* operands, float* c) {
  trident::test_support::warp_products<S>(static_cast<uint16_t*>(cuda_emu::dynamic_shared_memory()), operands, c,
                                          static_cast<int>(threadIdx.x));
}

template <class S>
std::vector<float> run_warp_products() {
  return trident::test_support::warp_products_on_device<S>([](const uint16_t* operands, float* c) {
    cuda_emu::launch("warp_products",
                     cuda_emu::LaunchConfig(dim3(1), dim3(32),
                                            trident::test_support::kWarpProductElements * sizeof(uint16_t)),
                     [](auto&... args) { warp_products_kernel<S>(args...); }, operands, c);
  });
}

// The host model gives each lane the accumulator elements the PTX layout names (rows g and g + 8,
// columns 2t and 2t + 1), and the loading recipes give the right operands: the comparison is
// exact. (That the model matches the hardware, tests/gpu/warp_mma_test.cu shows on a GPU.)
TEST(WarpMatrixProducts, TheHostModelComputesTheProductsItsLayoutsName) {
  using trident::test_support::warp_product_mismatches;
  namespace stored = trident::kernels::stored;
  for (const auto& line : warp_product_mismatches(run_warp_products<stored::Bf16>())) ADD_FAILURE() << "bf16: " << line;
  for (const auto& line : warp_product_mismatches(run_warp_products<stored::Fp16>())) ADD_FAILURE() << "fp16: " << line;
}

// One warpgroup of wgmma products (tests/support/warpgroup_products.h) in the emulation.
template <class S>
void warpgroup_products_kernel(const uint16_t* operands, float* c) {
  trident::test_support::warpgroup_products<S>(static_cast<uint16_t*>(cuda_emu::dynamic_shared_memory()), operands,
                                               c, static_cast<int>(threadIdx.x));
}

template <class S>
std::vector<float> run_warpgroup_products() {
  using namespace trident::test_support;
  return warpgroup_products_on_device<S>([](const uint16_t* operands, float* c) {
    cuda_emu::launch("warpgroup_products",
                     cuda_emu::LaunchConfig(dim3(1), dim3(kWarpgroupProductThreads),
                                            kWarpgroupSharedElements * sizeof(uint16_t)),
                     [](auto&... args) { warpgroup_products_kernel<S>(args...); }, operands, c);
  });
}

// The host model of wgmma reads its operands through the descriptors and the 128-byte swizzle as
// warpgroup_mma.cuh reads the PTX ISA, and gives each warp its 16 rows: the comparison is exact.
// The block's shared memory starts 16 bytes past a 1024-byte boundary of the emulation's shared
// window, so the tiles are where align_tiles put them, not where the allocation happened to be.
// (That the model matches the hardware, tests/gpu/warpgroup_mma_test.cu shows on a GPU.)
TEST(WarpgroupMatrixProducts, TheHostModelComputesTheProductsItsLayoutsName) {
  using trident::test_support::warpgroup_product_mismatches;
  namespace stored = trident::kernels::stored;
  for (const auto* name : {"bf16", "fp16"}) {
    const std::vector<float> got = std::string(name) == "bf16" ? run_warpgroup_products<stored::Bf16>()
                                                               : run_warpgroup_products<stored::Fp16>();
    ASSERT_EQ(got.back(), 1.0f);
    for (const auto& line : warpgroup_product_mismatches(got)) ADD_FAILURE() << name << ": " << line;
  }
}

// wgmma's asynchrony in the model (tests/emulation/emulated_warpgroup.h): one warpgroup issues
// d1 = A B^T over k in [0, 16) and commits, then d2 over k in [16, 32) and commits, and reads its
// first accumulator of each before its waits, after wait<1> and after wait<0> (out[4 t + 0..3]).
// A(r, k) = (r + k) % 5 and B(n, k) = (n + 2 k) % 3 are exact in bf16. `misuse` breaks one rule.
enum class WgmmaMisuse { kNone, kNoFence, kNoCommit, kWriteShared, kWriteAccumulator, kNoWait };
constexpr int kWgmmaThreads = 128;
constexpr std::size_t kWgmmaSharedBytes = 2 * 4096 * sizeof(uint16_t) + 1024;
float wgmma_a(int r, int k) { return static_cast<float>((r + k) % 5); }
float wgmma_b(int n, int k) { return static_cast<float>((n + 2 * k) % 3); }

void warpgroup_waits(float* out, WgmmaMisuse misuse) {
  namespace wg = trident::kernels::cuda::wgmma;
  using S = trident::kernels::stored::Bf16;
  using wg::Major;
  uint16_t* const tiles = wg::align_tiles(static_cast<uint16_t*>(cuda_emu::dynamic_shared_memory()));
  const int t = static_cast<int>(threadIdx.x);
  for (int i = t; i < 4096; i += kWgmmaThreads) {
    tiles[wg::swizzled_offset(i / 64, i % 64)] = S::store(wgmma_a(i / 64, i % 64));
    tiles[4096 + wg::swizzled_offset(i / 64, i % 64)] = S::store(wgmma_b(i / 64, i % 64));
  }
  wg::fence_shared_for_async();
  __syncthreads();
  float d1[8][4];
  float d2[8][4];
  if (misuse != WgmmaMisuse::kNoFence) wg::fence();
  wg::multiply_shared<S, Major::kK, Major::kK>(d1, wg::descriptor<Major::kK>(tiles, 0),
                                               wg::descriptor<Major::kK>(tiles + 4096, 0), false);
  wg::commit();
  wg::multiply_shared<S, Major::kK, Major::kK>(d2, wg::descriptor<Major::kK>(tiles, 1),
                                               wg::descriptor<Major::kK>(tiles + 4096, 1), false);
  if (misuse == WgmmaMisuse::kNoCommit) {
    wg::wait<0>();
    return;
  }
  wg::commit();
  out[4 * t] = d1[0][0];
  if (misuse == WgmmaMisuse::kWriteShared && t == 0) tiles[4096] = S::store(7.0f);  // B(0, 0), which d1 reads
  if (misuse == WgmmaMisuse::kWriteAccumulator) d1[0][0] = 0.0f;
  if (misuse == WgmmaMisuse::kNoWait) return;
  wg::wait<1>();
  out[4 * t + 1] = d1[0][0];
  out[4 * t + 2] = d2[0][0];
  wg::wait<0>();
  out[4 * t + 3] = d2[0][0];
}

std::vector<float> run_warpgroup_waits(WgmmaMisuse misuse) {
  float* out = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&out), 4 * kWgmmaThreads * sizeof(float)), cudaSuccess);
  cuda_emu::launch("warpgroup_waits", cuda_emu::LaunchConfig(dim3(1), dim3(kWgmmaThreads), kWgmmaSharedBytes),
                   [](auto&... a) { warpgroup_waits(a...); }, out, misuse);
  std::vector<float> host(4 * kWgmmaThreads);
  EXPECT_EQ(cudaMemcpy(host.data(), out, host.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaFree(out), cudaSuccess);
  return host;
}

// A product's accumulators hold a NaN from its issue to the wait that covers its group, then its
// value; wait<1> finishes every group but the newest. So a kernel that reads them early, or
// waits for too few groups, computes NaNs here, whatever the GPU's timing would have let pass.
TEST(WarpgroupMatrixProducts, AccumulatorsHoldTheirValueOnlyAfterTheWaitForTheirGroup) {
  const std::vector<float> out = run_warpgroup_waits(WgmmaMisuse::kNone);
  for (int t = 0; t < kWgmmaThreads; ++t) {
    const int row = 16 * (t / 32) + t % 32 / 4, col = 2 * (t % 4);
    float first = 0.0f, second = 0.0f;
    for (int k = 0; k < 16; ++k) {
      first += wgmma_a(row, k) * wgmma_b(col, k);
      second += wgmma_a(row, 16 + k) * wgmma_b(col, 16 + k);
    }
    const float* got = out.data() + 4 * t;
    EXPECT_TRUE(std::isnan(got[0])) << "thread " << t << ": d1 before any wait holds " << got[0];
    EXPECT_EQ(got[1], first) << "thread " << t << ": d1 after wait<1>";
    EXPECT_TRUE(std::isnan(got[2])) << "thread " << t << ": d2 after wait<1> (its group is the newest) holds "
                                    << got[2];
    EXPECT_EQ(got[3], second) << "thread " << t << ": d2 after wait<0>";
  }
}

TEST(WarpgroupMatrixProducts, BrokenRulesAreReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process, not a fork of an MPI one
  EXPECT_DEATH(run_warpgroup_waits(WgmmaMisuse::kNoFence),
               "kernel warpgroup_waits.*issued a wgmma product with no wgmma::fence since its last "
               "wgmma::wait");
  EXPECT_DEATH(run_warpgroup_waits(WgmmaMisuse::kNoCommit),
               "kernel warpgroup_waits.*waited \\(wgmma::wait\\) with wgmma products issued since its last "
               "wgmma::commit");
  EXPECT_DEATH(run_warpgroup_waits(WgmmaMisuse::kWriteShared),
               "kernel warpgroup_waits.*thread \\(0,0,0\\): wrote shared memory \\(window address [0-9]+\\) "
               "that a wgmma product reads, between the product's issue and its wgmma::wait");
  EXPECT_DEATH(run_warpgroup_waits(WgmmaMisuse::kWriteAccumulator),
               "kernel warpgroup_waits.*wrote a wgmma product's accumulators between its issue and its wgmma::wait");
  EXPECT_DEATH(run_warpgroup_waits(WgmmaMisuse::kNoWait),
               "kernel warpgroup_waits.*returned with wgmma products it never waited for");
}

// cp.async's model: each of 32 threads copies 4 ints into the block's shared memory (the odd
// threads zero-fill), reads its destination before its wait, then, after the wait and a barrier,
// the last int of the next thread's copy. Without `wait` it returns with its copy in flight.
constexpr int kCopyThreads = 32;
void async_copies(int* out, const int* source, bool wait) {
  namespace async_copy = trident::kernels::cuda::async_copy;
  int* shared = static_cast<int*>(cuda_emu::dynamic_shared_memory());
  const int t = static_cast<int>(threadIdx.x);
  async_copy::copy<16>(shared + 4 * t, source + 4 * t, t % 2 == 0);
  out[t] = shared[4 * t];
  if (!wait) return;
  async_copy::wait_all();
  __syncthreads();
  out[kCopyThreads + t] = shared[4 * ((t + 1) % kCopyThreads) + 3];
}

std::vector<int> run_async_copies(bool wait) {
  std::vector<int> source(4 * kCopyThreads);
  for (std::size_t i = 0; i < source.size(); ++i) source[i] = 100 + static_cast<int>(i);
  int* d_source = device_ints(source.size());
  EXPECT_EQ(cudaMemcpy(d_source, source.data(), source.size() * sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
  int* out = device_ints(2 * kCopyThreads);
  cuda_emu::launch("async_copies", cuda_emu::LaunchConfig(dim3(1), dim3(kCopyThreads), source.size() * sizeof(int)),
                   [](auto&... a) { async_copies(a...); }, out, static_cast<const int*>(d_source), wait);
  std::vector<int> host(2 * kCopyThreads, 0);
  EXPECT_EQ(cudaMemcpy(host.data(), out, host.size() * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaFree(out), cudaSuccess);
  EXPECT_EQ(cudaFree(d_source), cudaSuccess);
  return host;
}

// A read before the wait sees 0xff bytes (NaN to a float kernel), never the data: the model does
// not let a missing wait pass. After the wait and a barrier every thread sees every copy.
TEST(AsyncCopies, LandAtTheWaitAndNotBefore) {
  const std::vector<int> out = run_async_copies(/*wait=*/true);
  for (int t = 0; t < kCopyThreads; ++t) {
    EXPECT_EQ(out[static_cast<std::size_t>(t)], -1) << "thread " << t << " read its copy before waiting";
    const int next = (t + 1) % kCopyThreads;
    EXPECT_EQ(out[static_cast<std::size_t>(kCopyThreads + t)], next % 2 == 0 ? 100 + 4 * next + 3 : 0)
        << "thread " << t << " reading thread " << next << "'s copy";
  }
}

TEST(AsyncCopies, AThreadThatNeverWaitsIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process, not a fork of an MPI one
  EXPECT_DEATH(run_async_copies(/*wait=*/false),
               "kernel async_copies.*returned with cp.async copies it never waited for");
}

// A 1x1x1 product a * 1 in fp32 and in TF32 mode, queued on the handle's stream.
float product_with_one(float a, cublasMath_t math, cudaStream_t stream) {
  cublasHandle_t handle;
  EXPECT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSetStream(handle, stream), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSetMathMode(handle, math), CUBLAS_STATUS_SUCCESS);
  float* d = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 3 * sizeof(float)), cudaSuccess);
  const float host[3] = {a, 1.0f, -1.0f};
  EXPECT_EQ(cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice), cudaSuccess);
  const float one = 1.0f, zero = 0.0f;
  EXPECT_EQ(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, d, 1, d + 1, 1, &zero, d + 2, 1),
            CUBLAS_STATUS_SUCCESS);
  float out = 0.0f;
  EXPECT_EQ(cudaMemcpyAsync(&out, d + 2, sizeof out, cudaMemcpyDeviceToHost, stream), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
  return out;
}

TEST_F(Streams, Tf32ModeRoundsFp32InputsToTenSignificandBits) {
  const float below_half_ulp = 1.0f + std::ldexp(1.0f, -12);       // a TF32 ulp at 1 is 2^-10
  const float above_half_ulp = 1.0f + 3.0f * std::ldexp(1.0f, -12);
  EXPECT_EQ(product_with_one(below_half_ulp, CUBLAS_DEFAULT_MATH, side_), below_half_ulp);
  EXPECT_EQ(product_with_one(below_half_ulp, CUBLAS_TF32_TENSOR_OP_MATH, side_), 1.0f);
  EXPECT_EQ(product_with_one(above_half_ulp, CUBLAS_TF32_TENSOR_OP_MATH, side_), 1.0f + std::ldexp(1.0f, -10));
  const float exact = 1.0f + std::ldexp(1.0f, -10);
  EXPECT_EQ(product_with_one(exact, CUBLAS_TF32_TENSOR_OP_MATH, side_), exact);
}

// nvcc contracts a * b + c into one fused multiply-add (--fmad=true), and the emulated kernels
// do too where this CPU has FMA (tests/emulation/CMakeLists.txt): tolerances and bit-exact
// promises are then tested against the GPU's rounding. (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 rounds
// to 1 + 2^-11 as a float (a tie, to even), so minus 1 + 2^-11 it leaves 0 unfused and 2^-24
// fused. Fails where a build of the emulation loses the contraction (GCC at -O1 does, or
// -ffp-contract=off), and where a CPU without FMA would fuse anyway.
TEST(FusedMultiplyAdds, EmulatedKernelsRoundAMultiplyAddAsNvccDoes) {
  const float a = 1.0f + std::ldexp(1.0f, -12);
  const float host[3] = {a, a, -(1.0f + std::ldexp(1.0f, -11))};
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 4 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice), cudaSuccess);
  multiply_add_on_device(d + 3, d, d + 1, d + 2, 1);
  float out = -1.0f;
  ASSERT_EQ(cudaMemcpy(&out, d + 3, sizeof out, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
#if defined(TRIDENT_EMULATION_HOST_HAS_FMA)
  EXPECT_EQ(out, std::ldexp(1.0f, -24)) << "the emulated kernel did not fuse a * b + c";
#else
  EXPECT_EQ(out, 0.0f) << "no FMA on this CPU, yet the emulated kernel fused a * b + c";
#endif
}

// The NCCL emulation over MPI (emulated_nccl.cpp) on one rank (the test main initialises MPI).
class OneRankNccl : public Streams {
 protected:
  void SetUp() override {
    Streams::SetUp();
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    ASSERT_EQ(ncclCommInitRank(&comm_, 1, id, 0), ncclSuccess);
    send_ = device_ints(kCount);
    recv_ = device_ints(kCount);
    ASSERT_EQ(cudaMemsetAsync(send_, 0x01, kCount * sizeof(int), nullptr), cudaSuccess);
  }
  void TearDown() override {
    EXPECT_EQ(cudaFree(send_), cudaSuccess);
    EXPECT_EQ(cudaFree(recv_), cudaSuccess);
    EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
    Streams::TearDown();
  }
  // A sum over the one rank on the side stream (the NCCL stream), then the blocking stream (the
  // compute stream) overwriting its send buffer, after the sum's event or not.
  void all_reduce_then_overwrite(bool wait_for_the_sum) {
    // As floats (the emulation sums the types Trident sends); one rank's sum copies the bits.
    ASSERT_EQ(ncclAllReduce(send_, recv_, kCount, ncclFloat32, ncclSum, comm_, side_), ncclSuccess);
    if (wait_for_the_sum) {
      cudaEvent_t sent;
      ASSERT_EQ(cudaEventCreateWithFlags(&sent, cudaEventDisableTiming), cudaSuccess);
      ASSERT_EQ(cudaEventRecord(sent, side_), cudaSuccess);
      ASSERT_EQ(cudaStreamWaitEvent(blocking_, sent, 0), cudaSuccess);
      ASSERT_EQ(cudaEventDestroy(sent), cudaSuccess);
    }
    ASSERT_EQ(cudaMemsetAsync(send_, 0x02, kCount * sizeof(int), blocking_), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(side_), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(blocking_), cudaSuccess);
  }
  static constexpr std::size_t kCount = 4;
  ncclComm_t comm_ = nullptr;
  int* send_ = nullptr;
  int* recv_ = nullptr;
};

// Ordered by an event, the overwrite runs after the sum has read the buffer: the sum is of the
// old values. (The check before the read lets the compute stream run up to that wait and no
// further; had it run past, this would be reported as the race below.)
TEST_F(OneRankNccl, AnOverwriteAfterTheCallsEventIsAllowed) {
  all_reduce_then_overwrite(/*wait_for_the_sum=*/true);
  EXPECT_EQ(read_back(recv_), 0x01010101);
  EXPECT_EQ(read_back(send_), 0x02020202);
}

// Not ordered, the GPU may run the overwrite before NCCL reads the buffer: the emulation stops,
// naming the call, although the host made the call first.
TEST_F(OneRankNccl, AnOverwriteNotOrderedAfterTheCallIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process, not a fork of an MPI one
  EXPECT_DEATH(all_reduce_then_overwrite(/*wait_for_the_sum=*/false),
               "ncclAllReduce's send buffer .* was written by work on another stream that is not "
               "ordered with the call");
}

}  // namespace
