#include "src/app/backend_options.h"

namespace trident::app {

kernels::AttentionKernel attention_kernel(const io::RunConfig& config, kernels::Device device, bool flash_fits) {
  if (config.run.attention == "auto") {
    const bool tensor_cores = device == kernels::Device::kCuda && flash_fits && config.train.precision != "fp32" &&
                              config.model.hidden / config.model.heads == io::kFlashHeadSize;
    return tensor_cores ? kernels::AttentionKernel::kFlash : kernels::AttentionKernel::kGemm;
  }
  return config.run.attention == "flash" ? kernels::AttentionKernel::kFlash : kernels::AttentionKernel::kGemm;
}

kernels::BackendOptions backend_options(const io::RunConfig& config, kernels::Device device, bool flash_fits) {
  kernels::BackendOptions options;
  options.attention = attention_kernel(config, device, flash_fits);
  const bool fuse = config.run.matmul_epilogues == "fused" && config.train.precision != "fp32";
  options.matmul_epilogues = fuse ? kernels::MatmulEpilogues::kFused : kernels::MatmulEpilogues::kSeparate;
  options.attention_blocks = config.run.attention_blocks;
  options.attention_batching = config.run.attention_batching == "pointers" ? kernels::AttentionBatching::kPointers
                                                                           : kernels::AttentionBatching::kStrided;
  options.flash_dq = config.run.flash_dq == "key_walk" ? kernels::FlashDq::kInKeyWalk : kernels::FlashDq::kSeparateWalk;
  options.flash_block_order = config.run.flash_block_order == "longest_first" ? kernels::FlashBlockOrder::kLongestFirst
                                                                              : kernels::FlashBlockOrder::kHeadByHead;
  const auto products = [](const std::string& choice) {
    return choice == "mma_sync" ? kernels::FlashProducts::kWarp : kernels::FlashProducts::kWarpgroup;
  };
  const auto schedule = [](const std::string& choice) {
    return choice == "wgmma_overlapped" ? kernels::WarpgroupSchedule::kOverlapped : kernels::WarpgroupSchedule::kInTurn;
  };
  options.flash_forward_products = products(config.run.flash_forward);
  options.flash_forward_schedule = schedule(config.run.flash_forward);
  options.flash_backward_products = products(config.run.flash_backward);
  options.flash_backward_schedule = schedule(config.run.flash_backward);
  options.flash_warpgroups = config.run.flash_warpgroups;
  options.layernorm_sums = config.run.layernorm_sums == "row_walk" ? kernels::LayerNormParameterSums::kInRowWalk
                                                                   : kernels::LayerNormParameterSums::kSeparatePass;
  options.cross_entropy_loads =
      config.run.cross_entropy_loads == "packs" ? kernels::CrossEntropyLoads::kPacks : kernels::CrossEntropyLoads::kValues;
  options.adamw_loads = config.run.adamw_loads == "packs" ? kernels::AdamWLoads::kPacks : kernels::AdamWLoads::kValues;
  options.matmul_backward_streams = config.run.matmul_backward_streams == "two" ? kernels::MatmulBackwardStreams::kTwo
                                                                                : kernels::MatmulBackwardStreams::kOne;
  options.matmul_bias_gradients = config.run.matmul_bias_gradients == "epilogue"
                                      ? kernels::MatmulBiasGradients::kEpilogue
                                      : kernels::MatmulBiasGradients::kColumnSums;
  options.matmul_algorithms = config.run.matmul_algorithms == "timed" ? kernels::MatmulAlgorithms::kTimed
                                                                      : kernels::MatmulAlgorithms::kHeuristic;
  return options;
}

}  // namespace trident::app
