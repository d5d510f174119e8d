// backend_options: each deck key of the kernels reaches kernels::BackendOptions, with the
// defaults the deck schema gives, fp32 never fusing matmul epilogues, and run.attention = auto
// taking flash only where it runs on the tensor cores of a GPU it fits.
#include "src/app/backend_options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/deck.h"  // parse_deck, to_run_config

namespace trident::app {
namespace {

kernels::BackendOptions options_of(const std::vector<std::string>& overrides,
                                   kernels::Device device = kernels::Device::kCpu, bool flash_fits = true) {
  return backend_options(io::to_run_config(io::parse_deck("", "d.ini", overrides)), device, flash_fits);
}

TEST(BackendOptions, DefaultsAreTheBackendsDefaults) {
  // On the CPU run.attention = auto is the GEMM path, the backends' default.
  const kernels::BackendOptions deck = options_of({"--train.precision=bf16"});
  const kernels::BackendOptions plain;
  EXPECT_EQ(deck.attention, plain.attention);
  EXPECT_EQ(deck.matmul_epilogues, plain.matmul_epilogues);
  EXPECT_EQ(deck.attention_blocks, plain.attention_blocks);
  EXPECT_EQ(deck.attention_batching, plain.attention_batching);
  EXPECT_EQ(deck.flash_dq, plain.flash_dq);
  EXPECT_EQ(deck.flash_block_order, plain.flash_block_order);
  EXPECT_EQ(deck.flash_forward_products, plain.flash_forward_products);
  EXPECT_EQ(deck.flash_forward_schedule, plain.flash_forward_schedule);
  EXPECT_EQ(deck.flash_backward_products, plain.flash_backward_products);
  EXPECT_EQ(deck.flash_backward_schedule, plain.flash_backward_schedule);
  EXPECT_EQ(deck.flash_warpgroups, plain.flash_warpgroups);
  EXPECT_EQ(deck.layernorm_sums, plain.layernorm_sums);
  EXPECT_EQ(deck.cross_entropy_loads, plain.cross_entropy_loads);
  EXPECT_EQ(deck.adamw_loads, plain.adamw_loads);
  EXPECT_EQ(deck.matmul_backward_streams, plain.matmul_backward_streams);
  EXPECT_EQ(deck.matmul_bias_gradients, plain.matmul_bias_gradients);
  EXPECT_EQ(deck.matmul_algorithms, plain.matmul_algorithms);
}

TEST(BackendOptions, EveryKeyReachesItsOption) {
  const kernels::BackendOptions options =
      options_of({"--train.precision=bf16", "--run.device=cuda", "--run.attention=flash", "--run.matmul_epilogues=separate",
                  "--run.attention_blocks=4", "--run.attention_batching=pointers", "--run.flash_dq=key_walk",
                  "--run.flash_block_order=longest_first", "--run.flash_forward=wgmma_overlapped",
                  "--run.flash_backward=wgmma", "--run.layernorm_sums=row_walk", "--run.cross_entropy_loads=packs",
                  "--run.adamw_loads=packs", "--run.matmul_backward_streams=two",
                  "--run.matmul_bias_gradients=epilogue", "--run.matmul_algorithms=timed"});
  EXPECT_EQ(options.attention, kernels::AttentionKernel::kFlash);
  EXPECT_EQ(options.matmul_epilogues, kernels::MatmulEpilogues::kSeparate);
  EXPECT_EQ(options.attention_blocks, 4);
  EXPECT_EQ(options.attention_batching, kernels::AttentionBatching::kPointers);
  EXPECT_EQ(options.flash_dq, kernels::FlashDq::kInKeyWalk);
  EXPECT_EQ(options.flash_block_order, kernels::FlashBlockOrder::kLongestFirst);
  EXPECT_EQ(options.flash_forward_products, kernels::FlashProducts::kWarpgroup);
  EXPECT_EQ(options.flash_forward_schedule, kernels::WarpgroupSchedule::kOverlapped);
  EXPECT_EQ(options.flash_backward_products, kernels::FlashProducts::kWarpgroup);
  EXPECT_EQ(options.flash_backward_schedule, kernels::WarpgroupSchedule::kInTurn);
  EXPECT_EQ(options.layernorm_sums, kernels::LayerNormParameterSums::kInRowWalk);
  EXPECT_EQ(options.cross_entropy_loads, kernels::CrossEntropyLoads::kPacks);
  EXPECT_EQ(options.adamw_loads, kernels::AdamWLoads::kPacks);
  EXPECT_EQ(options.matmul_backward_streams, kernels::MatmulBackwardStreams::kTwo);
  EXPECT_EQ(options.matmul_bias_gradients, kernels::MatmulBiasGradients::kEpilogue);
  EXPECT_EQ(options.matmul_algorithms, kernels::MatmulAlgorithms::kTimed);
  // The other way of each, named, is the default.
  const kernels::BackendOptions named = options_of(
      {"--run.flash_dq=separate", "--run.flash_block_order=head_by_head", "--run.flash_forward=mma_sync",
       "--run.flash_backward=mma_sync", "--run.layernorm_sums=separate", "--run.cross_entropy_loads=values",
       "--run.adamw_loads=values", "--run.matmul_backward_streams=one", "--run.matmul_bias_gradients=column_sums",
       "--run.matmul_algorithms=heuristic"});
  EXPECT_EQ(named.flash_dq, kernels::FlashDq::kSeparateWalk);
  EXPECT_EQ(named.flash_block_order, kernels::FlashBlockOrder::kHeadByHead);
  EXPECT_EQ(named.flash_forward_products, kernels::FlashProducts::kWarp);
  EXPECT_EQ(named.flash_backward_products, kernels::FlashProducts::kWarp);
  // The backward's overlap, the other way round.
  const kernels::BackendOptions overlapped = options_of({"--run.flash_backward=wgmma_overlapped"});
  EXPECT_EQ(overlapped.flash_backward_products, kernels::FlashProducts::kWarpgroup);
  EXPECT_EQ(overlapped.flash_backward_schedule, kernels::WarpgroupSchedule::kOverlapped);
  EXPECT_EQ(overlapped.flash_forward_products, kernels::FlashProducts::kWarp);
  // Two warpgroups a wgmma block (not with dQ in the key walk, so not in the run above).
  EXPECT_EQ(options_of({"--run.flash_backward=wgmma", "--run.flash_warpgroups=2"}).flash_warpgroups, 2);
  EXPECT_EQ(named.layernorm_sums, kernels::LayerNormParameterSums::kSeparatePass);
  EXPECT_EQ(named.cross_entropy_loads, kernels::CrossEntropyLoads::kValues);
  EXPECT_EQ(named.adamw_loads, kernels::AdamWLoads::kValues);
  EXPECT_EQ(named.matmul_backward_streams, kernels::MatmulBackwardStreams::kOne);
  EXPECT_EQ(named.matmul_bias_gradients, kernels::MatmulBiasGradients::kColumnSums);
  EXPECT_EQ(named.matmul_algorithms, kernels::MatmulAlgorithms::kHeuristic);
}

TEST(BackendOptions, AutoAttentionIsFlashOnlyOnTheTensorCores) {
  using kernels::AttentionKernel;
  using kernels::Device;
  // The schema's default is auto; GPT-2's heads have 64 channels (768 / 12).
  EXPECT_EQ(options_of({"--train.precision=bf16"}, Device::kCuda).attention, AttentionKernel::kFlash);
  EXPECT_EQ(options_of({"--train.precision=fp16"}, Device::kCuda).attention, AttentionKernel::kFlash);
  EXPECT_EQ(options_of({"--train.precision=fp32"}, Device::kCuda).attention, AttentionKernel::kGemm);
  EXPECT_EQ(options_of({"--train.precision=bf16"}, Device::kCpu).attention, AttentionKernel::kGemm);
  EXPECT_EQ(options_of({"--train.precision=bf16", "--model.heads=8"}, Device::kCuda).attention,
            AttentionKernel::kGemm);  // 96 channels a head
  // A deck's own choice stands (the deck refuses flash with run.device = cpu; train refuses it
  // where auto falls on the CPU).
  EXPECT_EQ(options_of({"--train.precision=bf16", "--run.attention=gemm"}, Device::kCuda).attention,
            AttentionKernel::kGemm);
  EXPECT_EQ(options_of({"--train.precision=fp32", "--run.device=cuda", "--run.attention=flash"}, Device::kCuda).attention,
            AttentionKernel::kFlash);
  EXPECT_EQ(options_of({"--run.device=auto", "--run.attention=flash"}, Device::kCpu).attention, AttentionKernel::kFlash);
  // A GPU whose blocks cannot have the flash kernels' shared memory (Turing): auto takes gemm, a
  // deck's flash stands (and the backend refuses it naming run.attention = gemm).
  EXPECT_EQ(options_of({"--train.precision=fp16"}, Device::kCuda, false).attention, AttentionKernel::kGemm);
  EXPECT_EQ(options_of({"--train.precision=fp16", "--run.device=cuda", "--run.attention=flash"}, Device::kCuda, false).attention,
            AttentionKernel::kFlash);
}

TEST(BackendOptions, Fp32NeverFusesEpilogues) {
  EXPECT_EQ(options_of({"--train.precision=fp32", "--run.matmul_epilogues=fused"}).matmul_epilogues,
            kernels::MatmulEpilogues::kSeparate);
  EXPECT_EQ(options_of({"--train.precision=fp16", "--run.matmul_epilogues=fused"}).matmul_epilogues,
            kernels::MatmulEpilogues::kFused);
}

}  // namespace
}  // namespace trident::app
