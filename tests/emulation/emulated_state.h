// State the emulated CUDA runtime (emulated_runtime.cpp, emulated_streams.cpp) shares with the
// emulated launches (emulated_grid.cpp) and libraries (cuBLAS, CUB, NCCL): the last error, the
// launch-shape rules, the registry of device allocations, so that a host pointer handed to a
// copy, a memset or a GEMM is reported as the GPU would fault on it, and the streams' queues.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <string>

#include "tests/emulation/cuda_emulation.h"

namespace cuda_emu {

void set_last_error(cudaError_t error, const std::string& why);
// A two-way choice from an environment variable: false when unset, empty or `usual`, true when
// `other`; any other value stops the program with exit code 2, naming both.
bool env_choice(const char* variable, const char* usual, const char* other);
// "" when the driver would accept the launch, else what is wrong with it.
// Dynamic shared memory past 48 KiB needs an opt-in (cudaFuncSetAttribute): the emulation
// knows a launch by its name, not its function, so it accepts the largest opt-in of any kernel.
std::string launch_problem(const LaunchConfig& config);
// Stops the program when the stream was never created (or was destroyed).
void check_stream(cudaStream_t stream);
// Device work queued on a stream (nullptr: the legacy default stream), run in the stream's order
// when emulated_streams.cpp's schedule runs it: at once, or later (deferred, the default). Work
// must own what it reads from the host (argument values, a copy's pageable source) and read
// device memory only when it runs.
void enqueue(cudaStream_t stream, std::function<void()> work);
// Runs all work queued so far on the stream (nullptr: on every blocking stream), or on the device.
void synchronize_stream(cudaStream_t stream);
void synchronize_device();
// Runs every other stream's queued work as far as it can go without waiting for an event not
// yet reached: the schedule in which `slow` is the last to get anywhere. (Called from work on
// `slow` itself.)
void run_other_streams_ahead(cudaStream_t slow);
// True when [p, p + bytes) lies inside one live device allocation.
bool is_device_range(const void* p, std::size_t bytes);
// Stops the program with a message when [p, p + bytes) is not device memory: the GPU would
// fault (an illegal address) where the emulation would quietly read host memory.
void require_device_range(const void* p, std::size_t bytes, const char* what);

}  // namespace cuda_emu
