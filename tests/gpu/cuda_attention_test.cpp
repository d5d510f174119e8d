// The CUDA backend's attention against the CPU twin: the GEMM path with each schedule
// (run.attention_blocks, run.attention_batching) and flash attention, forward and backward.
// (twin_test_support.h: the measure and the tolerances; cuda_backend_test.cpp: how the shapes and
// starting values are chosen.)
#include <gtest/gtest.h>

#include <cstddef>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/backend.h"              // Backend, BackendOptions
#include "tests/gpu/twin_test_support.h"  // TwinBackends, expect_twins_agree, tolerances

namespace trident::kernels::gpu_test {
namespace {

struct AttentionShape {
  const char* name;
  int B, T, C, NH;
};
constexpr AttentionShape kAttentionShapes[] = {
    {"B=2 T=37 C=48 NH=3", 2, 37, 48, 3},
    {"B=1 T=300 C=96 NH=4 (rows longer than a block)", 1, 300, 96, 4},
    {"B=2 T=129 C=128 NH=2 (GPT-2's head size 64)", 2, 129, 128, 2},
    {"B=4 T=33 C=64 NH=2 (B > NH: each product NH strided calls of B matrices)", 4, 33, 64, 2},
};

// --- attention ---------------------------------------------------------------------------------

TEST_F(TwinBackends, AttentionForwardMatchesCpu) {
  for (const AttentionShape& s : kAttentionShapes) {
    SCOPED_TRACE(s.name);
    auto qkv = twin(uniform(count_of(s.B * s.T, 3 * s.C), -1.0f, 1.0f));
    auto out = twin(uniform(count_of(s.B * s.T, s.C), 5.0f, 9.0f));  // garbage: overwritten
    auto lse = twin(uniform(count_of(s.B * s.NH, s.T), 5.0f, 9.0f));
    // Each backend gets the scratch it asks for, full of garbage (undefined between calls).
    BackendFloats cpu_scratch(*cpu_,
                              uniform(cpu_->attention_scratch_size(s.B, s.T, s.NH), 5.0f, 9.0f));
    BackendFloats gpu_scratch(*gpu_,
                              uniform(gpu_->attention_scratch_size(s.B, s.T, s.NH), 5.0f, 9.0f));
    run_on_both([&](Backend& b, Side side) {
      float* scratch = side == Side::kCpu ? cpu_scratch.get() : gpu_scratch.get();
      b.attention_forward(out.on(side), lse.on(side), scratch, qkv.on(side), s.B, s.T, s.C, s.NH);
    });
    expect_twins_agree(out, kReductionTolerance, "out");
    // lse = max + log(sum): the max is one score (a 16- to 24-term dot product here), the sum
    // a row reduction in another order; values O(1), so the reductions' few ulps.
    expect_twins_agree(lse, kReductionTolerance, "lse");
  }
}

// dqkv overwritten from a garbage start, as the CPU twin overwrites it.
TEST_F(TwinBackends, AttentionBackwardMatchesCpu) {
  for (const AttentionShape& s : kAttentionShapes) {
    SCOPED_TRACE(s.name);
    auto qkv = twin(uniform(count_of(s.B * s.T, 3 * s.C), -1.0f, 1.0f));
    // The forward state both twins use: the CPU forward's out and lse.
    std::vector<float> out_host(count_of(s.B * s.T, s.C));
    std::vector<float> lse_host(count_of(s.B * s.NH, s.T));
    {
      auto out = twin(out_host);
      auto lse = twin(lse_host);
      BackendFloats scratch(*cpu_, std::vector<float>(cpu_->attention_scratch_size(s.B, s.T, s.NH)));
      cpu_->attention_forward(out.on(Side::kCpu), lse.on(Side::kCpu), scratch.get(), qkv.on(Side::kCpu), s.B,
                              s.T, s.C, s.NH);
      out_host = out.values(Side::kCpu);
      lse_host = lse.values(Side::kCpu);
    }
    auto out = twin(out_host);
    auto lse = twin(lse_host);
    auto dout = twin(uniform(count_of(s.B * s.T, s.C), -1.0f, 1.0f));
    auto dqkv = twin(uniform(count_of(s.B * s.T, 3 * s.C), 5.0f, 9.0f));  // garbage: overwritten
    // Each backend gets the scratch it asks for, full of garbage (undefined between calls).
    BackendFloats cpu_scratch(*cpu_,
                              uniform(cpu_->attention_scratch_size(s.B, s.T, s.NH), 5.0f, 9.0f));
    BackendFloats gpu_scratch(*gpu_,
                              uniform(gpu_->attention_scratch_size(s.B, s.T, s.NH), 5.0f, 9.0f));
    run_on_both([&](Backend& b, Side side) {
      float* scratch = side == Side::kCpu ? cpu_scratch.get() : gpu_scratch.get();
      b.attention_backward(dqkv.on(side), scratch, dout.on(side), qkv.on(side), out.on(side), lse.on(side), s.B,
                           s.T, s.C, s.NH);
    });
    // Both recompute P = exp(S - lse) from the same lse (expf against exp_approx, 2 ulp each),
    // then the same reductions as before in other orders.
    expect_twins_agree(dqkv, kReductionTolerance, "dqkv");
  }
}

// Attention on another CUDA backend than the fixture's (other options) against the CPU twin.
class AttentionTwins : public TwinBackends {
 protected:
  // Forward of `gpu` from the CPU's qkv (uniform in [-qkv_bound, qkv_bound]); then backward from
  // the CPU forward's out and lse, so that the backward's own error is measured alone. Each
  // backend's scratch starts full of garbage, and so do out, lse and dqkv (overwritten). With
  // `same_bits_again`, a second backward from a NaN start must give the first's bits (every
  // element written, none read; no atomics).
  void expect_attention_agrees(Backend& gpu, const AttentionShape& s, float qkv_bound, bool same_bits_again) {
    auto qkv = twin(uniform(count_of(s.B * s.T, 3 * s.C), -qkv_bound, qkv_bound));
    auto out = twin(uniform(count_of(s.B * s.T, s.C), 5.0f, 9.0f));
    auto lse = twin(uniform(count_of(s.B * s.NH, s.T), 5.0f, 9.0f));
    BackendFloats cpu_scratch(*cpu_, uniform(cpu_->attention_scratch_size(s.B, s.T, s.NH), 5.0f, 9.0f));
    BackendFloats gpu_scratch(*gpu_, uniform(gpu.attention_scratch_size(s.B, s.T, s.NH), 5.0f, 9.0f));
    cpu_->attention_forward(out.on(Side::kCpu), lse.on(Side::kCpu), cpu_scratch.get(), qkv.on(Side::kCpu), s.B, s.T,
                            s.C, s.NH);
    gpu.attention_forward(out.on(Side::kGpu), lse.on(Side::kGpu), gpu_scratch.get(), qkv.on(Side::kGpu), s.B, s.T,
                          s.C, s.NH);
    gpu.synchronize();
    expect_twins_agree(out, kReductionTolerance, "out");
    expect_twins_agree(lse, kReductionTolerance, "lse");

    auto cpu_out = twin(out.values(Side::kCpu)), cpu_lse = twin(lse.values(Side::kCpu));
    auto dout = twin(uniform(count_of(s.B * s.T, s.C), -1.0f, 1.0f));
    auto dqkv = twin(uniform(count_of(s.B * s.T, 3 * s.C), 5.0f, 9.0f));
    cpu_->attention_backward(dqkv.on(Side::kCpu), cpu_scratch.get(), dout.on(Side::kCpu), qkv.on(Side::kCpu),
                             cpu_out.on(Side::kCpu), cpu_lse.on(Side::kCpu), s.B, s.T, s.C, s.NH);
    gpu.attention_backward(dqkv.on(Side::kGpu), gpu_scratch.get(), dout.on(Side::kGpu), qkv.on(Side::kGpu),
                           cpu_out.on(Side::kGpu), cpu_lse.on(Side::kGpu), s.B, s.T, s.C, s.NH);
    gpu.synchronize();
    expect_twins_agree(dqkv, kReductionTolerance, "dqkv");
    if (!same_bits_again) return;
    auto repeat = twin(std::vector<float>(count_of(s.B * s.T, 3 * s.C), std::numeric_limits<float>::quiet_NaN()));
    gpu.attention_backward(repeat.on(Side::kGpu), gpu_scratch.get(), dout.on(Side::kGpu), qkv.on(Side::kGpu),
                           cpu_out.on(Side::kGpu), cpu_lse.on(Side::kGpu), s.B, s.T, s.C, s.NH);
    gpu.synchronize();
    EXPECT_EQ(repeat.values(Side::kGpu), dqkv.values(Side::kGpu));
  }
};

// The GEMM attention's other schedules (run.attention_blocks, run.attention_batching) through
// the backend: causal row blocks and pointer-array products, the arrays in the backend's
// workspace, at the tolerances of the defaults (only the batching of the products and the
// columns past each block's end differ). cuda_bf16_storage_test.cpp compares the same options
// against the defaults in 16 bits, at the launcher.
TEST_F(AttentionTwins, AttentionSchedulesMatchCpu) {
  struct Schedule {
    const char* name;
    int blocks;
    AttentionBatching batching;
  };
  const Schedule schedules[] = {{"2 blocks", 2, AttentionBatching::kStrided},
                                {"pointer arrays", 1, AttentionBatching::kPointers},
                                {"4 blocks, pointer arrays", 4, AttentionBatching::kPointers},
                                {"more blocks than groups of 8 rows", 1000, AttentionBatching::kStrided}};
  for (std::size_t k = 0; k < std::size(schedules); ++k) {
    const Schedule& schedule = schedules[k];
    BackendOptions options;
    options.attention_blocks = schedule.blocks;
    options.attention_batching = schedule.batching;
    auto gpu = make_backend(Device::kCuda, kCpuThreads, 0, options);
    // The twin shapes, and one whose fp32 slots and corners all start on 16 bytes with B > 1, so
    // that the pointer arrays step along the batch stride too (T = 64: 16-row blocks at k = 4).
    std::vector<AttentionShape> shapes(std::begin(kAttentionShapes), std::end(kAttentionShapes));
    shapes.push_back({"B=4 T=64 C=128 NH=2 (every matrix on 16 bytes)", 4, 64, 128, 2});
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      // Under the race checker, 8 of the 20 cases: each schedule on one twin shape and on the
      // aligned one (kRaceChecker).
      if (kRaceChecker && i != k && i + 1 != shapes.size()) continue;
      const AttentionShape& s = shapes[i];
      SCOPED_TRACE(std::string(schedule.name) + ", " + s.name);
      expect_attention_agrees(*gpu, s, 1.0f, false);
    }
  }
  BackendOptions none;
  none.attention_blocks = 0;
  EXPECT_THROW(make_backend(Device::kCuda, kCpuThreads, 0, none), std::invalid_argument);
  // The flash options the deck refuses (io/run_config.cpp) are refused here too, for callers that
  // build them in code: a warpgroup count other than 1 or 2, and two warpgroups in the wgmma
  // backward with dQ in the key walk.
  BackendOptions three;
  three.flash_warpgroups = 3;
  EXPECT_THROW(make_backend(Device::kCuda, kCpuThreads, 0, three), std::invalid_argument);
  const BackendOptions two_in_key_walk{.attention = AttentionKernel::kFlash, .flash_dq = FlashDq::kInKeyWalk,
                                 .flash_backward_products = FlashProducts::kWarpgroup, .flash_warpgroups = 2};
  EXPECT_THROW(make_backend(Device::kCuda, kCpuThreads, 0, two_in_key_walk), std::invalid_argument);
}

// Flash attention (run.attention = flash): the same contract, another algorithm (online
// softmax, P rebuilt tile by tile, D = dout . out), against the CPU twin at head size 64; the
// ragged lengths end mid-tile. tests/unit/kernels/flash_attention_replay_test.cpp replays the
// same per-thread code on the host at 1e-5; here the device's FMA contraction and expf add their
// few ulps. No atomics: a second backward gives the same bits.
TEST_F(AttentionTwins, FlashAttentionMatchesCpu) {
  auto flash = make_backend(Device::kCuda, kCpuThreads, 0, {.attention = AttentionKernel::kFlash});
  const AttentionShape shapes[] = {{"B=2 T=129 C=128 NH=2", 2, 129, 128, 2},
                                   {"B=1 T=300 C=192 NH=3", 1, 300, 192, 3},
                                   {"B=1 T=64 C=64 NH=1 (one tile)", 1, 64, 64, 1}};
  for (const AttentionShape& s : shapes) {
    SCOPED_TRACE(s.name);
    EXPECT_EQ(flash->attention_scratch_size(s.B, s.T, s.NH), count_of(s.B * s.NH, s.T));
    expect_attention_agrees(*flash, s, 2.0f, true);
  }
  // Head sizes other than 64 are refused, not computed wrongly.
  BackendFloats scratch(*gpu_, std::vector<float>(count_of(2 * 3, 37)));
  auto qkv = twin(uniform(count_of(2 * 37, 3 * 48), -1.0f, 1.0f));
  auto out = twin(uniform(count_of(2 * 37, 48), -1.0f, 1.0f));
  auto lse = twin(uniform(count_of(2 * 3, 37), -1.0f, 1.0f));
  EXPECT_THROW(flash->attention_forward(out.on(Side::kGpu), lse.on(Side::kGpu), scratch.get(), qkv.on(Side::kGpu), 2,
                                        37, 48, 3),
               std::logic_error);
}


}  // namespace
}  // namespace trident::kernels::gpu_test
