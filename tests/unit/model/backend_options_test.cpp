// backend_options: each deck key of the kernels reaches kernels::BackendOptions, with the
// defaults the deck schema gives, fp32 never fusing matmul epilogues, and run.attention = auto
// taking flash only where it runs on the tensor cores.
#include "src/app/backend_options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/deck.h"  // parse_deck, to_run_config

namespace trident::app {
namespace {

kernels::BackendOptions options_of(const std::vector<std::string>& overrides,
                                   kernels::Device device = kernels::Device::kCpu) {
  return backend_options(io::to_run_config(io::parse_deck("", "d.ini", overrides)), device);
}

TEST(BackendOptions, DefaultsAreTheBackendsDefaults) {
  // On the CPU run.attention = auto is the GEMM path, the backends' default.
  const kernels::BackendOptions deck = options_of({"--train.precision=bf16"});
  const kernels::BackendOptions plain;
  EXPECT_EQ(deck.attention, plain.attention);
  EXPECT_EQ(deck.matmul_epilogues, plain.matmul_epilogues);
  EXPECT_EQ(deck.attention_blocks, plain.attention_blocks);
  EXPECT_EQ(deck.attention_batching, plain.attention_batching);
}

TEST(BackendOptions, EveryKeyReachesItsOption) {
  const kernels::BackendOptions options =
      options_of({"--train.precision=bf16", "--run.attention=flash", "--run.matmul_epilogues=separate",
                  "--run.attention_blocks=4", "--run.attention_batching=pointers"});
  EXPECT_EQ(options.attention, kernels::AttentionKernel::kFlash);
  EXPECT_EQ(options.matmul_epilogues, kernels::MatmulEpilogues::kSeparate);
  EXPECT_EQ(options.attention_blocks, 4);
  EXPECT_EQ(options.attention_batching, kernels::AttentionBatching::kPointers);
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
  // A deck's own choice stands (train refuses flash on the CPU with its own error).
  EXPECT_EQ(options_of({"--train.precision=bf16", "--run.attention=gemm"}, Device::kCuda).attention,
            AttentionKernel::kGemm);
  EXPECT_EQ(options_of({"--train.precision=fp32", "--run.attention=flash"}, Device::kCuda).attention,
            AttentionKernel::kFlash);
  EXPECT_EQ(options_of({"--run.attention=flash"}, Device::kCpu).attention, AttentionKernel::kFlash);
}

TEST(BackendOptions, Fp32NeverFusesEpilogues) {
  EXPECT_EQ(options_of({"--train.precision=fp32", "--run.matmul_epilogues=fused"}).matmul_epilogues,
            kernels::MatmulEpilogues::kSeparate);
  EXPECT_EQ(options_of({"--train.precision=fp16", "--run.matmul_epilogues=fused"}).matmul_epilogues,
            kernels::MatmulEpilogues::kFused);
}

}  // namespace
}  // namespace trident::app
