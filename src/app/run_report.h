// What train prints about a run beyond the start-up report (startup_report.h): rank 0's lines on
// the backend, device, communication and data before the first step, and the memory and "done"
// lines after the last.
#pragma once

#include <cstdint>

#include "io/token_dataset.h"  // TokenFileInfo
#include "kernels/backend.h"
#include "parallel/comm_buffers.h"  // CommTransport
#include "parallel/parallel_context.h"
#include "src/app/device_choice.h"
#include "src/app/memory_estimate.h"
#include "src/app/run_setup.h"
#include "src/train/trainer.h"  // RunSummary

namespace trident::app {

// What the lines before the first step describe.
struct RunKernels {
  kernels::Backend* device;   // the backend on the device (its attention scratch and 16-bit kernels)
  kernels::Backend* compute;  // what the model calls: with the rounding and timing on top
  DeviceChoice device_choice;
  parallel::CommTransport transport;
  bool flash_too_large;  // run.attention = auto passed over flash for this GPU's shared memory
  bool profiled;         // run.profile
};

// Rank 0 prints the start-up report and the lines that follow it; other ranks print nothing.
void print_run_banner(const RunSetup& setup, parallel::ParallelContext& ctx, const RunKernels& run_kernels,
                      const io::TokenFileInfo& data);

// The memory lines of the end of a run: the resident memory that grew while training (since
// `resident_before`) and the device's high-water mark, the largest over ranks, against rank 0's
// estimate, and the gradient-reduction buffers held. Collective over the world; rank 0 prints.
void print_memory_use(const MemoryEstimate& estimate, double resident_before, const RunKernels& run_kernels,
                      parallel::ParallelContext& ctx, parallel::Comm& world);

// Rank 0's "done: ..." line: the steps of this invocation (from `start_step`), their time, the
// last losses and, for synthetic data, the distance to the loss floor.
void print_done(const io::RunConfig& c, int64_t start_step, double seconds, const train::RunSummary& summary,
                double entropy_rate_nats);

}  // namespace trident::app
