// Learning-rate schedule, progress line, FLOP count, memory estimate and thread default.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "kernels/timing_backend.h"
#include "src/app/memory_estimate.h"
#include "src/app/threads.h"
#include "parallel/zero_shard.h"
#include "src/train/adamw.h"
#include "src/model/gpt.h"
#include "src/train/lr_schedule.h"
#include "src/train/peak_flops.h"
#include "src/train/pipeline_plan.h"
#include "src/train/progress_line.h"

using namespace trident;

TEST(LrSchedule, WarmupThenCosineToFloor) {
  train::LrSchedule s{1.0, 0.1, 10, 110};
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.at(9), 1.0);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);
  EXPECT_NEAR(s.at(60), 0.55, 1e-12);  // half-way: floor + (peak - floor) / 2
  EXPECT_DOUBLE_EQ(s.at(110), 0.1);
  EXPECT_DOUBLE_EQ(s.at(500), 0.1);
  for (int64_t i = 11; i < 110; ++i) EXPECT_LT(s.at(i), s.at(i - 1));
}

// Warm-up ending where the decay does: the peak once, then min_lr (docs/model.md), not the peak
// for the rest of the run.
TEST(LrSchedule, DecayEndingWithTheWarmupGivesTheFloorAfterIt) {
  train::LrSchedule s{3e-3, 3e-4, 4, 4};
  EXPECT_DOUBLE_EQ(s.at(0), 7.5e-4);
  EXPECT_DOUBLE_EQ(s.at(3), 3e-3);
  EXPECT_DOUBLE_EQ(s.at(4), 3e-4);
  EXPECT_DOUBLE_EQ(s.at(100), 3e-4);
}

TEST(LrSchedule, NoWarmupStartsAtPeak) {
  train::LrSchedule s{3e-4, 3e-5, 0, 100};
  EXPECT_DOUBLE_EQ(s.at(0), 3e-4);
}

TEST(PeakFlops, KnownGpusGiveTheirDatasheetPeakForThePrecision) {
  std::string which;
  EXPECT_EQ(train::datasheet_peak_flops("cuda (NVIDIA H100 80GB HBM3, sm_90)", kernels::Precision::kBf16, which), 989e12);
  EXPECT_EQ(which, "H100 SXM, dense bf16");
  EXPECT_EQ(train::datasheet_peak_flops("cuda (NVIDIA H100 80GB HBM3, sm_90)", kernels::Precision::kFp32, which), 67e12);
  EXPECT_EQ(which, "H100 SXM, fp32");
  EXPECT_EQ(train::datasheet_peak_flops("cuda (NVIDIA H100 PCIe, sm_90)", kernels::Precision::kFp16, which), 756e12);
  EXPECT_EQ(train::datasheet_peak_flops("cuda (NVIDIA H200, sm_90)", kernels::Precision::kBf16, which), 989e12);
  EXPECT_EQ(train::datasheet_peak_flops("cuda (NVIDIA A100-SXM4-80GB, sm_80)", kernels::Precision::kBf16, which), 312e12);
  // Unknown GPUs and CPUs: none (the caller measures instead).
  EXPECT_EQ(train::datasheet_peak_flops("cuda (NVIDIA L4, sm_89)", kernels::Precision::kBf16, which), 0.0);
  EXPECT_EQ(train::datasheet_peak_flops("cpu (OpenBLAS, 2 threads)", kernels::Precision::kBf16, which), 0.0);
}

