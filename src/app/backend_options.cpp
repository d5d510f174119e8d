#include "src/app/backend_options.h"

namespace trident::app {

kernels::BackendOptions backend_options(const io::RunConfig& config) {
  kernels::BackendOptions options;
  options.attention = config.run.attention == "flash" ? kernels::AttentionKernel::kFlash : kernels::AttentionKernel::kGemm;
  const bool fuse = config.run.matmul_epilogues == "fused" && config.train.precision != "fp32";
  options.matmul_epilogues = fuse ? kernels::MatmulEpilogues::kFused : kernels::MatmulEpilogues::kSeparate;
  options.attention_blocks = config.run.attention_blocks;
  options.attention_batching = config.run.attention_batching == "pointers" ? kernels::AttentionBatching::kPointers
                                                                           : kernels::AttentionBatching::kStrided;
  return options;
}

}  // namespace trident::app
