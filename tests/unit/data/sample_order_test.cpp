// The sample order (Fisher-Yates on std::mt19937_64, pinned by golden values) and the batch
// loader's promise that a step's global batch is the same set of samples for every dp.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <vector>

#include "io/token_dataset.h"
#include "io/token_file_writer.h"
#include "io/user_error.h"
#include "tests/unit/data/data_test_support.h"

namespace trident::io {
namespace {

using testing::counting_contents;
using testing::ScratchDir;

TEST(SampleOrder, PermutationHoldsEverySampleOnce) {
  for (int64_t n : {1, 2, 3, 10, 1000}) {
    std::vector<int64_t> order = SampleOrder::permutation(n, 42, 3);
    ASSERT_EQ(static_cast<int64_t>(order.size()), n);
    std::sort(order.begin(), order.end());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(order[i], i);
  }
}

TEST(SampleOrder, IsDeterministicForSeedAndEpoch) {
  EXPECT_EQ(SampleOrder::permutation(500, 7, 0), SampleOrder::permutation(500, 7, 0));
  EXPECT_EQ(SampleOrder::permutation(500, 7, 9), SampleOrder::permutation(500, 7, 9));
}

TEST(SampleOrder, DiffersBetweenEpochsAndSeeds) {
  EXPECT_NE(SampleOrder::permutation(500, 7, 0), SampleOrder::permutation(500, 7, 1));
  EXPECT_NE(SampleOrder::permutation(500, 7, 0), SampleOrder::permutation(500, 8, 0));
}

// Golden values: computed once from this implementation. A change here changes every run's
// data order, so it must be deliberate (and noted as breaking restart reproducibility).
TEST(SampleOrder, FirstElementsArePinned) {
  const std::vector<int64_t> order = SampleOrder::permutation(1000, 1234, 0);
  const std::vector<int64_t> first(order.begin(), order.begin() + 10);
  EXPECT_EQ(first, (std::vector<int64_t>{717, 292, 126, 501, 81, 936, 178, 469, 915, 298}));
  const std::vector<int64_t> next = SampleOrder::permutation(1000, 1234, 1);
  EXPECT_EQ(std::vector<int64_t>(next.begin(), next.begin() + 10),
            (std::vector<int64_t>{401, 175, 404, 614, 89, 990, 952, 447, 666, 78}));
  const std::vector<int64_t> small = SampleOrder::permutation(8, 0, 0);
  EXPECT_EQ(small, (std::vector<int64_t>{0, 7, 5, 6, 1, 3, 2, 4}));
}

TEST(SampleOrder, StreamPositionsWalkThroughEpochPermutations) {
  SampleOrder order(50, 99);
  const std::vector<int64_t> epoch0 = SampleOrder::permutation(50, 99, 0);
  const std::vector<int64_t> epoch2 = SampleOrder::permutation(50, 99, 2);
  EXPECT_EQ(order.sample_at(0), epoch0[0]);
  EXPECT_EQ(order.sample_at(49), epoch0[49]);
  EXPECT_EQ(order.sample_at(100 + 17), epoch2[17]);
  EXPECT_EQ(order.sample_at(3), epoch0[3]);  // going back re-derives the earlier epoch
  EXPECT_THROW(order.sample_at(-1), std::out_of_range);
  EXPECT_THROW(SampleOrder(0, 1), std::invalid_argument);
}

// --- BatchLoader ----------------------------------------------------------------------------

constexpr int kSeqLen = 16;

// The samples (identified by their first token: token i is i) a data rank loads for a step.
std::multiset<int64_t> step_samples(const TokenDataset& dataset, int64_t global_batch,
                                    int64_t micro_batch, int dp_size, int64_t step,
                                    bool validation) {
  std::multiset<int64_t> samples;
  for (int dp_rank = 0; dp_rank < dp_size; ++dp_rank) {
    BatchGeometry geometry{global_batch, micro_batch, dp_size, dp_rank, kSeqLen};
    BatchLoader loader(dataset, geometry, 2024);
    std::vector<int32_t> tokens(micro_batch * kSeqLen), targets(micro_batch * kSeqLen);
    for (int64_t micro = 0; micro < geometry.micro_batches_per_step(); ++micro) {
      if (validation) {
        loader.load_validation(step, micro, tokens.data(), targets.data());
      } else {
        loader.load_train(step, micro, tokens.data(), targets.data());
      }
      for (int64_t row = 0; row < micro_batch; ++row) {
        const int32_t* row_tokens = tokens.data() + row * kSeqLen;
        const int32_t* row_targets = targets.data() + row * kSeqLen;
        for (int t = 0; t < kSeqLen; ++t) {
          EXPECT_EQ(row_tokens[t], row_tokens[0] + t);       // consecutive tokens of the file
          EXPECT_EQ(row_targets[t], row_tokens[t] + 1);      // targets shifted by one
        }
        const int64_t offset = validation ? 60000 : 0;
        EXPECT_EQ((row_tokens[0] - offset) % kSeqLen, 0);  // a sample boundary of its split
        samples.insert((row_tokens[0] - offset) / kSeqLen);
      }
    }
  }
  return samples;
}

TEST(BatchLoader, GlobalBatchIsTheSameSampleSetForEveryDataParallelSize) {
  ScratchDir dir;
  write_token_file(dir.file("b.h5"), counting_contents(65000, 70000, 60000, 65000));
  const TokenDataset dataset(dir.file("b.h5"), MPI_COMM_SELF);
  const int64_t global_batch = 16;
  for (int64_t step : {0, 1, 7, 300}) {  // 300 * 16 > 3749 samples: a later epoch
    const std::multiset<int64_t> reference = step_samples(dataset, global_batch, 16, 1, step, false);
    EXPECT_EQ(static_cast<int64_t>(reference.size()), global_batch);
    EXPECT_EQ(std::set<int64_t>(reference.begin(), reference.end()).size(), reference.size());
    EXPECT_EQ(step_samples(dataset, global_batch, 2, 1, step, false), reference);
    EXPECT_EQ(step_samples(dataset, global_batch, 4, 2, step, false), reference);
    EXPECT_EQ(step_samples(dataset, global_batch, 1, 2, step, false), reference);
    EXPECT_EQ(step_samples(dataset, global_batch, 2, 4, step, false), reference);
    EXPECT_EQ(step_samples(dataset, global_batch, 4, 4, step, false), reference);
  }
}

TEST(BatchLoader, TrainBatchFollowsTheSampleOrder) {
  ScratchDir dir;
  write_token_file(dir.file("o.h5"), counting_contents(65000, 70000, 60000, 65000));
  const TokenDataset dataset(dir.file("o.h5"), MPI_COMM_SELF);
  SampleOrder order(dataset.num_samples(Split::kTrain, kSeqLen), 2024);
  std::multiset<int64_t> expected;
  for (int64_t p = 3 * 8; p < 4 * 8; ++p) expected.insert(order.sample_at(p));
  EXPECT_EQ(step_samples(dataset, 8, 2, 2, 3, false), expected);
}

TEST(BatchLoader, ValidationBatchesAreInFileOrderAndWrap) {
  ScratchDir dir;
  // validation split: 5000 tokens -> 312 samples of 16
  write_token_file(dir.file("v.h5"), counting_contents(65000, 70000, 60000, 65000));
  const TokenDataset dataset(dir.file("v.h5"), MPI_COMM_SELF);
  ASSERT_EQ(dataset.num_samples(Split::kValidation, kSeqLen), 312);
  std::multiset<int64_t> first;
  for (int64_t s = 8; s < 16; ++s) first.insert(s);
  EXPECT_EQ(step_samples(dataset, 8, 2, 2, 1, true), first);
  std::multiset<int64_t> wrapped;  // batch 39 covers positions 312..319 -> samples 0..7
  for (int64_t s = 0; s < 8; ++s) wrapped.insert(s);
  EXPECT_EQ(step_samples(dataset, 8, 4, 1, 39, true), wrapped);
  EXPECT_EQ(step_samples(dataset, 8, 1, 4, 39, true), wrapped);
}

TEST(BatchLoader, RejectsGeometryThatDoesNotDivideTheGlobalBatch) {
  ScratchDir dir;
  write_token_file(dir.file("g.h5"), counting_contents(1000, 1000, 900, 1000));
  const TokenDataset dataset(dir.file("g.h5"), MPI_COMM_SELF);
  EXPECT_THROW(BatchLoader(dataset, BatchGeometry{10, 4, 1, 0, 8}, 1), std::invalid_argument);
  EXPECT_THROW(BatchLoader(dataset, BatchGeometry{8, 2, 2, 2, 8}, 1), std::invalid_argument);
  EXPECT_THROW(BatchLoader(dataset, BatchGeometry{8, 2, 2, 0, 0}, 1), std::invalid_argument);
}

TEST(BatchLoader, SplitTooShortForOneSampleIsAUserError) {
  ScratchDir dir;
  write_token_file(dir.file("s.h5"), counting_contents(40, 100, 30, 40));
  const TokenDataset dataset(dir.file("s.h5"), MPI_COMM_SELF);
  EXPECT_THROW(BatchLoader(dataset, BatchGeometry{2, 1, 1, 0, 30}, 1), UserError);
  BatchLoader loader(dataset, BatchGeometry{2, 1, 1, 0, 16}, 1);  // validation: 10 tokens
  std::vector<int32_t> tokens(16), targets(16);
  EXPECT_NO_THROW(loader.load_train(0, 0, tokens.data(), targets.data()));
  EXPECT_THROW(loader.load_validation(0, 0, tokens.data(), targets.data()), UserError);
}

}  // namespace
}  // namespace trident::io
