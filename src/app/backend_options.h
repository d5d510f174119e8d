// The deck's choices about a backend's kernels (run.attention, run.matmul_epilogues,
// run.attention_blocks, run.attention_batching, run.flash_dq, run.flash_block_order,
// run.flash_forward, run.flash_backward, run.layernorm_sums, run.cross_entropy_loads,
// run.adamw_loads, run.matmul_backward_streams, run.matmul_bias_gradients, run.matmul_algorithms)
// as kernels::BackendOptions, for trident train and trident check alike.
#pragma once

#include "io/run_config.h"
#include "kernels/backend.h"

namespace trident::app {

// fp32 runs never fuse matmul epilogues (an fp32 run asks for none, and so holds no cuBLASLt
// workspace), whatever run.matmul_epilogues says. run.attention = auto takes flash where it
// runs on the tensor cores (device CUDA, bf16 or fp16, heads of 64 channels) of a GPU that gives
// its blocks the shared memory they need (`flash_fits`: kernels::cuda_flash_attention_fits) and
// gemm elsewhere: the fp32 flash kernels are scalar, a third of the GEMM path's speed, the CPU
// has none, and a Turing GPU (64 KiB a block) would refuse them.
kernels::BackendOptions backend_options(const io::RunConfig& config, kernels::Device device, bool flash_fits);

// The attention kernels run.attention = auto chooses on `device` (the deck's own choice when not
// auto).
kernels::AttentionKernel attention_kernel(const io::RunConfig& config, kernels::Device device, bool flash_fits);

}  // namespace trident::app
