// The deck's choices about a backend's kernels (run.attention, run.matmul_epilogues,
// run.attention_blocks, run.attention_batching) as kernels::BackendOptions, for trident train
// and trident check alike.
#pragma once

#include "io/run_config.h"
#include "kernels/backend.h"

namespace trident::app {

// fp32 runs never fuse matmul epilogues (an fp32 run asks for none, and so holds no cuBLASLt
// workspace), whatever run.matmul_epilogues says.
kernels::BackendOptions backend_options(const io::RunConfig& config);

}  // namespace trident::app
