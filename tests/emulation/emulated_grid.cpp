// The emulation's launch: blocks spread over OpenMP threads, each block's threads run as
// cooperative fibers (Boost.Context: a switch costs nanoseconds, where ucontext makes a system
// call) on one OS thread (cuda_emulation.h says why and what it models).
//
// A fiber runs until it finishes or waits at a barrier (__syncthreads, or a warp shuffle); the
// scheduler then resumes the next fiber that is neither finished nor still held, round robin. A
// barrier opens when every thread of its block (warp) has arrived. Stricter than the GPU on
// purpose: a thread that exits while others of its block or warp still have a barrier to pass
// is reported, since the kernels' contract (block_reduce.cuh) is that every thread reaches
// every barrier. A pass over all fibers in which none moves is a deadlock, also reported. A
// report stops the program: it is a kernel bug, and the message names the kernel, block and
// thread.
#include <omp.h>

#include <boost/context/fiber.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tests/emulation/cuda_emulation.h"
#include "tests/emulation/emulated_racecheck.h"
#include "tests/emulation/emulated_state.h"
#include "tests/emulation/emulated_warpgroup.h"

namespace cuda_emu {

thread_local constinit Coordinates tl_coordinates;

namespace {

constexpr std::size_t kFiberStackBytes = 256 * 1024;  // the kernels' per-thread arrays fit easily
constexpr int kWarpSize = 32;
constexpr std::size_t kSlotBytes = 16;
constexpr std::size_t kStaticSharedLimit = 48 * 1024;  // ptxas refuses more in static __shared__
// The shared window (shared_window_address): the block's dynamic shared memory from this address,
// then its static variables in the order the threads first reach them, each on 16 bytes. 16, not 0
// or 1024: the GPU promises a shared variable 16 bytes of alignment unless asked for more, so a
// kernel whose tiles need more (wgmma's 128-byte swizzle: 1024) must align them itself, and one
// that forgets finds its tiles misaligned here too.
constexpr std::uint32_t kDynamicWindowBase = 16;
constexpr std::uint32_t window_round_up(std::size_t address) {
  return static_cast<std::uint32_t>((address + 15) / 16 * 16);
}

namespace context = boost::context;

struct Fiber {
  context::fiber fiber;
  uint3 thread;
  bool finished = false;
  // While waiting at a barrier: its generation counter and the value it waits to see change.
  // The scheduler passes such a fiber by without switching to it.
  const unsigned* waits_on = nullptr;
  unsigned waits_while = 0;
  // Copies issued and not yet waited for, from async_copies[async_taken] on (cuda_emulation.h).
  // A vector, which allocates nothing until the thread's first copy: a container that allocates
  // when the scheduler makes it (std::deque) and frees in the thread would be reported by the race
  // checker, the two not being ordered.
  std::vector<AsyncCopy> async_copies;
  std::size_t async_taken = 0;
  WarpgroupQueue wgmma;  // its wgmma products not yet waited for (emulated_warpgroup.h)
};

// Hands out the OS thread's own pooled stacks: no allocation per fiber.
struct PooledStack {
  char* base;
  context::stack_context allocate() {
    context::stack_context stack;
    stack.size = kFiberStackBytes;
    stack.sp = base + kFiberStackBytes;
    return stack;
  }
  void deallocate(context::stack_context&) noexcept {}
};

struct Warp {
  int size = 0;      // lanes that exist (the last warp of a block may be partial)
  int finished = 0;  // lanes that have returned
  int arrived = 0;
  unsigned generation = 0;
  // The race checker's synchronisation objects of __syncwarp, alternating as the block's
  // barrier's do.
  std::array<char, 2> barrier_sync{};
  // Two sets of slots, used by alternate shuffles: a lane can write the next shuffle's value
  // before a slower lane has read this one's, so one barrier per shuffle suffices.
  std::array<std::array<std::array<unsigned char, kSlotBytes>, kWarpSize>, 2> slots{};
};

// One running block, per OS thread.
struct Block {
  const char* kernel = nullptr;
  const std::function<void()>* body = nullptr;
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  context::fiber scheduler;  // where a yielding fiber returns to
  int current = 0;
  int finished = 0;
  int arrived = 0;
  unsigned generation = 0;
  unsigned long progress = 0;  // bumped by every arrival, release and finish
  bool direct = false;         // threads called one after another, no fibers (see run_block)
  bool reverse = false;        // threads run from the last one down (reverse_thread_order)
  // Each allocated at its exact size (AddressSanitizer's redzones around it) and filled with
  // 0xff (NaN as floats) for each block: uninitialised on the GPU.
  std::unique_ptr<unsigned char[]> dynamic_shared;
  std::size_t dynamic_shared_bytes = 0;
  struct StaticShared {
    const void* key;
    std::unique_ptr<unsigned char[]> memory;
    std::size_t bytes;
    std::uint32_t window;  // its address in the shared window (shared_window_address)
  };
  std::vector<StaticShared> static_shared;  // this block's, freed before the next one starts
  // The race checker's (emulated_racecheck.h): the scheduler's context; what the launch
  // releases to and every thread acquires first; where every finished thread releases to; the
  // block barrier's addresses (alternate barriers alternate, so that a thread already past the
  // next barrier does not order a slower one's work before it); and which of the two sets of
  // fibers and stacks this block runs on (alternate blocks alternate, so that thread i of a
  // block is not ordered after thread i of the block before).
  void* scheduler_fiber = nullptr;
  char launch_sync = 0;
  char finished_sync = 0;
  std::array<char, 2> barrier_sync{};
  std::size_t set = 0;
};

thread_local Block* tl_block = nullptr;
thread_local std::vector<std::unique_ptr<char[]>> tl_stacks;
// The race checker's context of each stack (slot below): a context always runs on its stack.
thread_local std::vector<void*> tl_race_fibers;

// Thread i's stack (and race checker context): i, or under the race checker i of the block's set.
std::size_t slot(const Block& b, int i) {
  return racecheck::kOn ? static_cast<std::size_t>(i) * 2 + b.set : static_cast<std::size_t>(i);
}

[[noreturn]] void kernel_fault(const Block& b, const std::string& what) {
  const Fiber& f = b.fibers[static_cast<std::size_t>(b.current)];
  std::fprintf(stderr,
               "cuda emulation: kernel %s, block (%u,%u,%u), thread (%u,%u,%u): %s\n", b.kernel,
               tl_coordinates.block.x, tl_coordinates.block.y, tl_coordinates.block.z, f.thread.x, f.thread.y,
               f.thread.z, what.c_str());
  std::fflush(stderr);
  std::abort();
}

// Waits until *generation moves past `seen` (a barrier opened), letting the other fibers run.
void wait_for_release(const unsigned* generation, unsigned seen) {
  Block& b = *tl_block;
  Fiber& f = b.fibers[static_cast<std::size_t>(b.current)];
  f.waits_on = generation;
  f.waits_while = seen;
  while (*generation == seen) {
    racecheck::leave_to(b.scheduler_fiber);
    b.scheduler = std::move(b.scheduler).resume();
  }
  f.waits_on = nullptr;
}

// A copy a thread never waited for may land at any time after it returns, or be read by another
// thread that the barrier it would have needed never ordered: a kernel bug on the GPU too.
// Likewise a wgmma product never waited for.
void check_no_async_copies_left(const Block& b) {
  const Fiber& f = b.fibers[static_cast<std::size_t>(b.current)];
  if (f.async_taken < f.async_copies.size()) {
    kernel_fault(b, "returned with cp.async copies it never waited for (async_copy::wait_all)");
  }
  const std::string products = f.wgmma.at_return();
  if (!products.empty()) kernel_fault(b, products);
}

int linear_thread(const uint3& t, const dim3& d) {
  return static_cast<int>(t.x + t.y * d.x + t.z * d.x * d.y);
}

context::fiber fiber_main(context::fiber&& scheduler) {
  Block& b = *tl_block;
  b.scheduler = std::move(scheduler);
  racecheck::acquire(&b.launch_sync);  // the host's writes before the launch, and no more
  try {
    (*b.body)();
  } catch (const std::exception& e) {
    kernel_fault(b, std::string("exception thrown inside the kernel: ") + e.what());
  }
  Fiber& f = b.fibers[static_cast<std::size_t>(b.current)];
  check_no_async_copies_left(b);
  f.finished = true;
  ++b.finished;
  ++b.progress;
  const int lane_warp = linear_thread(f.thread, tl_coordinates.block_dim) / kWarpSize;
  ++b.warps[static_cast<std::size_t>(lane_warp)].finished;
  if (b.arrived > 0) kernel_fault(b, "returned while other threads of its block wait at __syncthreads");
  if (b.warps[static_cast<std::size_t>(lane_warp)].arrived > 0) {
    kernel_fault(b, "returned while other lanes of its warp wait in a shuffle");
  }
  racecheck::release(&b.finished_sync);
  racecheck::leave_to(b.scheduler_fiber);
  return std::move(b.scheduler);
}

// TRIDENT_CUDA_EMULATION_THREAD_ORDER=reverse runs a block's threads from the last one down
// between barriers (default: forward, thread 0 first). A kernel whose threads race on memory
// that no barrier orders, such as thread 0 writing what the others read, can give the right
// answer in one order and not the other. Read at each launch.
bool reverse_thread_order() { return env_choice("TRIDENT_CUDA_EMULATION_THREAD_ORDER", "forward", "reverse"); }

void resume(Block& b, int i) {
  Fiber& f = b.fibers[static_cast<std::size_t>(i)];
  b.current = i;
  tl_coordinates.thread = f.thread;
  if (racecheck::kOn) racecheck::enter(tl_race_fibers[slot(b, i)]);  // (none made otherwise)
  f.fiber = std::move(f.fiber).resume();
}

void run_block(Block& b, const dim3& block_dim) {
  const int threads = static_cast<int>(block_dim.x * block_dim.y * block_dim.z);
  b.set ^= 1u;
  const std::size_t slots = racecheck::kOn ? 2 * static_cast<std::size_t>(threads) : static_cast<std::size_t>(threads);
  while (tl_stacks.size() < slots) {
    // Not zeroed (make_unique would write every byte): only the pages a fiber uses are touched.
    tl_stacks.push_back(std::unique_ptr<char[]>(new char[kFiberStackBytes]));
  }
  while (racecheck::kOn && tl_race_fibers.size() < slots) tl_race_fibers.push_back(racecheck::new_fiber());
  b.static_shared.clear();  // the previous block's (after everything it did: racecheck's acquire)
  b.fibers.clear();
  b.fibers.resize(static_cast<std::size_t>(threads));
  b.warps.assign(static_cast<std::size_t>((threads + kWarpSize - 1) / kWarpSize), Warp{});
  for (std::size_t w = 0; w < b.warps.size(); ++w) {
    b.warps[w].size = std::min(kWarpSize, threads - static_cast<int>(w) * kWarpSize);
  }
  b.finished = 0;
  b.arrived = 0;
  b.generation = 0;
  b.direct = false;
  b.progress = 0;
  for (int i = 0; i < threads; ++i) {
    Fiber& f = b.fibers[static_cast<std::size_t>(i)];
    f.thread = uint3{static_cast<unsigned>(i) % block_dim.x, (static_cast<unsigned>(i) / block_dim.x) % block_dim.y,
                     static_cast<unsigned>(i) / (block_dim.x * block_dim.y)};
  }
  // Fibers are made only when they will run: one destroyed unstarted is unwound by an
  // exception, which made the plain-call path below slower than the fibers it saves.
  const auto make_fiber = [&b](int i) {
    b.fibers[static_cast<std::size_t>(i)].fiber =
        context::fiber(std::allocator_arg, PooledStack{tl_stacks[slot(b, i)].get()}, fiber_main);
  };
  // The order threads are run in between barriers: 0 upwards, or from the last thread down.
  const auto nth = [&b, threads](int k) { return b.reverse ? threads - 1 - k : k; };
  // Threads run as plain calls where they can: no context switch for the elementwise kernels.
  // The first thread of each warp (in the run order) runs on its fiber. If it returns without
  // meeting a barrier or a shuffle, the rest of its warp runs as plain calls: by the strict rule
  // above none of them may meet __syncthreads now, nor a shuffle (a lane of their warp has
  // returned), and one that does is reported as it would be. Other warps may still shuffle
  // among themselves (a warp past the end of the data returning at once, as warp-per-row
  // kernels' last block does), so the next warp is tried on a fiber again. Once a first thread
  // meets a barrier, every thread not yet run gets a fiber and the loop below runs them all.
  // (Not for the race checker, which needs each thread on its own fiber.)
  const auto warp_of = [&b, &block_dim](int i) {
    return linear_thread(b.fibers[static_cast<std::size_t>(i)].thread, block_dim) / kWarpSize;
  };
  int ran = 0;  // threads run to their end so far, in the run order
  while (!racecheck::kOn && ran < threads) {
    const int first = nth(ran);
    const unsigned long before = b.progress;
    make_fiber(first);
    resume(b, first);
    if (!b.fibers[static_cast<std::size_t>(first)].finished || b.progress != before + 1) break;
    ++ran;
    b.direct = true;
    for (; ran < threads && warp_of(nth(ran)) == warp_of(first); ++ran) {
      const int i = nth(ran);
      Fiber& f = b.fibers[static_cast<std::size_t>(i)];
      b.current = i;
      tl_coordinates.thread = f.thread;
      try {
        (*b.body)();
      } catch (const std::exception& e) {
        kernel_fault(b, std::string("exception thrown inside the kernel: ") + e.what());
      }
      check_no_async_copies_left(b);
      f.finished = true;
      ++b.finished;
      ++b.progress;
      ++b.warps[static_cast<std::size_t>(warp_of(i))].finished;
    }
    b.direct = false;
  }
  if (b.finished == threads) return;
  // The first thread of a warp waits at a barrier (ran: those before it); the rest get fibers.
  for (int k = racecheck::kOn ? 0 : ran + 1; k < threads; ++k) make_fiber(nth(k));
  while (b.finished < threads) {
    const unsigned long before = b.progress;
    for (int k = 0; k < threads; ++k) {
      const int i = nth(k);
      Fiber& f = b.fibers[static_cast<std::size_t>(i)];
      if (f.finished || (f.waits_on != nullptr && *f.waits_on == f.waits_while)) continue;
      resume(b, i);
    }
    if (b.progress == before) {
      b.current = 0;
      while (b.fibers[static_cast<std::size_t>(b.current)].finished) ++b.current;
      kernel_fault(b, "deadlock: no thread of the block can move (a barrier not every thread reaches?)");
    }
  }
  // The host after the grid comes after everything this block did (and the scheduler's frees
  // of its shared memory; the next block acquires only the launch).
  racecheck::acquire(&b.finished_sync);
}

}  // namespace

void sync_block() {
  Block& b = *tl_block;
  // No thread may have returned yet (the strict rule), so the barrier waits for all of them.
  if (b.finished > 0) kernel_fault(b, "__syncthreads after another thread of the block has returned");
  const unsigned generation = b.generation;
  void* sync = &b.barrier_sync[generation & 1u];
  racecheck::release(sync);
  ++b.arrived;
  ++b.progress;
  if (b.arrived == static_cast<int>(b.fibers.size())) {
    b.arrived = 0;
    ++b.generation;
    racecheck::acquire(sync);
    return;
  }
  wait_for_release(&b.generation, generation);
  racecheck::acquire(sync);
  ++b.progress;
}

int lane_of_current_thread() {
  const Block& b = *tl_block;
  return linear_thread(b.fibers[static_cast<std::size_t>(b.current)].thread, tl_coordinates.block_dim) % kWarpSize;
}

namespace {

Warp& current_warp() {
  Block& b = *tl_block;
  const int linear = linear_thread(b.fibers[static_cast<std::size_t>(b.current)].thread, tl_coordinates.block_dim);
  return b.warps[static_cast<std::size_t>(linear / kWarpSize)];
}

void warp_barrier() {
  Block& b = *tl_block;
  if (b.direct) kernel_fault(b, "warp shuffle after another lane of the warp has returned");
  Warp& w = current_warp();
  if (w.finished > 0) kernel_fault(b, "warp shuffle after another lane of the warp has returned");
  const unsigned generation = w.generation;
  ++w.arrived;
  ++b.progress;
  if (w.arrived == w.size) {
    w.arrived = 0;
    ++w.generation;
    return;
  }
  wait_for_release(&w.generation, generation);
  ++b.progress;
}

}  // namespace

void sync_warp(unsigned mask) {
  Block& b = *tl_block;
  Warp& w = current_warp();
  const unsigned lanes = w.size == kWarpSize ? 0xffffffffu : (1u << w.size) - 1u;
  if ((mask & lanes) != lanes) kernel_fault(b, "__syncwarp mask leaves out lanes that exist");
  // Unlike a shuffle, a memory barrier between the warp's lanes: a release on arrival, an acquire
  // on leaving.
  void* sync = &w.barrier_sync[w.generation & 1u];
  racecheck::release(sync);
  warp_barrier();
  racecheck::acquire(sync);
}

namespace {

// A shuffle's value into or out of its slot, byte by byte through volatile: no memcpy call,
// which ThreadSanitizer would see as the lanes' own unordered accesses (a shuffle orders no
// memory, so the race checker has no barrier to put between them).
void copy_slot(void* to, const void* from, std::size_t bytes) {
  auto* out = static_cast<volatile unsigned char*>(to);
  const auto* in = static_cast<const volatile unsigned char*>(from);
  for (std::size_t i = 0; i < bytes; ++i) out[i] = in[i];
}

}  // namespace

void warp_publish(unsigned mask, const void* value, std::size_t bytes) {
  Block& b = *tl_block;
  Warp& w = current_warp();
  const unsigned lanes = w.size == kWarpSize ? 0xffffffffu : (1u << w.size) - 1u;
  if ((mask & lanes) != lanes) kernel_fault(b, "shuffle mask leaves out lanes that exist");
  if (bytes > kSlotBytes) kernel_fault(b, "shuffle of a value wider than 16 bytes");
  copy_slot(w.slots[w.generation & 1u][static_cast<std::size_t>(lane_of_current_thread())].data(), value, bytes);
  warp_barrier();
}

void warp_read(int source_lane, void* out, std::size_t bytes) {
  Block& b = *tl_block;
  Warp& w = current_warp();
  if (source_lane < 0 || source_lane >= w.size) {
    kernel_fault(b, "shuffle reads lane " + std::to_string(source_lane) + ", which does not exist in this warp");
  }
  // The slots of the barrier just passed (the generation has moved on by one since).
  copy_slot(out, w.slots[(w.generation - 1u) & 1u][static_cast<std::size_t>(source_lane)].data(), bytes);
}

void* dynamic_shared_memory() { return tl_block->dynamic_shared.get(); }

void record_async_copy(void* to, const void* from, std::size_t bytes) {
  Block& b = *tl_block;
  b.fibers[static_cast<std::size_t>(b.current)].async_copies.push_back(AsyncCopy{to, from, bytes});
}

bool take_async_copy(AsyncCopy* copy) {
  Block& b = *tl_block;
  Fiber& f = b.fibers[static_cast<std::size_t>(b.current)];
  if (f.async_taken == f.async_copies.size()) {
    f.async_copies.clear();  // keeps its memory for the thread's next copies
    f.async_taken = 0;
    return false;
  }
  *copy = f.async_copies[f.async_taken++];
  return true;
}

namespace {
WarpgroupQueue& current_wgmma_queue() {
  Block& b = *tl_block;
  return b.fibers[static_cast<std::size_t>(b.current)].wgmma;
}
void fault_unless_empty(const std::string& error) {
  if (!error.empty()) kernel_fault(*tl_block, error);
}
}  // namespace

void fence_warpgroup_products() { current_wgmma_queue().fence(); }
void record_warpgroup_product(const WarpgroupProduct& product) {
  fault_unless_empty(current_wgmma_queue().record(product));
}
void commit_warpgroup_products() { fault_unless_empty(current_wgmma_queue().commit()); }
void wait_warpgroup_products(int in_flight) { fault_unless_empty(current_wgmma_queue().wait(in_flight)); }

std::uint32_t shared_window_address(const void* p) {
  const Block& b = *tl_block;
  const auto* at = static_cast<const unsigned char*>(p);
  const auto inside = [at](const unsigned char* memory, std::size_t bytes) {
    return memory != nullptr && at >= memory && at < memory + bytes;
  };
  if (inside(b.dynamic_shared.get(), b.dynamic_shared_bytes)) {
    return kDynamicWindowBase + static_cast<std::uint32_t>(at - b.dynamic_shared.get());
  }
  for (const Block::StaticShared& shared : b.static_shared) {
    if (inside(shared.memory.get(), shared.bytes)) {
      return shared.window + static_cast<std::uint32_t>(at - shared.memory.get());
    }
  }
  kernel_fault(b, "__cvta_generic_to_shared of an address outside the block's shared memory");
}

void* shared_window_pointer(std::uint32_t address, std::size_t bytes) {
  const Block& b = *tl_block;
  const auto within = [address, bytes](std::uint32_t window, std::size_t size) {
    return address >= window && address - window + bytes <= size;
  };
  if (b.dynamic_shared && within(kDynamicWindowBase, b.dynamic_shared_bytes)) {
    return b.dynamic_shared.get() + (address - kDynamicWindowBase);
  }
  for (const Block::StaticShared& shared : b.static_shared) {
    if (within(shared.window, shared.bytes)) return shared.memory.get() + (address - shared.window);
  }
  kernel_fault(b, "shared-memory address " + std::to_string(address) + " (" + std::to_string(bytes) +
                      " bytes) is outside the block's shared memory");
}

void* static_shared_memory(const void* key, std::size_t bytes) {
  Block& b = *tl_block;
  std::size_t total = bytes;
  for (const Block::StaticShared& shared : b.static_shared) {
    if (shared.key == key) return shared.memory.get();
    total += shared.bytes;
  }
  if (total > kStaticSharedLimit) {
    kernel_fault(b, "static __shared__ variables of " + std::to_string(total) + " bytes: past the 48 KiB ptxas allows");
  }
  // Fresh memory to the race checker too: the allocation and the fill are no thread's access.
  racecheck::unrecorded_writes_begin();
  auto memory = std::unique_ptr<unsigned char[]>(new unsigned char[bytes]);
  std::fill_n(memory.get(), bytes, 0xff);
  const std::uint32_t window = b.static_shared.empty()
                                   ? window_round_up(kDynamicWindowBase + b.dynamic_shared_bytes)
                                   : window_round_up(b.static_shared.back().window + b.static_shared.back().bytes);
  b.static_shared.push_back({key, std::move(memory), bytes, window});
  racecheck::unrecorded_writes_end();
  return b.static_shared.back().memory.get();
}

namespace {

// Runs every block of the grid (the queued half of run_grid).
void execute_grid(const char* kernel_name, const LaunchConfig& config, const std::function<void()>& body) {
  const bool reverse = reverse_thread_order();
  const dim3 grid = config.grid;
  const long long blocks = static_cast<long long>(grid.x) * grid.y * grid.z;
  // The race checker runs blocks one at a time (emulated_racecheck.h): OpenMP's own ordering
  // between OS threads is invisible to it.
#pragma omp parallel if (!racecheck::kOn)
  {
    Block block;
    block.kernel = kernel_name;
    block.reverse = reverse;
    block.body = &body;
    block.dynamic_shared_bytes = config.shared_bytes;
    tl_block = &block;
    block.scheduler_fiber = racecheck::current_fiber();
    racecheck::release(&block.launch_sync);
#pragma omp for schedule(dynamic, 1)
    for (long long i = 0; i < blocks; ++i) {
      tl_coordinates.block = uint3{static_cast<unsigned>(i % grid.x), static_cast<unsigned>((i / grid.x) % grid.y),
                                   static_cast<unsigned>(i / (static_cast<long long>(grid.x) * grid.y))};
      tl_coordinates.block_dim = config.block;
      tl_coordinates.grid_dim = grid;
      // A new allocation for each block (none for a launch that asked for none): fresh memory
      // to the race checker too.
      racecheck::unrecorded_writes_begin();
      block.dynamic_shared.reset(config.shared_bytes > 0 ? new unsigned char[config.shared_bytes] : nullptr);
      std::fill_n(block.dynamic_shared.get(), block.dynamic_shared_bytes, 0xff);
      racecheck::unrecorded_writes_end();
      run_block(block, config.block);
    }
    tl_block = nullptr;
  }
}

}  // namespace

void run_grid(const char* kernel_name, const LaunchConfig& config, std::function<void()> body) {
  const std::string problem = launch_problem(config);
  if (!problem.empty()) {
    set_last_error(cudaErrorInvalidConfiguration, std::string(kernel_name) + ": " + problem);
    return;
  }
  enqueue(config.stream, [kernel_name, config, body = std::move(body)] { execute_grid(kernel_name, config, body); });
}

}  // namespace cuda_emu