// The measured peak (no datasheet entry: CPUs) times products until its window is full: the
// TimingBackend counts them and adds up the time they took.
TEST(PeakFlops, MeasurementFillsItsWindow) {
  const auto cpu = kernels::make_backend(kernels::Device::kCpu, 1);
  kernels::TimingBackend timing(*cpu);
  timing.set_measuring(true);
  const double flops = train::measure_matmul_flops(timing);
  ASSERT_EQ(timing.totals().size(), 1u);
  const kernels::KernelTime& products = timing.totals().begin()->second;
  EXPECT_GE(products.calls, 1 + train::kPeakMinProducts);  // the warm-up and the minimum
  EXPECT_LE(products.calls, 1 + train::kPeakMaxProducts);
  // The timer here sees each product from inside the one of measure_matmul_flops, a few
  // microseconds shorter per call of milliseconds: 0.9 of the window leaves room for that.
  if (products.calls < 1 + train::kPeakMaxProducts) {
    EXPECT_GE(products.seconds, 0.9 * train::kPeakWindowSeconds);
  }
  EXPECT_GT(flops, 0.0);
}

TEST(FlopCount, Gpt2SmallMatchesSixNPlusAttention) {
  model::GptConfig c{12, 12, 768, 1024, 50257, 50304};
  const double n = 12.0 * 12 * 768 * 768 + 50257.0 * 768;
  EXPECT_DOUBLE_EQ(c.flops_per_token(1024), 6 * n + 6.0 * 12 * 1024 * 768);
}

