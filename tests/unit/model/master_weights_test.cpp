// AdamW with fp32 master weights (train.precision = bf16 | fp16): the master weights follow
// exactly the updates an fp32 run makes, and the model's weights are their rounded copy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/precision.h"
#include "src/model/param_table.h"
#include "src/train/adamw.h"

using namespace trident;

namespace {

model::ParamTable two_tensor_table() {
  model::ParamTable table;
  model::TensorSpec w;
  w.name = "w";
  w.global_shape = {6, 5};
  w.weight_decay = true;
  table.add(w);
  model::TensorSpec b;
  b.name = "b";
  b.global_shape = {7};
  table.add(b);
  return table;
}

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

}  // namespace

TEST(MasterWeights, UpdateTheFp32MastersAndRoundTheComputeCopy) {
  const model::ParamTable table = two_tensor_table();
  const std::size_t n = table.total_count();
  auto backend = kernels::make_backend(kernels::Device::kCpu, 1);
  std::mt19937 rng(601);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  std::vector<float> initial(n), grads(n);
  for (float& x : initial) x = normal(rng);
  for (float& g : grads) g = normal(rng);
  const train::AdamWSettings settings{0.9, 0.95, 1e-8, 0.1};
  for (kernels::Precision p : {kernels::Precision::kBf16, kernels::Precision::kFp16}) {
    // A ZeRO-like range [4, 30): elements outside it belong to other ranks' masters.
    const std::size_t begin = 4, end = 30;
    std::vector<float> reference = initial;
    train::AdamW fp32(table, *backend, settings, begin, end);
    // The model's arena: the 16-bit compute copy, set from the fp32 values as Gpt::set_parameters
    // does; the masters are adopted from the same values, in pieces that cut the range.
    std::vector<uint16_t> compute(n);
    for (std::size_t i = 0; i < n; ++i) compute[i] = kernels::encode_16bit(initial[i], p);
    const kernels::ActPtr params(compute.data(), p);
    train::AdamW mixed(table, *backend, settings, begin, end, p);
    for (std::size_t offset = 0; offset < n; offset += 7) {
      mixed.adopt_parameters(offset, initial.data() + offset, std::min<std::size_t>(7, n - offset));
    }
    for (std::size_t i = begin; i < end; ++i) {
      ASSERT_EQ(bits(mixed.fp32_parameters(params)[i - begin]), bits(initial[i])) << "master " << i;
    }
    for (int step = 1; step <= 3; ++step) {
      fp32.update(reference.data(), grads.data() + begin, 1e-2, step);
      mixed.update(params, grads.data() + begin, 1e-2, step);
    }
    const float* master = mixed.fp32_parameters(params);
    auto value = [&](std::size_t i) { return kernels::decode_16bit(compute[i], p); };
    for (std::size_t i = begin; i < end; ++i) {
      ASSERT_EQ(bits(master[i - begin]), bits(reference[i])) << kernels::precision_name(p) << " master " << i;
      ASSERT_EQ(bits(value(i)), bits(kernels::round_to_precision(reference[i], p))) << "compute copy " << i;
    }
    // Outside the range nothing moved: still the rounded initial values.
    for (std::size_t i : {std::size_t{0}, std::size_t{3}, std::size_t{30}, n - 1}) {
      EXPECT_EQ(bits(value(i)), bits(kernels::round_to_precision(initial[i], p)));
    }
    // Updates of 1e-2 * ~1 on weights of ~0.3 survive in the masters even where a rounded copy
    // would lose part of them: the masters differ from their compute copies.
    int differing = 0;
    for (std::size_t i = begin; i < end; ++i) differing += master[i - begin] != value(i) ? 1 : 0;
    EXPECT_GT(differing, 0);
  }
}

TEST(MasterWeights, Fp32HasNoneAndReadsTheArena) {
  const model::ParamTable table = two_tensor_table();
  auto backend = kernels::make_backend(kernels::Device::kCpu, 1);
  std::vector<float> params(table.total_count(), 0.5f);
  train::AdamW adamw(table, *backend, {}, 2, 10);
  EXPECT_EQ(adamw.fp32_parameters(params.data()), params.data() + 2);
  const std::vector<float> other(params.size(), 2.0f);
  adamw.adopt_parameters(0, other.data(), other.size());  // nothing to do: no masters
  EXPECT_EQ(params[0], 0.5f);
  EXPECT_EQ(adamw.state_bytes(), 2 * 8 * sizeof(float) + sizeof(int32_t));  // moments and one mask word
}

// ZeRO-1 shards: an AdamW over any block of the arena (tensors before, after, and cut by it)
// updates exactly the elements the whole-range AdamW does, with each tensor's decay (the decay
// mask of a block starts at the block).
TEST(AdamWShards, EveryBlockMatchesTheWholeRange) {
  model::ParamTable table;
  const int sizes[] = {40, 3, 37, 5, 64, 9};
  const char* names[] = {"t0", "t1", "t2", "t3", "t4", "t5"};
  for (int t = 0; t < 6; ++t) {
    model::TensorSpec spec;
    spec.name = names[t];
    spec.global_shape = {sizes[t]};
    spec.weight_decay = t % 2 == 0;
    table.add(spec);
  }
  const std::size_t n = table.total_count();
  auto backend = kernels::make_backend(kernels::Device::kCpu, 1);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> start(n), grads(n);
  for (auto& x : start) x = uniform(rng);
  for (auto& x : grads) x = uniform(rng);
  const train::AdamWSettings settings{.weight_decay = 0.5};
  std::vector<float> whole = start;
  train::AdamW all(table, *backend, settings);
  for (int step = 1; step <= 2; ++step) all.update(whole.data(), grads.data(), 0.1, step);
  for (const auto& [begin, end] : std::vector<std::pair<std::size_t, std::size_t>>{
           {0, 33}, {33, 90}, {45, 50}, {90, n}, {100, n + 20}}) {
    std::vector<float> params = start;
    train::AdamW block(table, *backend, settings, begin, end);
    for (int step = 1; step <= 2; ++step) block.update(params.data(), grads.data() + begin, 0.1, step);
    for (std::size_t i = 0; i < n; ++i) {
      const bool inside = i >= begin && i < end;
      ASSERT_EQ(params[i], inside ? whole[i] : start[i]) << "block [" << begin << ", " << end << "), element " << i;
    }
  }
  // The per-tensor decay is applied: a decayed tensor moves differently without decay.
  std::vector<float> undecayed = start;
  train::AdamW plain(table, *backend, {});
  for (int step = 1; step <= 2; ++step) plain.update(undecayed.data(), grads.data(), 0.1, step);
  EXPECT_NE(whole[0], undecayed[0]);    // t0 decays
  EXPECT_EQ(whole[40], undecayed[40]);  // t1 does not
}
