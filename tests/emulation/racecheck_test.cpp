// The race checker's own promises (CTest emulated.racecheck, label racecheck; built only with
// TRIDENT_CUDA_EMULATION_SANITIZER=thread, emulated_racecheck.h): threads of a block that touch
// one word with no __syncthreads between are reported, whichever order the emulation ran them
// in, and a barrier between them is enough; threads of different blocks touching one word are
// reported too; so is a cp.async copy (kernels/cuda/async_copy.cuh) issued into a buffer that
// another thread still reads. __syncwarp orders memory between a warp's lanes, and blocks taking
// turns (kernels/cuda/ordered_turns.cuh) order their writes of one word; without the turns they
// are reported. A report ends a death test's child at once
// (halt_on_error) with ThreadSanitizer's exit code; a false report in a clean kernel makes this
// whole program exit 66, which fails the test too.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "tests/emulation/cuda_emulation.h"
// After the prelude, as in a translated kernel source.
#include "kernels/cuda/async_copy.cuh"     // async_copy::copy, wait_all
#include "kernels/cuda/ordered_turns.cuh"  // turns::take_ticket, wait_for_turn, pass_turn

namespace {

constexpr int kThreads = 64;
constexpr int kBlocks = 3;
constexpr int kRaceExitCode = 66;  // ThreadSanitizer's, after a report

// A __shared__ variable as translate_launches writes it for the kernels: each block its own.
// (This file is not translated, and __shared__ alone would be one static for all blocks.)
#define BLOCK_SHARED(type, name)   \
  static char name##_key = 0;      \
  auto& name = ::cuda_emu::block_shared<type>(&name##_key)

int* device_ints(std::size_t n) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, n * sizeof(int)), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(p, 0, n * sizeof(int), nullptr), cudaSuccess);
  return static_cast<int*>(p);
}

