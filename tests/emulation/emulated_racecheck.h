// ThreadSanitizer as a race checker for the emulated threads of a grid, in a build with
// TRIDENT_CUDA_EMULATION_SANITIZER=thread (emulated_grid.cpp; docs/testing-without-a-gpu.md).
//
// The threads of a block run as fibers on one OS thread, so to ThreadSanitizer they would be
// one thread in program order, and no race between them could show. Here each emulated thread
// is a ThreadSanitizer fiber of its own, and switching between them says nothing about order
// (no_sync). Order comes only from what orders memory between GPU threads: __syncthreads is a
// release on arrival and an acquire on leaving. (A warp shuffle exchanges registers and orders
// no memory, so it is no barrier here.) Two threads of a block that touch the same word of
// shared or global memory, one of them writing, with no __syncthreads between, are reported
// with both .cu lines, whatever order the emulation ran them in.
//
// Between blocks: every thread acquires only what the host wrote before the launch, so threads
// of two blocks touching one word are reported too, unless they have the same index and their
// blocks are an even number apart. Blocks run one at a time (OpenMP off) on two sets of fibers
// and stacks, alternating: thread i of block b runs as context i of set b % 2, so after thread
// i of block b - 2 in that context's program order. Each block's shared memory is a new
// allocation, freed by the scheduler only after it has acquired everything the block did.
//
// emulated_grid.cpp itself is compiled without instrumentation: its bookkeeping (arrival
// counts, generations) is shared by the fibers on purpose and would be reported otherwise.
// Elsewhere these calls compile to nothing.
#pragma once

#if defined(TRIDENT_EMULATION_RACECHECK)
#include <sanitizer/tsan_interface.h>
// ThreadSanitizer's dynamic annotations (exported by its runtime, declared by no header).
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

namespace cuda_emu::racecheck {

#if defined(TRIDENT_EMULATION_RACECHECK)
constexpr bool kOn = true;
inline void* current_fiber() { return __tsan_get_current_fiber(); }
inline void* new_fiber() { return __tsan_create_fiber(0); }
// Called just before the switch, which inherits nothing.
inline void enter(void* fiber) { __tsan_switch_to_fiber(fiber, __tsan_switch_to_fiber_no_sync); }
inline void leave_to(void* scheduler) { __tsan_switch_to_fiber(scheduler, __tsan_switch_to_fiber_no_sync); }
inline void release(void* sync) { __tsan_release(sync); }
inline void acquire(void* sync) { __tsan_acquire(sync); }
// Between these, the running thread's writes are not recorded, and an allocation is fresh
// memory: for the block's shared memory, which its first thread to need it makes and fills.
// (AnnotateNewMemory after the allocation left the allocation's own write in place in GCC 12's
// runtime, and the block's other threads were reported racing with it.)
inline void unrecorded_writes_begin() { AnnotateIgnoreWritesBegin(__FILE__, __LINE__); }
inline void unrecorded_writes_end() { AnnotateIgnoreWritesEnd(__FILE__, __LINE__); }
#else
constexpr bool kOn = false;
inline void* current_fiber() { return nullptr; }
inline void* new_fiber() { return nullptr; }
inline void enter(void*) {}
inline void leave_to(void*) {}
inline void release(void*) {}
inline void acquire(void*) {}
inline void unrecorded_writes_begin() {}
inline void unrecorded_writes_end() {}
#endif

}  // namespace cuda_emu::racecheck
