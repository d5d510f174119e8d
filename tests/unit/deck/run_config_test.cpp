// to_run_config: typed values, and one test per check between keys (each names both keys,
// their values and a value that would work).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/deck.h"  // parse_deck, to_run_config
#include "tests/unit/deck/deck_test_support.h"  // user_error_of

namespace trident::io {
namespace {

using testing_support::user_error_of;

RunConfig config_of(const std::vector<std::string>& overrides) {
  return to_run_config(parse_deck("", "d.ini", overrides));
}

std::string config_error(const std::vector<std::string>& overrides) {
  return user_error_of([&] { config_of(overrides); });
}

TEST(RunConfig, DefaultsBecomeTypedValues) {
  const RunConfig config = config_of({});
  EXPECT_EQ(config.run.dir, "run");
  EXPECT_EQ(config.run.seed, 1234u);
  EXPECT_EQ(config.run.device, "cpu");
  EXPECT_EQ(config.run.threads, 0);
  EXPECT_EQ(config.model.layers, 12);
  EXPECT_EQ(config.model.heads, 12);
  EXPECT_EQ(config.model.hidden, 768);
  EXPECT_EQ(config.model.context, 1024);
  EXPECT_EQ(config.model.vocab, 50257);
  EXPECT_EQ(config.model.vocab_multiple, 128);
  EXPECT_EQ(config.data.path, "data/tokens.h5");
  EXPECT_EQ(config.data.generate, "none");
  EXPECT_EQ(config.data.synthetic_vocab, 32);
  EXPECT_EQ(config.data.synthetic_order, 2);
  EXPECT_EQ(config.data.synthetic_branching, 4);
  EXPECT_EQ(config.data.synthetic_tokens, 2000000);
  EXPECT_DOUBLE_EQ(config.data.val_fraction, 0.05);
  EXPECT_EQ(config.train.steps, 100);
  EXPECT_EQ(config.train.global_batch, 8);
  EXPECT_EQ(config.train.micro_batch, 8);
  EXPECT_EQ(config.train.seq_len, 1024);
  EXPECT_EQ(config.train.eval_every, 0);
  EXPECT_EQ(config.train.eval_batches, 4);
  EXPECT_DOUBLE_EQ(config.optim.lr, 6e-4);
  EXPECT_DOUBLE_EQ(config.optim.min_lr, 6e-5);
  EXPECT_EQ(config.optim.warmup_steps, 0);
  EXPECT_EQ(config.optim.decay_steps, 0);
  EXPECT_DOUBLE_EQ(config.optim.beta1, 0.9);
  EXPECT_DOUBLE_EQ(config.optim.beta2, 0.95);
  EXPECT_DOUBLE_EQ(config.optim.eps, 1e-8);
  EXPECT_DOUBLE_EQ(config.optim.weight_decay, 0.1);
  EXPECT_DOUBLE_EQ(config.optim.grad_clip, 1.0);
  EXPECT_EQ(config.parallel.dp, 0);
  EXPECT_EQ(config.parallel.tp, 1);
  EXPECT_EQ(config.parallel.pp, 1);
  EXPECT_DOUBLE_EQ(config.parallel.bucket_mb, 25.0);
  EXPECT_EQ(config.log.every, 10);
  EXPECT_DOUBLE_EQ(config.log.peak_tflops, 0.0);
}

TEST(RunConfig, GivenValuesReachTheirFields) {
  const RunConfig config = config_of({"--run.seed=9223372036854775807", "--run.device=cuda",
                                      "--optim.lr=3e-4", "--data.generate=synthetic"});
  EXPECT_EQ(config.run.seed, 9223372036854775807u);
  EXPECT_EQ(config.run.device, "cuda");
  EXPECT_DOUBLE_EQ(config.optim.lr, 3e-4);
  EXPECT_EQ(config.data.generate, "synthetic");
}

// parallel.grad_reduce = auto (the default) becomes the training precision; an explicit value
// stays.
TEST(RunConfig, GradientReductionFollowsThePrecisionUnlessGiven) {
  EXPECT_EQ(config_of({}).parallel.grad_reduce, "fp32");
  EXPECT_EQ(config_of({"--train.precision=bf16"}).parallel.grad_reduce, "bf16");
  EXPECT_EQ(config_of({"--train.precision=fp16"}).parallel.grad_reduce, "fp16");
  EXPECT_EQ(config_of({"--train.precision=bf16", "--parallel.grad_reduce=fp32"}).parallel.grad_reduce, "fp32");
}

TEST(RunConfig, IntegerBeyondIntIsOutOfRange) {
  const std::string message = config_error({"--run.threads=3000000000"});
  EXPECT_EQ(message.rfind("run.threads = 3000000000 is out of range", 0), 0u) << message;
}

TEST(RunConfig, HeadsMustDivideHidden) {
  EXPECT_EQ(config_error({"--model.heads=10"}),
            "model.heads = 10 does not divide model.hidden = 768 (each head gets hidden / "
            "heads channels: use model.heads = 8 or 12, or a model.hidden that is a multiple "
            "of 10)");
}

TEST(RunConfig, FlashAttentionNeedsHeadsOf64Channels) {
  EXPECT_EQ(config_of({}).run.attention, "auto");  // the default
  EXPECT_EQ(config_of({"--run.attention=gemm"}).run.attention, "gemm");
  EXPECT_EQ(config_of({"--run.attention=flash", "--run.device=auto"}).run.attention, "flash");  // 768 / 12 = 64
  EXPECT_EQ(config_of({"--run.attention=flash", "--run.device=cuda"}).run.attention, "flash");
  // The CPU has no flash attention: refused by the deck, so that check refuses it as train does.
  EXPECT_EQ(config_error({"--run.attention=flash", "--run.device=cpu"}),
            "run.attention = flash: only the CUDA backend has flash attention, but run.device = cpu (use "
            "run.attention = gemm, or run.device = cuda or auto)");
  EXPECT_EQ(config_error({"--run.attention=flash", "--run.device=auto", "--model.heads=8"}),
            "run.attention = flash needs heads of 64 channels, but model.hidden = 768 / model.heads = 8 = 96 "
            "(use run.attention = gemm, or model.heads = 12)");
}

TEST(RunConfig, AttentionScheduleKeys) {
  EXPECT_EQ(config_of({}).run.attention_blocks, 4);  // the defaults: the schedule fastest on one H100
  EXPECT_EQ(config_of({}).run.attention_batching, "pointers");
  EXPECT_EQ(config_of({"--run.attention_blocks=1"}).run.attention_blocks, 1);
  EXPECT_EQ(config_of({"--run.attention_batching=strided"}).run.attention_batching, "strided");
  const std::string message = config_error({"--run.attention_blocks=0"});
  EXPECT_EQ(message.rfind("run.attention_blocks = 0", 0), 0u) << message;
}

TEST(RunConfig, KernelChoicesWaitingForTheirTiming) {
  EXPECT_EQ(config_of({}).run.flash_dq, "separate");  // the defaults until a GPU times the others
  EXPECT_EQ(config_of({}).run.flash_block_order, "head_by_head");
  EXPECT_EQ(config_of({}).run.layernorm_sums, "separate");
  EXPECT_EQ(config_of({}).run.cross_entropy_loads, "values");
  EXPECT_EQ(config_of({}).run.adamw_loads, "values");
  EXPECT_EQ(config_of({}).run.matmul_backward_streams, "one");
  EXPECT_EQ(config_of({"--run.flash_dq=key_walk"}).run.flash_dq, "key_walk");
  EXPECT_EQ(config_of({"--run.flash_block_order=longest_first"}).run.flash_block_order, "longest_first");
  EXPECT_EQ(config_of({"--run.layernorm_sums=row_walk"}).run.layernorm_sums, "row_walk");
  EXPECT_EQ(config_of({"--run.cross_entropy_loads=packs"}).run.cross_entropy_loads, "packs");
  EXPECT_EQ(config_of({"--run.adamw_loads=packs"}).run.adamw_loads, "packs");
  EXPECT_EQ(config_of({"--run.matmul_backward_streams=two"}).run.matmul_backward_streams, "two");
  EXPECT_EQ(config_of({}).run.matmul_bias_gradients, "column_sums");
  EXPECT_EQ(config_of({"--run.matmul_bias_gradients=epilogue"}).run.matmul_bias_gradients, "epilogue");
  EXPECT_EQ(config_of({}).run.matmul_algorithms, "heuristic");
  EXPECT_EQ(config_of({"--run.matmul_algorithms=timed"}).run.matmul_algorithms, "timed");
  EXPECT_EQ(config_of({}).run.flash_forward, "mma_sync");
  EXPECT_EQ(config_of({}).run.flash_backward, "mma_sync");
  EXPECT_EQ(config_of({"--run.flash_forward=wgmma_overlapped"}).run.flash_forward, "wgmma_overlapped");
  EXPECT_EQ(config_of({"--run.flash_backward=wgmma"}).run.flash_backward, "wgmma");
  const std::string message = config_error({"--run.flash_dq=atomic"});
  EXPECT_EQ(message, "run.flash_dq = 'atomic' is not one of: separate, key_walk");
  EXPECT_EQ(config_error({"--run.flash_forward=wmma"}),
            "run.flash_forward = 'wmma' is not one of: mma_sync, wgmma, wgmma_overlapped");
}

// The overlapped wgmma backward makes dQ in its own walk: the deck says so before a GPU does.
TEST(RunConfig, OverlappedWarpgroupBackwardRefusesDqInTheKeyWalk) {
  EXPECT_EQ(config_error({"--run.flash_backward=wgmma_overlapped", "--run.flash_dq=key_walk"}),
            "run.flash_backward = wgmma_overlapped makes dQ in its own walk, but run.flash_dq = key_walk (use "
            "run.flash_dq = separate, or run.flash_backward = wgmma)");
  EXPECT_EQ(config_of({"--run.flash_backward=wgmma", "--run.flash_dq=key_walk"}).run.flash_dq, "key_walk");
  EXPECT_EQ(config_of({"--run.flash_backward=wgmma_overlapped"}).run.flash_dq, "separate");
  // run.flash_warpgroups: the wgmma kernels' blocks; 1 by default, 2 only with a wgmma kernel and,
  // where the backward takes wgmma, dQ in its own walk.
  EXPECT_EQ(config_of({}).run.flash_warpgroups, 1);
  EXPECT_EQ(config_of({"--run.flash_forward=wgmma", "--run.flash_warpgroups=2"}).run.flash_warpgroups, 2);
  EXPECT_EQ(config_of({"--run.flash_forward=wgmma", "--run.flash_warpgroups=2", "--run.flash_dq=key_walk"})
                .run.flash_warpgroups,
            2);  // the forward's blocks, with the mma.sync backward's dQ in the key walk
  EXPECT_EQ(config_error({"--run.flash_warpgroups=2"}),
            "run.flash_warpgroups = 2 sets the wgmma kernels' blocks, but run.flash_forward = mma_sync and "
            "run.flash_backward = mma_sync (use run.flash_forward or run.flash_backward = wgmma, or "
            "run.flash_warpgroups = 1)");
  EXPECT_EQ(config_error({"--run.flash_backward=wgmma", "--run.flash_warpgroups=2", "--run.flash_dq=key_walk"}),
            "run.flash_warpgroups = 2 makes the wgmma backward's dQ in its own walk, but run.flash_dq = key_walk "
            "(use run.flash_dq = separate, or run.flash_warpgroups = 1)");
  EXPECT_NE(config_error({"--run.flash_forward=wgmma", "--run.flash_warpgroups=3"}).find("run.flash_warpgroups"),
            std::string::npos);
}

TEST(RunConfig, MicroBatchMustDivideGlobalBatch) {
  EXPECT_EQ(config_error({"--train.global_batch=10", "--train.micro_batch=4"}),
            "train.global_batch = 10 is not a multiple of train.micro_batch = 4 (use "
            "train.global_batch = 8 or 12, or a train.micro_batch that divides 10)");
  const std::string smaller = config_error({"--train.global_batch=2", "--train.micro_batch=4"});
  EXPECT_NE(smaller.find("use train.global_batch = 4,"), std::string::npos) << smaller;
}

TEST(RunConfig, SequenceMustFitTheContext) {
  EXPECT_EQ(config_error({"--train.seq_len=2048"}),
            "train.seq_len = 2048 is larger than model.context = 1024 (use train.seq_len <= "
            "1024, or model.context = 2048)");
  EXPECT_EQ(config_of({"--train.seq_len=1024"}).train.seq_len, 1024);
}

TEST(RunConfig, MinimumLearningRateMustNotExceedPeak) {
  const std::string message = config_error({"--optim.min_lr=1e-3"});
  EXPECT_EQ(message.rfind("optim.min_lr = 0.001 is larger than optim.lr = 6e-4", 0), 0u)
      << message;
  EXPECT_NE(message.find("use optim.min_lr <= 6e-4"), std::string::npos) << message;
  EXPECT_DOUBLE_EQ(config_of({"--optim.min_lr=6e-4"}).optim.min_lr, 6e-4);
}

TEST(RunConfig, WarmupMustEndBeforeTheDecay) {
  const std::string message =
      config_error({"--optim.warmup_steps=200", "--optim.decay_steps=100"});
  EXPECT_EQ(message.rfind("optim.warmup_steps = 200 is larger than optim.decay_steps = 100", 0),
            0u)
      << message;
  EXPECT_NE(message.find("optim.decay_steps = 0"), std::string::npos) << message;
  // decay_steps = 0 means "decay over train.steps": no relation to check here.
  EXPECT_EQ(config_of({"--optim.warmup_steps=200"}).optim.warmup_steps, 200);
}

// The optimizer computes in fp32: an eps that is 0 there, or a beta that is 1 there, made every
// update NaN, reported as diverged gradients.
TEST(RunConfig, OptimizerConstantsMustSurviveFp32) {
  EXPECT_EQ(config_error({"--optim.eps=5e-324"}).rfind("optim.eps = 5e-324 is below the smallest normal fp32 number", 0),
            0u);
  EXPECT_EQ(config_error({"--optim.beta2=0.9999999999999999"}).rfind("optim.beta2 = 0.9999999999999999 rounds to 1 in fp32", 0),
            0u);
  EXPECT_EQ(config_error({"--optim.beta1=0.99999999"}).rfind("optim.beta1 = 0.99999999 rounds to 1 in fp32", 0), 0u);
  EXPECT_DOUBLE_EQ(config_of({"--optim.beta2=0.99999994"}).optim.beta2, 0.99999994);
  EXPECT_DOUBLE_EQ(config_of({"--optim.eps=1e-30"}).optim.eps, 1e-30);
}

// A micro-batch whose widest tensor is beyond 2^40 elements is refused: its byte counts would
// otherwise wrap in 64 bits (check's memory table did, at 2^24 sequences of 2^20 tokens).
TEST(RunConfig, MicroBatchTensorsStayInsideTheByteCounts) {
  const std::string message = config_error({"--train.micro_batch=16777216", "--train.global_batch=16777216"});
  EXPECT_EQ(message.rfind("train.micro_batch = 16777216 and train.seq_len = ", 0), 0u) << message;
  EXPECT_NE(message.find("more than 2^40"), std::string::npos) << message;
  // 2^40 elements exactly is allowed: 2^20 rows of one head's 2^20 attention scores; a second
  // head is refused.
  const std::vector<std::string> one_head = {"--train.micro_batch=1", "--train.global_batch=1", "--model.heads=1",
                                             "--train.seq_len=1048576", "--model.context=1048576"};
  EXPECT_EQ(config_of(one_head).train.seq_len, 1048576);
  std::vector<std::string> two_heads = one_head;
  two_heads[2] = "--model.heads=2";
  EXPECT_NE(config_error(two_heads).find("would hold 2.2e+12 elements"), std::string::npos) << config_error(two_heads);
}

}  // namespace
}  // namespace trident::io
