// adamw_update against a hand-worked example and a double-precision update over several steps.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"              // CpuBackend
#include "tests/unit/kernels/kernel_test_util.h"  // random_floats, expect_close

namespace trident::kernels::test {
namespace {

struct AdamState {
  std::vector<double> param, m, v;
};

// The update rule of backend.h, in double.
void adamw_reference(AdamState& s, const std::vector<float>& grad, const AdamWArgs& a) {
  const double b1 = a.beta1, b2 = a.beta2;
  const double bc1 = 1.0 - std::pow(b1, a.step), bc2 = 1.0 - std::pow(b2, a.step);
  for (std::size_t i = 0; i < grad.size(); i++) {
    const double g = grad[i];
    s.m[i] = b1 * s.m[i] + (1.0 - b1) * g;
    s.v[i] = b2 * s.v[i] + (1.0 - b2) * g * g;
    const double mhat = s.m[i] / bc1, vhat = s.v[i] / bc2;
    s.param[i] -= double(a.lr) * (mhat / (std::sqrt(vhat) + double(a.eps)) +
                                  double(a.weight_decay) * s.param[i]);
  }
}

TEST(CpuAdamW, FirstStepMatchesHandComputedValue) {
  cpu::CpuBackend backend(kTestThreads);
  // p = 1, g = 0.5, lr = 0.1, wd = 0.01, b1 = 0.9, b2 = 0.95, eps = 1e-8, step 1:
  //   m = 0.05, v = 0.0125; mhat = 0.05 / 0.1 = 0.5; vhat = 0.0125 / 0.05 = 0.25
  //   p = 1 - 0.1 * (0.5 / (0.5 + 1e-8) + 0.01 * 1) = 1 - 0.1 * 1.00999998 = 0.899000002
  float p = 1.0f, g = 0.5f, m = 0.0f, v = 0.0f;
  AdamWArgs args;
  args.lr = 0.1f;
  args.weight_decay = 0.01f;
  args.step = 1;
  backend.adamw_update(&p, &g, &m, &v, 1, args);
  // 1 - 0.9f is 0.100000024 in float (b1 itself is rounded): a few 1e-7 relative error.
  EXPECT_NEAR(m, 0.05, 5e-8);
  EXPECT_NEAR(v, 0.0125, 2e-8);
  EXPECT_NEAR(p, 0.899000002, 2e-7);  // float ulp at 0.9 is 6e-8
}

TEST(CpuAdamW, SeveralStepsMatchDoubleReference) {
  const std::size_t n = 37;
  std::mt19937 rng(71);
  cpu::CpuBackend backend(kTestThreads);
  auto param = random_floats(n, rng);
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  AdamState ref{to_double(param), std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  AdamWArgs args;
  args.lr = 1e-2f;
  args.weight_decay = 0.1f;
  for (int step = 1; step <= 5; step++) {
    args.step = step;
    const auto grad = random_floats(n, rng, -0.1f, 0.1f);
    backend.adamw_update(param.data(), grad.data(), m.data(), v.data(), n, args);
    adamw_reference(ref, grad, args);
  }
  // Moments are O(0.1) and O(0.01) with float rounding ~1e-8 relative per step; the parameters
  // are O(1) and move by ~1e-2 per step, so five float updates stay within ~1e-6.
  expect_close(m, ref.m, 1e-8, 1e-5, "m");
  expect_close(v, ref.v, 1e-9, 1e-5, "v");
  expect_close(param, ref.param, 1e-6, 1e-6, "param");
}

TEST(CpuAdamW, LateStepBiasCorrectionAndNoDecayWhenZero) {
  const std::size_t n = 37;
  std::mt19937 rng(72);
  cpu::CpuBackend backend(kTestThreads);
  auto param = random_floats(n, rng);
  auto m = random_floats(n, rng, -0.01f, 0.01f);
  auto v = random_floats(n, rng, 1e-5f, 1e-4f);
  AdamState ref{to_double(param), to_double(m), to_double(v)};
  AdamWArgs args;
  args.lr = 3e-4f;
  args.weight_decay = 0.0f;
  args.step = 1000;  // bias corrections near 1 (b2^1000 ~ 5e-23)
  const auto grad = random_floats(n, rng, -0.01f, 0.01f);
  backend.adamw_update(param.data(), grad.data(), m.data(), v.data(), n, args);
  adamw_reference(ref, grad, args);
  // Updates are ~3e-4 on O(1) parameters: float rounding of the parameter dominates (6e-8).
  expect_close(param, ref.param, 2e-7, 1e-7, "param");
  expect_close(m, ref.m, 1e-9, 1e-6, "m");
  expect_close(v, ref.v, 1e-12, 1e-6, "v");
}

// Random state a few steps into training (n = 1001, lr 3e-3, weight decay 0.1, step 5), drawn
// from `seed`: what the bit-for-bit comparisons of two ways to update start from.
struct StepCase {
  std::size_t n = 1001;
  std::vector<float> param, grad, m0, v0;
  AdamWArgs args;
};
StepCase step_case(unsigned seed) {
  std::mt19937 rng(seed);
  StepCase c;
  c.param = random_floats(c.n, rng);
  c.grad = random_floats(c.n, rng);
  c.m0 = random_floats(c.n, rng, -0.1f, 0.1f);
  c.v0 = random_floats(c.n, rng, 0.0f, 0.01f);
  c.args.lr = 3e-3f;
  c.args.weight_decay = 0.1f;
  c.args.step = 5;
  return c;
}

TEST(CpuAdamW, MasterUpdateIsTheUpdateThenTheRounding) {
  cpu::CpuBackend backend(kTestThreads);
  const StepCase c = step_case(71);
  const auto& [n, param, grad, m0, v0, args] = c;
  for (Precision p : {Precision::kBf16, Precision::kFp16, Precision::kFp32}) {
    auto two_pass = param, m2 = m0, v2 = v0;
    backend.adamw_update(two_pass.data(), grad.data(), m2.data(), v2.data(), n, args);
    std::vector<float> two_pass_copy(n);
    backend.round_to_precision(two_pass_copy.data(), two_pass.data(), n, p);
    auto master = param, m1 = m0, v1 = v0;
    std::vector<float> copy(n);
    backend.adamw_update_master(master.data(), copy.data(), grad.data(), m1.data(), v1.data(), n, args, p);
    EXPECT_EQ(std::memcmp(master.data(), two_pass.data(), n * sizeof(float)), 0) << precision_name(p);
    EXPECT_EQ(std::memcmp(copy.data(), two_pass_copy.data(), n * sizeof(float)), 0) << precision_name(p);
    EXPECT_EQ(std::memcmp(m1.data(), m2.data(), n * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(v1.data(), v2.data(), n * sizeof(float)), 0);
    if (p == Precision::kFp32) continue;
    // A 16-bit compute copy (the model's arena under mixed precision) receives the same values
    // as their bit patterns, and the masters the same update.
    auto master16 = param, m3 = m0, v3 = v0;
    std::vector<uint16_t> copy16(n);
    backend.adamw_update_master(master16.data(), ActPtr(copy16.data(), p), grad.data(), m3.data(), v3.data(), n,
                                args, p);
    EXPECT_EQ(std::memcmp(master16.data(), two_pass.data(), n * sizeof(float)), 0) << precision_name(p);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(copy16[i], encode_16bit(two_pass[i], p)) << precision_name(p) << " at " << i;
    }
    // A compute copy of the other 16-bit format cannot hold these values.
    const Precision other = p == Precision::kBf16 ? Precision::kFp16 : Precision::kBf16;
    EXPECT_THROW(backend.adamw_update_master(master16.data(), ActPtr(copy16.data(), other), grad.data(), m3.data(),
                                             v3.data(), n, args, p),
                 std::logic_error);
  }
}

// AdamWArgs::grad_scale: the update reading grad times s gives, bit for bit, what a scale(grad, s)
// pass and then the update at 1 give (the trainer's unscaling and clipping, folded in), for the
// plain and the master-weight update, and leaves the gradients as they were.
TEST(CpuAdamW, GradScaleIsAScalePassBeforeTheUpdate) {
  cpu::CpuBackend backend(kTestThreads);
  const StepCase c = step_case(72);
  const auto& [n, param, grad, m0, v0, args] = c;
  for (const float s : {0.37f, 1.0f / 65536.0f, 3.0f}) {
    auto scaled = grad;
    backend.scale(scaled.data(), s, n);
    auto two_pass = param, m2 = m0, v2 = v0;
    backend.adamw_update(two_pass.data(), scaled.data(), m2.data(), v2.data(), n, args);
    AdamWArgs folded = args;
    folded.grad_scale = s;
    auto one_pass = param, m1 = m0, v1 = v0, read = grad;
    backend.adamw_update(one_pass.data(), read.data(), m1.data(), v1.data(), n, folded);
    EXPECT_EQ(std::memcmp(one_pass.data(), two_pass.data(), n * sizeof(float)), 0) << s;
    EXPECT_EQ(std::memcmp(m1.data(), m2.data(), n * sizeof(float)), 0) << s;
    EXPECT_EQ(std::memcmp(v1.data(), v2.data(), n * sizeof(float)), 0) << s;
    EXPECT_EQ(std::memcmp(read.data(), grad.data(), n * sizeof(float)), 0) << "the gradients changed";
    auto master = param, m3 = m0, v3 = v0;
    std::vector<uint16_t> copy16(n);
    backend.adamw_update_master(master.data(), ActPtr(copy16.data(), Precision::kBf16), grad.data(), m3.data(),
                                v3.data(), n, folded, Precision::kBf16);
    EXPECT_EQ(std::memcmp(master.data(), two_pass.data(), n * sizeof(float)), 0) << s;
  }
  auto unscaled = param, m4 = m0, v4 = v0, p5 = param, m5 = m0, v5 = v0;
  backend.adamw_update(unscaled.data(), grad.data(), m4.data(), v4.data(), n, args);
  AdamWArgs halved = args;
  halved.grad_scale = 0.5f;
  backend.adamw_update(p5.data(), grad.data(), m5.data(), v5.data(), n, halved);
  EXPECT_NE(std::memcmp(m4.data(), m5.data(), n * sizeof(float)), 0) << "grad_scale is ignored";
}

// The decay mask: one call over runs with and without decay gives, bit for bit, what one call
// per run (weight_decay or 0) gives, for the plain and the master-weight update. The runs cross
// word boundaries and end mid-word.
TEST(CpuAdamW, DecayMaskCallEqualsOneCallPerRun) {
  const std::vector<std::size_t> ends = {5, 32, 33, 70, 96, 131};  // run j decays when j is odd
  const std::size_t n = ends.back();
  std::mt19937 rng(23);
  cpu::CpuBackend backend(kTestThreads);
  const auto start = random_floats(n, rng);
  const auto grad = random_floats(n, rng);
  std::vector<uint32_t> words(adamw_decay_mask_words(n), 0u);
  for (std::size_t j = 0, begin = 0; j < ends.size(); begin = ends[j++]) {
    if (j % 2 == 1) {
      for (std::size_t i = begin; i < ends[j]; ++i) words[i / 32] |= 1u << (i % 32);
    }
  }
  std::vector<int32_t> mask(words.size());
  std::memcpy(mask.data(), words.data(), words.size() * sizeof(uint32_t));
  AdamWArgs args;
  args.lr = 0.05f;
  args.weight_decay = 0.3f;
  for (bool master : {false, true}) {
    std::vector<float> p1 = start, m1(n, 0.1f), v1(n, 0.2f), c1(n), p2 = start, m2 = m1, v2 = v1, c2(n);
    for (int step = 1; step <= 3; ++step) {
      args.step = step;
      AdamWArgs masked = args;
      masked.decay_mask = mask.data();
      if (master) {
        backend.adamw_update_master(p1.data(), c1.data(), grad.data(), m1.data(), v1.data(), n, masked,
                                    Precision::kBf16);
      } else {
        backend.adamw_update(p1.data(), grad.data(), m1.data(), v1.data(), n, masked);
      }
      for (std::size_t j = 0, begin = 0; j < ends.size(); begin = ends[j++]) {
        AdamWArgs run = args;
        run.weight_decay = j % 2 == 1 ? args.weight_decay : 0.0f;
        const std::size_t count = ends[j] - begin;
        if (master) {
          backend.adamw_update_master(p2.data() + begin, c2.data() + begin, grad.data() + begin, m2.data() + begin,
                                      v2.data() + begin, count, run, Precision::kBf16);
        } else {
          backend.adamw_update(p2.data() + begin, grad.data() + begin, m2.data() + begin, v2.data() + begin, count,
                               run);
        }
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(p1[i], p2[i]) << "element " << i << (master ? " (master)" : "");
      ASSERT_EQ(m1[i], m2[i]) << i;
      ASSERT_EQ(v1[i], v2[i]) << i;
      if (master) {
        ASSERT_EQ(c1[i], c2[i]) << i;
      }
    }
  }
  // The mask matters: without it every element decays, and the runs without decay differ.
  std::vector<float> all = start, masked = start, m(n, 0.0f), v(n, 0.0f), m3(n, 0.0f), v3(n, 0.0f);
  args.step = 1;
  backend.adamw_update(all.data(), grad.data(), m.data(), v.data(), n, args);
  AdamWArgs with_mask = args;
  with_mask.decay_mask = mask.data();
  backend.adamw_update(masked.data(), grad.data(), m3.data(), v3.data(), n, with_mask);
  EXPECT_NE(all[0], masked[0]);   // run 0: no decay under the mask
  EXPECT_EQ(all[10], masked[10]); // run 1 decays either way
}

}  // namespace
}  // namespace trident::kernels::test