TEST(ProgressLine, ReportsMfuAndEta) {
  // 1000 tokens per step at 1e6 FLOP per token against a 1e10 FLOP/s peak: a 0.2 s step is 50%.
  train::ProgressLine p(10, 1000, 1e6, 1e10);
  p.record(1.0);  // first step excluded from the ETA
  p.record(0.2);
  EXPECT_NEAR(p.mfu(0.2), 0.5, 1e-12);
  const std::string line = p.line(2, 3.5, 1e-3, 0.7, 0.2, NAN);
  EXPECT_NE(line.find("MFU 50.0%"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA 2s"), std::string::npos) << line;  // 8 steps x 0.2 s
  EXPECT_EQ(line.find("val loss"), std::string::npos);
  EXPECT_EQ(train::format_duration(3725), "1h02m");
  // An overflowed fp16 step, a diverged one: no "-nan".
  EXPECT_NE(p.line(3, 3.5, 1e-3, -NAN, 0.2, NAN).find("grad norm nan |"), std::string::npos);
  EXPECT_NE(p.line(3, 3.5, 1e-3, INFINITY, 0.2, NAN).find("grad norm inf |"), std::string::npos);
}

TEST(MemoryEstimate, MatchesWhatTheTrainerAllocates) {
  model::GptConfig c{2, 2, 8, 8, 11, 16};
  auto backend = kernels::make_backend(kernels::Device::kCpu, 1);
  const std::size_t count = model::build_gpt_param_table(c).total_count();
  for (int dp : {1, 3}) {
    // The trainer pads the arenas to its shard arithmetic (parallel/zero_shard.h).
    const auto shard = parallel::shard_arena(count, dp, 0);
    model::Gpt gpt(c, *backend, 3, 7, {.arena_size = shard.padded_size});
    const auto m = app::estimate_memory(c, 3, 7, backend->attention_scratch_size(3, 7, 2), {}, dp);
    EXPECT_EQ(m.activations, gpt.activation_bytes());
    EXPECT_EQ(m.parameters, gpt.arena_size() * sizeof(float));
    EXPECT_EQ(m.gradients, m.parameters);
    // AdamW's state: two moments of this rank's block (the whole table without ZeRO).
    train::AdamW adamw(gpt.params(), *backend, {}, shard.begin, shard.end);
    EXPECT_EQ(m.optimizer, adamw.state_bytes()) << "dp " << dp;
    // Mixed precision adds the fp32 master weights of the same block.
    const auto mixed = app::estimate_memory(c, 3, 7, backend->attention_scratch_size(3, 7, 2), {}, dp, true);
    train::AdamW master(gpt.params(), *backend, {}, shard.begin, shard.end, kernels::Precision::kBf16);
    EXPECT_EQ(mixed.optimizer, master.state_bytes()) << "dp " << dp;
    const std::size_t mask = kernels::adamw_decay_mask_words(std::min(shard.block, count)) * sizeof(int32_t);
    EXPECT_EQ(mixed.optimizer - mask, (m.optimizer - mask) / 2 * 3);
  }
  // ZeRO-1 over 4 ranks keeps about a quarter of the optimizer state.
  model::GptConfig big{12, 12, 768, 1024, 50257, 50304};
  const auto whole = app::estimate_memory(big, 1, 64, 0, {}, 1);
  const auto sharded = app::estimate_memory(big, 1, 64, 0, {}, 4);
  EXPECT_NEAR(static_cast<double>(sharded.optimizer), static_cast<double>(whole.optimizer) / 4.0, 64.0 * 4);
}

TEST(MemoryEstimate, PipelineStagesHoldTheirLayersAndMicroBatchesInFlight) {
  // 3 layers on 2 stages (2 + 1), two micro-batches in flight, with and without recomputation.
  model::GptConfig c{3, 2, 8, 8, 11, 16};
  auto backend = kernels::make_backend(kernels::Device::kCpu, 1);
  const std::size_t scratch = backend->attention_scratch_size(3, 7, 2);
  for (auto recompute : {model::Recompute::kNone, model::Recompute::kFull}) {
    std::size_t params_over_stages = 0;
    for (int stage = 0; stage < 2; ++stage) {
      const model::GptLayout layout{.pp = 2, .pp_rank = stage, .slots = 2, .recompute = recompute};
      model::Gpt gpt(c, *backend, 3, 7, {.layout = layout});
      const auto m = app::estimate_memory(c, 3, 7, scratch, layout, 1);
      EXPECT_EQ(m.activations, gpt.activation_bytes()) << "stage " << stage;
      EXPECT_EQ(m.layers, stage == 0 ? 2 : 1);
      EXPECT_EQ(gpt.stage().first, stage == 0);
      EXPECT_EQ(gpt.stage().last, stage == 1);
      params_over_stages += gpt.params().total_count();
    }
    // Every tensor on exactly one stage, except the tied embedding, held by the first and last.
    const auto whole = model::build_gpt_param_table(c);
    EXPECT_EQ(params_over_stages, whole.total_count() + whole.find("wte").count);
  }
}

TEST(MemoryEstimate, InterleavedStagesHoldEveryChunk) {
  // 5 layers over 2 stages x 2 chunks = 4 virtual stages (2 + 1 + 1 + 1): stage 0 holds layers
  // {0, 1} and {3}, stage 1 holds {2} and {4}; two micro-batches in flight per chunk.
  model::GptConfig c{5, 2, 8, 8, 11, 16};
  auto backend = kernels::make_backend(kernels::Device::kCpu, 1);
  const std::size_t scratch = backend->attention_scratch_size(3, 7, 2);
  for (auto recompute : {model::Recompute::kNone, model::Recompute::kFull}) {
    std::size_t params_over_stages = 0;
    for (int stage = 0; stage < 2; ++stage) {
      const model::GptLayout layout{.pp = 2, .pp_rank = stage, .chunks = 2, .slots = 2, .recompute = recompute};
      model::Gpt gpt(c, *backend, 3, 7, {.layout = layout});
      const auto m = app::estimate_memory(c, 3, 7, scratch, layout, 1);
      EXPECT_EQ(m.activations, gpt.activation_bytes()) << "stage " << stage;
      EXPECT_EQ(m.layers, stage == 0 ? 3 : 2);
      ASSERT_EQ(gpt.stage().chunks.size(), 2u);
      EXPECT_EQ(gpt.stage().chunks[0].first_layer, stage == 0 ? 0 : 2);
      EXPECT_EQ(gpt.stage().chunks[1].first_layer, stage == 0 ? 3 : 4);
      EXPECT_EQ(gpt.stage().first, stage == 0);
      EXPECT_EQ(gpt.stage().last, stage == 1);
      EXPECT_TRUE(gpt.stage().chunks[0].first == (stage == 0));
      EXPECT_TRUE(gpt.stage().chunks[1].last == (stage == 1));
      params_over_stages += gpt.params().total_count();
    }
    const auto whole = model::build_gpt_param_table(c);
    EXPECT_EQ(params_over_stages, whole.total_count() + whole.find("wte").count);
  }
}

// Interleaved chunks are unevenly busy: each holds slots for its own peak (p = 4, m = 8, v = 2:
// 8 + 4 on stage 0, 5 + 1 on stage 3, where one count for both chunks held 8 + 8 and 5 + 5), and
// the model carves, and the estimate counts, exactly those.
TEST(PipelinePlan, InterleavedChunksHoldSlotsForTheirOwnPeak) {
  const std::vector<std::vector<int>> expected = {{8, 4}, {8, 4}, {7, 3}, {5, 1}};
  for (int stage = 0; stage < 4; ++stage) {
    EXPECT_EQ(train::plan_pipeline("interleaved", 4, stage, 8, 2).slots, expected[static_cast<std::size_t>(stage)]);
  }
  EXPECT_EQ(train::plan_pipeline("1f1b", 4, 1, 8).slots, std::vector<int>{3});
  // Each chunk's last backward (the last micro-batch's), the later chunk's first.
  for (int stage = 0; stage < 2; ++stage) {
    const train::PipelinePlan plan = train::plan_pipeline("interleaved", 2, stage, 4, 2);
    ASSERT_EQ(plan.last_backward.size(), 2u);
    EXPECT_GT(plan.last_backward[0], plan.last_backward[1]) << stage;
    for (int c = 0; c < 2; ++c) {
      const auto& a = plan.actions[plan.last_backward[static_cast<std::size_t>(c)]];
      EXPECT_EQ(a.kind, parallel::ActionKind::kBackward);
      EXPECT_EQ(a.chunk, c);
      EXPECT_EQ(a.micro_batch, 3);
    }
  }
  const train::PipelinePlan one = train::plan_pipeline("1f1b", 1, 0, 3);
  EXPECT_EQ(one.last_backward, std::vector<std::size_t>{one.actions.size() - 1});
  EXPECT_EQ(train::plan_pipeline("gpipe", 4, 1, 8).slots, std::vector<int>{8});

  model::GptConfig c{8, 2, 8, 8, 11, 16};  // 8 layers over 4 virtual stages of 2 stages x 2 chunks
  auto backend = kernels::make_backend(kernels::Device::kCpu, 1);
  const std::size_t scratch = backend->attention_scratch_size(3, 7, 2);
  const model::GptLayout even{.pp = 2, .pp_rank = 0, .chunks = 2, .slots = 4};
  model::GptLayout uneven = even;
  uneven.chunk_slots = {4, 2};
  model::GptLayout one_each = even;
  one_each.slots = 1;
  model::Gpt gpt(c, *backend, 3, 7, {.layout = uneven});
  EXPECT_EQ(app::estimate_memory(c, 3, 7, scratch, uneven, 1).activations, gpt.activation_bytes());
  EXPECT_EQ(app::estimate_memory(c, 3, 7, scratch, uneven, 1).slots, "4+2");
  // Each chunk's slots cost the same here (two layers each, neither holds the head): 6 of 8.
  const auto per_slot = (model::activation_bytes(c, 3, 7, scratch, even) -
                         model::activation_bytes(c, 3, 7, scratch, one_each)) / 6;
  EXPECT_EQ(model::activation_bytes(c, 3, 7, scratch, even) - model::activation_bytes(c, 3, 7, scratch, uneven),
            2 * per_slot);
}

TEST(Threads, DefaultSharesTheNodeAndNeverDropsBelowOne) {
  const int alone = app::default_threads(1);
  EXPECT_GE(alone, 1);
  EXPECT_LE(alone, static_cast<int>(std::thread::hardware_concurrency()));
  // More ranks than CPUs on the node: one thread each, never zero.
  EXPECT_EQ(app::default_threads(100000), 1);
  // Two ranks never get more than half the node each.
  EXPECT_LE(app::default_threads(2), std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 2));
}
