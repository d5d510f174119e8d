// The CUDA backend's AdamW against the CPU twin: the fp32 update, the mixed-precision update of
// the master weights with the rounded compute copy, and the weight-decay mask.
// (cuda_adamw_packs_test.cpp: the 16-byte loads of run.adamw_loads = packs.)
// (twin_test_support.h: the measure and the tolerances; cuda_backend_test.cpp: how the shapes and
// starting values are chosen.)
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"              // Backend, AdamWArgs
#include "tests/gpu/twin_test_support.h"  // TwinBackends, expect_twins_agree, tolerances

namespace trident::kernels::gpu_test {
namespace {

// --- optimiser ---------------------------------------------------------------------------------

TEST_F(TwinBackends, AdamwUpdateMatchesCpu) {
  // grad_scale (the trainer's unscaling and clipping, read with the gradients): 1 and not.
  for (const auto& [step, grad_scale] : {std::pair{1, 1.0f}, std::pair{1000, 0.37f}}) {
    SCOPED_TRACE("step " + std::to_string(step) + ", grad_scale " + std::to_string(grad_scale));
    const std::size_t n = kSmallLength;
    auto param = twin(uniform(n, -1.0f, 1.0f));
    auto grad = twin(uniform(n, -1.0f, 1.0f));
    auto m = twin(uniform(n, -0.1f, 0.1f));
    auto v = twin(uniform(n, 0.0f, 0.01f));
    AdamWArgs args;
    args.lr = 3e-3f;
    args.beta1 = 0.9f;
    args.beta2 = 0.95f;
    args.eps = 1e-8f;
    args.weight_decay = 0.1f;
    args.step = step;
    args.grad_scale = grad_scale;
    run_on_both([&](Backend& b, Side side) {
      b.adamw_update(param.on(side), grad.on(side), m.on(side), v.on(side), n, args);
    });
    expect_twins_agree(param, kElementwiseTolerance, "param");
    expect_twins_agree(m, kElementwiseTolerance, "m");
    expect_twins_agree(v, kElementwiseTolerance, "v");
  }
}

// The master-weight update: master, m and v as adamw_update; the compute copy is the master
// rounded on each side. Where the twins' masters differ by an ulp next to a rounding boundary
// the copies differ by one unit of the 16-bit format. Relative to max |x| (~1, but a unit of
// values in [1, 2) is twice that of [0.5, 1)) the bound is 2^-7 for bf16 and 2^-10 for fp16.
TEST_F(TwinBackends, AdamwUpdateMasterMatchesCpu) {
  for (const Precision p : {Precision::kBf16, Precision::kFp16}) {
    SCOPED_TRACE(precision_name(p));
    const std::size_t n = kLargeLength;
    const auto master_start = uniform(n, -1.0f, 1.0f), m_start = uniform(n, -0.1f, 0.1f);
    const auto v_start = uniform(n, 0.0f, 0.01f);
    auto master = twin(master_start);
    auto compute = twin(uniform(n, 5.0f, 9.0f));  // overwritten
    auto grad = twin(uniform(n, -1.0f, 1.0f));
    auto m = twin(m_start);
    auto v = twin(v_start);
    AdamWArgs args;
    args.lr = 3e-3f;
    args.weight_decay = 0.1f;
    args.step = 7;
    args.grad_scale = 0.37f;
    run_on_both([&](Backend& b, Side side) {
      b.adamw_update_master(master.on(side), compute.on(side), grad.on(side), m.on(side), v.on(side), n, args, p);
    });
    expect_twins_agree(master, kElementwiseTolerance, "master");
    expect_twins_agree(m, kElementwiseTolerance, "m");
    expect_twins_agree(v, kElementwiseTolerance, "v");
    expect_twins_agree(compute, p == Precision::kBf16 ? 0.0079 : 0.00098, "compute copy");
    // A 16-bit compute copy (the model's arena under mixed precision), from the same state: on
    // each side the same masters and, as bit patterns, exactly the values of the fp32 copy.
    auto master16 = twin(master_start), m16 = twin(m_start), v16 = twin(v_start);
    auto compute16 = twin(std::vector<float>((n + 1) / 2, 0.0f));  // two 16-bit values per float
    run_on_both([&](Backend& b, Side side) {
      b.adamw_update_master(master16.on(side), ActPtr(reinterpret_cast<uint16_t*>(compute16.on(side)), p),
                            grad.on(side), m16.on(side), v16.on(side), n, args, p);
    });
    for (const Side side : {Side::kCpu, Side::kGpu}) {
      EXPECT_EQ(master16.values(side), master.values(side));
      const std::vector<float> packed = compute16.values(side), copy = compute.values(side);
      std::vector<uint16_t> bits(2 * packed.size());
      std::memcpy(bits.data(), packed.data(), packed.size() * sizeof(float));
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(decode_16bit(bits[i], p), copy[i]) << (side == Side::kGpu ? "gpu" : "cpu") << " at " << i;
      }
    }
  }
}

// One launch over tensors with and without decay (AdamWArgs::decay_mask, as src/train/adamw.cpp
// builds it): the device reads the same bits of the mask as the CPU twin. Runs cross words and
// the range ends mid-word; the plain and the master-weight kernel both read it.
TEST_F(TwinBackends, AdamwDecayMaskMatchesCpu) {
  const std::size_t n = kLargeLength + 13;
  std::vector<int32_t> words(adamw_decay_mask_words(n), 0);
  for (std::size_t i = 0; i < n; ++i) {
    if ((i / 45) % 2 == 1) words[i / 32] = static_cast<int32_t>(static_cast<uint32_t>(words[i / 32]) | (1u << (i % 32)));
  }
  auto mask = twin_tokens(words);
  auto param = twin(uniform(n, -1.0f, 1.0f));
  auto master = twin(uniform(n, -1.0f, 1.0f));
  auto compute = twin(uniform(n, 5.0f, 9.0f));  // overwritten
  auto grad = twin(uniform(n, -1.0f, 1.0f));
  auto m = twin(uniform(n, -0.1f, 0.1f));
  auto v = twin(uniform(n, 0.0f, 0.01f));
  AdamWArgs args;
  args.lr = 0.05f;  // large, so that the decay term (0.05 * 0.5 * |p|) is far above the tolerance
  args.weight_decay = 0.5f;
  args.step = 3;
  run_on_both([&](Backend& b, Side side) {
    AdamWArgs masked = args;
    masked.decay_mask = mask.on(side);
    b.adamw_update(param.on(side), grad.on(side), m.on(side), v.on(side), n, masked);
    b.adamw_update_master(master.on(side), compute.on(side), grad.on(side), m.on(side), v.on(side), n, masked,
                          Precision::kBf16);
  });
  expect_twins_agree(param, kElementwiseTolerance, "param");
  expect_twins_agree(master, kElementwiseTolerance, "master");
  expect_twins_agree(m, kElementwiseTolerance, "m");
  expect_twins_agree(v, kElementwiseTolerance, "v");
  expect_twins_agree(compute, 0.0079, "compute copy");
}


}  // namespace
}  // namespace trident::kernels::gpu_test