std::vector<int> read_all(const int* device, std::size_t n) {
  std::vector<int> host(n, -1);
  EXPECT_EQ(cudaMemcpy(host.data(), device, n * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

// Thread 0 publishes a value in shared memory that every thread then reads.
void broadcast(int* out, int value, bool barrier) {
  BLOCK_SHARED(int, published);
  if (threadIdx.x == 0) published = value + static_cast<int>(blockIdx.x);
  if (barrier) __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = published;
}

// Every thread writes the same shared word: the same result in any order, still a race.
void last_writer(int* out) {
  BLOCK_SHARED(int, last);
  last = static_cast<int>(threadIdx.x);
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = last;
}

// Lane 0 writes shared memory, then the warp shuffles; lane 1 reads what lane 0 wrote.
void through_a_shuffle(int* out) {
  BLOCK_SHARED(int, word);
  if (threadIdx.x == 0) word = 7;
  const int partner = __shfl_xor_sync(0xffffffffu, static_cast<int>(threadIdx.x), 1);
  if (threadIdx.x == 1) out[0] = word + partner;
}

// The same through __syncwarp, which does order memory.
void through_a_syncwarp(int* out) {
  BLOCK_SHARED(int, word);
  if (threadIdx.x == 0) word = 7;
  __syncwarp();
  if (threadIdx.x == 1) out[0] = word;
}

// One warp a block: the blocks add their ticket + 1 into the same 32 words, in ticket order when
// they take turns (counters[0]: the tickets, counters[1]: the turn), as the flash backward's dQ
// sums do; without turns, each block's lanes write words that the previous block's wrote.
void add_in_turn(int* sums, unsigned* counters, bool take_turns) {
  namespace turns = trident::kernels::cuda::turns;
  BLOCK_SHARED(unsigned, ticket);
  const auto lane = static_cast<int>(threadIdx.x);
  if (lane == 0) ticket = turns::take_ticket(&counters[0]);
  __syncthreads();
  if (take_turns && ticket > 0) {
    if (lane == 0) turns::wait_for_turn(&counters[1], ticket);
    __syncwarp();
  }
  sums[lane] = (ticket == 0 ? 0 : sums[lane]) + static_cast<int>(ticket) + 1;
  if (take_turns) {
    turns::fence_stores();
    __syncwarp();
    if (lane == 0) turns::pass_turn(&counters[1], ticket + 1);
  }
}

// Thread 0 fills a shared tile by cp.async and every thread reads it; then thread 0 refills it.
// Without the barrier between the reads and the refill, the refill's copy (which writes from
// its issue on) races with the slower threads' reads.
struct alignas(16) FourInts {
  int v[4];
};
void refill(int* out, const int* source, bool barrier) {
  namespace async_copy = trident::kernels::cuda::async_copy;
  BLOCK_SHARED(FourInts, tile);
  const auto t = static_cast<int>(threadIdx.x);
  if (t == 0) {
    async_copy::copy<16>(tile.v, source, true);
    async_copy::wait_all();
  }
  __syncthreads();
  out[t] = tile.v[t % 4];
  if (barrier) __syncthreads();
  if (t == 0) {
    async_copy::copy<16>(tile.v, source + 4, true);
    async_copy::wait_all();
  }
  __syncthreads();
  out[kThreads + t] = tile.v[t % 4];
}

// Every block writes the same kThreads outputs: the index forgets blockIdx.
void forgets_its_block(int* out) { out[threadIdx.x] = static_cast<int>(blockIdx.x); }

// Launches a kernel and waits for it (in a death test, a race report ends the child first).
template <class Kernel, class... A>
void run(const char* name, unsigned blocks, unsigned threads, Kernel kernel, A... args) {
  cuda_emu::launch(name, cuda_emu::LaunchConfig(dim3(blocks), dim3(threads)), kernel, args...);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

void run_broadcast(int* out, bool barrier) {
  run("broadcast", kBlocks, kThreads, [](auto&... a) { broadcast(a...); }, out, 5, barrier);
}

// Every race test expects this end.
#define EXPECT_RACE_REPORTED(statement) \
  EXPECT_EXIT(statement, ::testing::ExitedWithCode(kRaceExitCode), "ThreadSanitizer: data race")

class RaceCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    // Each death test's child is the program started afresh (not a fork), with this
    // environment: it stops at its first report.
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    setenv("TSAN_OPTIONS", "halt_on_error=1", 1);
    out_ = device_ints(kBlocks * kThreads);
  }
  void TearDown() override { EXPECT_EQ(cudaFree(out_), cudaSuccess); }
  int* out_ = nullptr;
};

TEST_F(RaceCheck, ABarrierOrdersAWriteBeforeTheReadsOfTheOtherThreads) {
  run_broadcast(out_, /*barrier=*/true);
  const std::vector<int> out = read_all(out_, kBlocks * kThreads);
  for (int i = 0; i < kBlocks * kThreads; ++i) ASSERT_EQ(out[i], 5 + i / kThreads) << "thread " << i;
}

// Run forwards, thread 0 happens to write first and every thread reads the right value: the
// twin tests would pass. The race checker reports it anyway.
TEST_F(RaceCheck, AReadWithNoBarrierAfterAnotherThreadsWriteIsReported) {
  EXPECT_RACE_REPORTED(run_broadcast(out_, /*barrier=*/false));
}

TEST_F(RaceCheck, WritesOfOneWordByManyThreadsAreReported) {
  EXPECT_RACE_REPORTED(run("last_writer", 1, kThreads, [](auto&... a) { last_writer(a...); }, out_));
}

// A shuffle is no memory barrier (__syncwarp or __syncthreads is): stricter than a GPU that
// happens to run the warp in lockstep, as CUDA's memory model is.
TEST_F(RaceCheck, AShuffleOrdersNoMemory) {
  EXPECT_RACE_REPORTED(run("through_a_shuffle", 1, 32, [](auto&... a) { through_a_shuffle(a...); }, out_));
}

TEST_F(RaceCheck, SyncwarpOrdersTheWarpsMemory) {
  run("through_a_syncwarp", 1, 32, [](auto&... a) { through_a_syncwarp(a...); }, out_);
  EXPECT_EQ(read_all(out_, 1)[0], 7);
}

void run_add_in_turn(int* sums, bool take_turns) {
  auto* counters = reinterpret_cast<unsigned*>(device_ints(2));
  run("add_in_turn", kBlocks, 32, [](auto&... a) { add_in_turn(a...); }, sums, counters, take_turns);
  EXPECT_EQ(cudaFree(counters), cudaSuccess);
}

TEST_F(RaceCheck, BlocksTakingTurnsOrderTheirWritesOfOneWord) {
  run_add_in_turn(out_, /*take_turns=*/true);
  const std::vector<int> sums = read_all(out_, 32);
  for (int lane = 0; lane < 32; ++lane) ASSERT_EQ(sums[lane], kBlocks * (kBlocks + 1) / 2) << "lane " << lane;
}

TEST_F(RaceCheck, BlocksAddingIntoOneWordWithoutTurnsAreReported) {
  EXPECT_RACE_REPORTED(run_add_in_turn(out_, /*take_turns=*/false));
}

void run_refill(int* out, bool barrier) {
  int* source = device_ints(8);
  run("refill", 1, kThreads, [](auto&... a) { refill(a...); }, out, static_cast<const int*>(source), barrier);
  EXPECT_EQ(cudaFree(source), cudaSuccess);
}

TEST_F(RaceCheck, ABarrierBeforeAnAsyncCopyOrdersItAfterTheReads) { run_refill(out_, /*barrier=*/true); }

TEST_F(RaceCheck, AnAsyncCopyIntoATileOthersStillReadIsReported) {
  EXPECT_RACE_REPORTED(run_refill(out_, /*barrier=*/false));
}

TEST_F(RaceCheck, TwoBlocksWritingOneWordAreReported) {
  EXPECT_RACE_REPORTED(run("forgets_its_block", 2, kThreads, [](auto&... a) { forgets_its_block(a...); }, out_));
}

}  // namespace
