// Initialisation: the counter RNG, the GPT parameter table, and layout independence of init.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/counter_rng.h"
#include "src/model/gpt.h"
#include "src/model/param_table.h"

using namespace trident;

TEST(CounterRng, PhiloxMatchesPublishedKnownAnswer) {
  // Random123 known-answer vector for philox4x32-10: counter 0, key 0.
  const auto r = kernels::philox4x32_10(0, 0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
}

TEST(CounterRng, NormalSamplesHaveUnitMoments) {
  double sum = 0, squares = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = kernels::counter_normal(42, static_cast<uint64_t>(i));
    sum += x;
    squares += x * x;
  }
  // Standard errors: mean 1/sqrt(n) = 0.0022, variance sqrt(2/n) = 0.0032; allow ~4 sigma.
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(squares / n, 1.0, 0.013);
}

TEST(ParamTable, GptTableHasGpt2ParameterCount) {
  // GPT-2 124M: 124,439,808 parameters with vocab 50257; padded to 50304 adds 47 * 768 rows.
  model::GptConfig c{12, 12, 768, 1024, 50257, 50304};
  const auto table = model::build_gpt_param_table(c);
  EXPECT_EQ(table.total_count(), 124439808u + 47u * 768u);
  EXPECT_EQ(static_cast<int64_t>(table.total_count()), c.parameter_count());
}

TEST(ParamTable, SplitTensorInitialisesItsSliceOfTheWholeTensor) {
  // A [3, 4, 6] tensor split along axis 1 into two halves must reproduce the whole tensor.
  model::TensorSpec whole;
  whole.name = "w";
  whole.global_shape = {3, 4, 6};
  whole.init = model::InitKind::kNormal;
  whole.init_std = 1.0f;
  model::ParamTable full;
  full.add(whole);
  std::vector<float> reference(full.total_count());
  model::initialize_parameters(full, 7, reference.data());

  for (int part = 0; part < 2; ++part) {
    model::TensorSpec slice = whole;
    slice.split_axis = 1;
    slice.slice_begin = 2 * part;
    slice.slice_extent = 2;
    model::ParamTable table;
    table.add(slice);
    std::vector<float> values(table.total_count());
    model::initialize_parameters(table, 7, values.data());
    for (int a = 0; a < 3; ++a)
      for (int b = 0; b < 2; ++b)
        for (int c = 0; c < 6; ++c)
          EXPECT_EQ(values[static_cast<size_t>((a * 2 + b) * 6 + c)],
                    reference[static_cast<size_t>((a * 4 + 2 * part + b) * 6 + c)]);
  }
}

TEST(ParamTable, PaddedVocabularyRowsStartAtZeroAndResidualProjectionsAreScaled) {
  model::GptConfig c{4, 2, 16, 8, 10, 16};
  const auto table = model::build_gpt_param_table(c);
  std::vector<float> values(table.total_count());
  model::initialize_parameters(table, 1, values.data());
  const auto& wte = table.find("wte");
  for (size_t i = 10 * 16; i < 16 * 16; ++i) EXPECT_EQ(values[wte.offset + i], 0.0f);
  double sum_sq = 0;
  for (size_t i = 0; i < 10 * 16; ++i) sum_sq += values[wte.offset + i] * values[wte.offset + i];
  EXPECT_NEAR(std::sqrt(sum_sq / 160), 0.02, 0.005);
  const auto& proj = table.find("block0.attn.proj.weight");
  EXPECT_FLOAT_EQ(proj.spec.init_std, 0.02f / std::sqrt(8.0f));
  EXPECT_FALSE(table.find("block0.ln1.bias").spec.weight_decay);
  EXPECT_TRUE(table.find("block0.mlp.up.weight").spec.weight_decay);
}
