// The start-up report shared by `trident train` and `trident check`: resolved deck, layout
// table, parameter count and per-rank memory.
#pragma once

#include <string>

#include "kernels/backend.h"  // Native16BitKernels
#include "parallel/comm_buffers.h"  // CommTransport
#include "parallel/rank_grid.h"
#include "src/app/run_setup.h"

namespace trident::app {

// native: the kernel families the run's backend computes on 16 bits itself (Backend::native_16bit),
// which the memory table counts (16-bit logits, no widening workspace for them); `trident check`
// has no backend and passes kernels::native_16bit_kernels of the deck's device. transport: how
// the groups talk (memory_estimate.h's comm_transport), for the gradient reductions' buffers.
std::string startup_report(const RunSetup& setup, const parallel::RankGrid& grid, std::size_t attention_scratch,
                           kernels::Native16BitKernels native = {},
                           parallel::CommTransport transport = parallel::CommTransport::kMpi);

}  // namespace trident::app
