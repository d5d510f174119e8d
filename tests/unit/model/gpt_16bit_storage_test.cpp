// 16-bit activation buffers (GptLayout::storage = bf16 | fp16) against fp32 buffers holding the
// rounded values. Both run through RoundedStorageBackend, which widens 16-bit operands for the
// fp32 kernels and narrows what they store: the numbers must be the same to the bit (a 16-bit
// buffer holds exactly the rounded value), while the arena takes half the bytes for the
// activations, and the staging workspace the backend grows is exactly what the estimate says.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kernels/backend.h"
#include "kernels/rounded_storage_backend.h"
#include "src/model/gpt.h"
#include "tests/support/native_16bit_kernels.h"  // Native16BitKernelsStandIn
#include "tests/unit/model/tiny_gpt.h"

using namespace trident;

using test_support::init_with_noise;
using test_support::random_tokens;
using test_support::tiny_config;

namespace {

struct StorageRun {
  std::vector<double> losses;      // per micro-batch
  std::vector<float> gradients;    // the whole gradient arena
  std::size_t activation_bytes = 0;
  std::size_t staging_floats = 0;  // what the backend grew to
  test_support::Native16BitCalls native_calls;  // calls that reached the inner backend in 16 bits
};

constexpr int kB = 2, kT = 7;

std::size_t cpu_scratch(const model::GptConfig& config) {
  return kernels::make_backend(kernels::Device::kCpu, 1)->attention_scratch_size(kB, kT, config.heads);
}

// Two accumulated micro-batches, twice (a second step reuses the grown workspace).
// native: the calls of these families with 16-bit operands go to an inner backend that reads 16
// bits itself (tests/support/native_16bit_kernels.h, as the CUDA backend's), not through the
// widening.
StorageRun train_two_steps(const model::GptConfig& config, kernels::Precision precision, kernels::Precision storage,
                           model::Recompute recompute, kernels::Native16BitKernels native_families = {}) {
  auto cpu = kernels::make_backend(kernels::Device::kCpu, 1);
  test_support::Native16BitKernelsStandIn native(*cpu, precision, native_families);
  kernels::RoundedStorageBackend backend(native, precision);
  model::Gpt gpt(config, backend, kB, kT, {.layout = {.recompute = recompute, .storage = storage}});
  init_with_noise(gpt, 7, precision);  // the fp32 arena holds the rounded weights, as the 16-bit one
  const auto tokens = random_tokens(2 * kB * kT, config.vocab, 11);
  const auto targets = random_tokens(2 * kB * kT, config.vocab, 12);
  StorageRun r;
  for (int step = 0; step < 2; ++step) {
    gpt.zero_gradients();
    for (int m = 0; m < 2; ++m) {
      r.losses.push_back(gpt.forward(tokens.data() + m * kB * kT, targets.data() + m * kB * kT));
      gpt.backward(1.0f / (2 * kB * kT), {});
    }
  }
  r.gradients.resize(gpt.params().total_count());
  backend.copy_to_host(r.gradients.data(), gpt.gradients(), r.gradients.size());
  r.activation_bytes = gpt.activation_bytes();
  r.staging_floats = backend.staging_floats();
  r.native_calls = native.calls;
  return r;
}

class Gpt16BitStorage : public ::testing::TestWithParam<kernels::Precision> {};

TEST_P(Gpt16BitStorage, LossesAndGradientsAreBitIdenticalToRoundedFp32Buffers) {
  const kernels::Precision p = GetParam();
  for (model::Recompute recompute : {model::Recompute::kNone, model::Recompute::kFull}) {
    const auto config = tiny_config(2);
    const StorageRun emulated = train_two_steps(config, p, kernels::Precision::kFp32, recompute);
    const StorageRun buffers = train_two_steps(config, p, p, recompute);
    ASSERT_EQ(emulated.losses.size(), buffers.losses.size());
    for (std::size_t m = 0; m < emulated.losses.size(); ++m) EXPECT_EQ(emulated.losses[m], buffers.losses[m]) << m;
    ASSERT_EQ(emulated.gradients.size(), buffers.gradients.size());
    std::size_t nonzero = 0;
    for (std::size_t i = 0; i < emulated.gradients.size(); ++i) {
      ASSERT_EQ(emulated.gradients[i], buffers.gradients[i]) << "element " << i;
      nonzero += buffers.gradients[i] != 0.0f;
    }
    EXPECT_GT(nonzero, emulated.gradients.size() / 2);  // the comparison covers real gradients
    // fp32 buffers never stage; the 16-bit ones staged exactly the estimated workspace.
    EXPECT_EQ(emulated.staging_floats, 0u);
    const auto sizes = model::activation_sizes(config, kB, kT, cpu_scratch(config),
                                               {.recompute = recompute, .storage = p});
    EXPECT_EQ(buffers.staging_floats, sizes.staging);
    EXPECT_EQ(buffers.activation_bytes, sizes.bytes(p));
  }
}

TEST_P(Gpt16BitStorage, MatmulsPassedToABackendThatReadsSixteenBitsGiveTheSameBitsAndStageLess) {
  const kernels::Precision p = GetParam();
  for (model::Recompute recompute : {model::Recompute::kNone, model::Recompute::kFull}) {
    const auto config = tiny_config(2);
    const StorageRun widened = train_two_steps(config, p, p, recompute);
    const StorageRun passed = train_two_steps(config, p, p, recompute, {.matmul = true});
    EXPECT_EQ(widened.losses, passed.losses);
    EXPECT_EQ(widened.gradients, passed.gradients);
    // Every block matmul went through: per micro-batch (2 steps x 2 of them) 2 layers x 4
    // matmuls forward and backward, and under kFull the re-run forward of the first block (the
    // workspace still holds the last one's); and the LM head's forward (16-bit inputs, fp32
    // logits), not its backward (fp32 dlogits).
    const int per_micro_batch = 2 * 4 * 2 + 1 + (recompute == model::Recompute::kFull ? 4 : 0);
    EXPECT_EQ(passed.native_calls.matmul, 2 * 2 * per_micro_batch);
    EXPECT_EQ(passed.native_calls.total(), passed.native_calls.matmul);
    EXPECT_EQ(widened.native_calls.total(), 0);
    // The staging holds only the other calls: exactly the estimate that leaves the block
    // matmuls out (here GELU backward's, the largest either way).
    const auto sizes = model::activation_sizes(config, kB, kT, cpu_scratch(config),
                                               {.recompute = recompute, .storage = p, .native_16bit = {.matmul = true}});
    EXPECT_EQ(passed.staging_floats, sizes.staging);
    EXPECT_LE(passed.staging_floats, widened.staging_floats);
  }
}

// Every family native, as on the CUDA backend under run.attention = flash: the logits are then
// 16-bit too (GptLayout::logits_16bit), the LM head's backward reads 16-bit dlogits, and
// nothing is widened at all. The same bits again, half the logits' bytes.
TEST_P(Gpt16BitStorage, EveryFamilyPassedToABackendThatReadsSixteenBitsStagesNothing) {
  const kernels::Precision p = GetParam();
  for (model::Recompute recompute : {model::Recompute::kNone, model::Recompute::kFull}) {
    const auto config = tiny_config(2);
    const StorageRun widened = train_two_steps(config, p, p, recompute);
    const StorageRun passed = train_two_steps(config, p, p, recompute, kernels::Native16BitKernels::all());
    EXPECT_EQ(widened.losses, passed.losses);
    EXPECT_EQ(widened.gradients, passed.gradients);
    // Per micro-batch: ln1 and the fused residual + ln2 forward, two LayerNorm backwards per
    // layer, ln_f forward and backward; GELU, attention forward and backward per layer; the
    // embedding forward and backward; the cross-entropy forward and backward; every matmul, the
    // LM head's both ways. The blocks' closing residual adds are fused into the next LayerNorm
    // (the second block's ln1, then ln_f): no add. kFull re-runs the forward of the first block
    // (the workspace holds the last one's) before its backward, that one with its own add.
    const bool full = recompute == model::Recompute::kFull;
    const int micro_batches = 2 * 2;
    EXPECT_EQ(passed.native_calls.layernorm, micro_batches * (2 * 4 + 2 + (full ? 2 : 0)));
    EXPECT_EQ(passed.native_calls.gelu, micro_batches * (2 * 2 + (full ? 1 : 0)));
    EXPECT_EQ(passed.native_calls.attention, micro_batches * (2 * 2 + (full ? 1 : 0)));
    EXPECT_EQ(passed.native_calls.add, micro_batches * (full ? 1 : 0));
    EXPECT_EQ(passed.native_calls.embedding, micro_batches * 2);
    EXPECT_EQ(passed.native_calls.cross_entropy, micro_batches * 2);
    EXPECT_EQ(passed.native_calls.matmul, micro_batches * (2 * 4 * 2 + 2 + (full ? 4 : 0)));
    const auto sizes = model::activation_sizes(
        config, kB, kT, cpu_scratch(config),
        {.recompute = recompute, .storage = p, .native_16bit = kernels::Native16BitKernels::all()});
    EXPECT_EQ(sizes.staging, 0u);
    EXPECT_EQ(passed.staging_floats, 0u);
    EXPECT_GT(widened.staging_floats, 0u);
    // The logits of the one slot in 16 bits instead of fp32, and no staging workspace.
    EXPECT_EQ(passed.activation_bytes, sizes.bytes(p));
    EXPECT_EQ(widened.activation_bytes - passed.activation_bytes,
              static_cast<std::size_t>(kB * kT) * static_cast<std::size_t>(config.padded_vocab) * 2 +
                  widened.staging_floats * sizeof(float));
  }
}

// Only the cross-entropy native (a backend whose matmuls widen): the logits are 16-bit, so the
// LM head's matmuls stage them, and the estimate counts that.
TEST_P(Gpt16BitStorage, SixteenBitLogitsWithWidenedMatmulsStageAsEstimated) {
  const kernels::Precision p = GetParam();
  const auto config = tiny_config(2);
  const StorageRun widened = train_two_steps(config, p, p, model::Recompute::kNone);
  const StorageRun passed = train_two_steps(config, p, p, model::Recompute::kNone, {.cross_entropy = true});
  EXPECT_EQ(widened.losses, passed.losses);
  EXPECT_EQ(widened.gradients, passed.gradients);
  EXPECT_EQ(passed.native_calls.cross_entropy, 2 * 2 * 2);
  const auto sizes = model::activation_sizes(config, kB, kT, cpu_scratch(config),
                                             {.storage = p, .native_16bit = {.cross_entropy = true}});
  EXPECT_EQ(passed.staging_floats, sizes.staging);
  // The larger of the MLP-down backward's operands (dinp and inp, 4·N·C each, dout N·C and the
  // 4·C·C weight) and the LM head's backward: dinp, the 16-bit dlogits, inp and wte.
  const std::size_t N = kB * kT, C = config.hidden, Vp = config.padded_vocab;
  EXPECT_EQ(sizes.staging, std::max(9 * N * C + 4 * C * C, 2 * N * C + N * Vp + Vp * C));
  // 16-bit logits only add operands to stage when the matmuls widen.
  EXPECT_GE(sizes.staging, model::activation_sizes(config, kB, kT, cpu_scratch(config), {.storage = p}).staging);
}

TEST_P(Gpt16BitStorage, LossesDifferFromFp32) {
  // The storage rounding is applied at all (else the comparison above proves nothing).
  const auto config = tiny_config(2);
  const StorageRun rounded = train_two_steps(config, GetParam(), GetParam(), model::Recompute::kNone);
  auto cpu = kernels::make_backend(kernels::Device::kCpu, 1);
  model::Gpt gpt(config, *cpu, kB, kT);
  init_with_noise(gpt, 7);
  const auto tokens = random_tokens(2 * kB * kT, config.vocab, 11);
  const auto targets = random_tokens(2 * kB * kT, config.vocab, 12);
  EXPECT_NE(gpt.forward(tokens.data(), targets.data()), rounded.losses[0]);
}

INSTANTIATE_TEST_SUITE_P(Bf16AndFp16, Gpt16BitStorage,
                         ::testing::Values(kernels::Precision::kBf16, kernels::Precision::kFp16),
                         [](const auto& param_info) { return std::string(kernels::precision_name(param_info.param)); });

TEST(Gpt16BitStorageSizes, ActivationsTakeHalfTheBytesAtGpt2Scale) {
  // GPT-2 124M, micro-batch 8, sequence 1024: the activations and their gradients halve; the
  // fp32 statistics, the logits and the attention workspace stay; the staging workspace is the
  // MLP-down backward's operands: dinp and inp [8192, 3072], dout [8192, 768], the weight.
  const model::GptConfig gpt2{12, 12, 768, 1024, 50257, 50304};
  const std::size_t scratch = 2ull * 8 * 12 * 1024 * 1024;
  const auto fp32 = model::activation_sizes(gpt2, 8, 1024, scratch, {});
  const auto bf16 = model::activation_sizes(gpt2, 8, 1024, scratch, {.storage = kernels::Precision::kBf16});
  EXPECT_EQ(fp32.stored, bf16.stored);
  EXPECT_EQ(fp32.fp32, bf16.fp32);
  EXPECT_EQ(fp32.staging, 0u);
  EXPECT_EQ(bf16.staging, 9 * 8192ull * 768 + 4 * 768 * 768);
  EXPECT_EQ(bf16.bytes(kernels::Precision::kBf16), 2 * bf16.stored + 4 * (bf16.fp32 + bf16.staging));
  EXPECT_LT(bf16.bytes(kernels::Precision::kBf16), fp32.bytes(kernels::Precision::kFp32));
  EXPECT_EQ(model::activation_floats(gpt2, 8, 1024, scratch, {}), fp32.stored + fp32.fp32);
}

TEST(Gpt16BitStorageSizes, StagingFollowsTheLargestCallOnEveryTensorLayout) {
  // GPT-2 124M, micro-batch 8, T 1024 (BTC = 8192 x 768). The largest call's 16-bit operands,
  // activations and weights: tp 1 and 2, the MLP-down backward's 8 BTC / tp + BTC + its weight
  // (4 C C / tp; GELU backward runs in place, 8 BTC / tp); tp 4 with sequence
  // parallelism, the LM head's backward (dinp and inp, 2 BTC, and its vocabulary shard of wte,
  // 12576 x 768); tp 8, a LayerNorm backward's three full-row buffers and its weight (3 BTC + C)
  // or, with sequence parallelism, the LM head's backward again.
  const model::GptConfig gpt2{12, 16, 768, 1024, 50257, 50304};
  const std::size_t btc = 8192ull * 768, scratch = 0;
  auto staging = [&](int tp, bool sp) {
    return model::activation_sizes(gpt2, 8, 1024, scratch,
                                   {.tp = tp, .sequence_parallel = sp, .storage = kernels::Precision::kBf16})
        .staging;
  };
  EXPECT_EQ(staging(1, false), 9 * btc + 4 * 768 * 768);
  EXPECT_EQ(staging(2, false), 5 * btc + 4 * 384 * 768);
  EXPECT_EQ(staging(4, true), 2 * btc + 12576 * 768);
  EXPECT_EQ(staging(8, false), 3 * btc + 768);
  EXPECT_EQ(staging(8, true), 2 * btc + 6288 * 768);
  // A last stage without blocks: the LM head's backward (ln_f's, 3 BTC + C, is smaller).
  const model::GptLayout head_only{.pp = 2, .pp_rank = 1, .layers_per_stage = {12, 0},
                                   .storage = kernels::Precision::kBf16};
  EXPECT_EQ(model::activation_sizes(gpt2, 8, 1024, scratch, head_only).staging, 2 * btc + 50304 * 768);
  model::GptLayout head_only_sp = head_only;
  head_only_sp.tp = 4;
  head_only_sp.sequence_parallel = true;
  EXPECT_EQ(model::activation_sizes(gpt2, 8, 1024, scratch, head_only_sp).staging, 2 * btc + 12576 * 768);
  // A first stage: the embedding's output with its wte shard and, on tensor rank 0 only, wpe.
  const model::GptLayout embedding_only{.tp = 2, .tp_rank = 1, .pp = 2, .layers_per_stage = {0, 12},
                                        .storage = kernels::Precision::kBf16};
  EXPECT_EQ(model::activation_sizes(gpt2, 8, 1024, scratch, embedding_only).staging, btc + 25152 * 768);
  model::GptLayout embedding_rank0 = embedding_only;
  embedding_rank0.tp_rank = 0;
  EXPECT_EQ(model::activation_sizes(gpt2, 8, 1024, scratch, embedding_rank0).staging, btc + 25152 * 768 + 1024 * 768);
}

}  // namespace
