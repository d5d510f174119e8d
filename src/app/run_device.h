// The device a training rank runs on, its backend and the kernels the model calls on it, and the
// check that the run fits the memory of the ranks that share it.
#pragma once

#include "kernels/backend.h"
#include "kernels/precision.h"
#include "parallel/comm.h"
#include "parallel/comm_buffers.h"  // CommTransport
#include "parallel/parallel_context.h"
#include "src/app/device_choice.h"
#include "src/app/memory_estimate.h"
#include "src/app/run_objects.h"

namespace trident::app {

// The device this rank trains on, as the ranks agree (choose_device_collectively), what the
// start-up report says of it, and how the groups talk.
struct RunDevice {
  DeviceChoice choice;
  parallel::CommTransport transport;
  bool flash_too_large;  // run.attention = auto passed over flash for this GPU alone
};

// Chooses the device, makes its backend into run.backend, and sets the groups of `ctx` talking
// on it: NCCL on device memory, or (parallel.comm = mpi) MPI on host copies of the device buffers;
// CPU runs use MPI on their own memory. A deck's choice that the device refuses is a user error.
RunDevice make_device_backend(const io::RunConfig& c, parallel::ParallelContext& ctx, parallel::Comm& world,
                              RunObjects& run);

// The kernels the model calls, made into `run` around the device's backend: innermost a test's
// injected NaN (src/app/gradient_fault.h), so that the rest sees it as a kernel's output; then
// run.profile's timing, of the kernels where they run, under the rounding (its widening and
// narrowing, where a kernel lacks 16-bit loads, show as kernels of their own); outermost, for
// bf16 / fp16, 16-bit storage semantics (kernels/rounded_storage_backend.h) for the model's 16-bit
// buffers: the kernels that do not read 16 bits themselves (all of the CPU's; none on CUDA) run on
// widened fp32 copies.
kernels::Backend& stack_kernels(kernels::Precision precision, int world_rank, bool profile, RunObjects& run);

// Stops the run on every rank, before the model is allocated, when the ranks sharing a memory
// pool (a node's host memory, or one GPU) need more than it has free (src/app/memory_fit.h).
void check_run_fits(const MemoryEstimate& estimate, const DeviceChoice& device, parallel::ParallelContext& ctx,
                    parallel::Comm& world);

}  // namespace trident::app
