// The synthetic Markov source: deterministic, sparse exactly as specified, and its empirical
// conditional entropy matches the entropy rate it advertises (the loss floor).
#include "io/synthetic_source.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "io/token_dataset.h"
#include "io/user_error.h"
#include "tests/unit/data/data_test_support.h"

namespace trident::io {
namespace {

using testing::ScratchDir;

uint64_t context_key(const std::vector<uint32_t>& tokens, size_t end, int order, int64_t vocab) {
  uint64_t key = 0;
  for (size_t i = end - static_cast<size_t>(order); i < end; ++i) {
    key = key * static_cast<uint64_t>(vocab) + tokens[i];
  }
  return key;
}

TEST(SyntheticSource, IsDeterministicForItsSeed) {
  const SyntheticSource source(32, 2, 4, 1234);
  const std::vector<uint32_t> a = source.generate(5000);
  EXPECT_EQ(a, SyntheticSource(32, 2, 4, 1234).generate(5000));
  EXPECT_NE(a, SyntheticSource(32, 2, 4, 1235).generate(5000));
  EXPECT_NE(a, source.generate(5000, 1));  // the validation stream is another sequence
  const std::vector<uint32_t> prefix = source.generate(100);
  EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), a.begin()));
}

TEST(SyntheticSource, TokensStayInsideTheVocabulary) {
  const SyntheticSource source(7, 3, 3, 5);
  for (uint32_t token : source.generate(20000)) EXPECT_LT(token, 7u);
}

TEST(SyntheticSource, EveryContextHasExactlyBranchingDistinctSuccessors) {
  const SyntheticSource source(50, 2, 6, 77);
  for (uint32_t a = 0; a < 50; a += 7) {
    for (uint32_t b = 0; b < 50; b += 3) {
      const std::vector<uint32_t> next = source.successors({a, b});
      ASSERT_EQ(next.size(), 6u);
      EXPECT_EQ(std::set<uint32_t>(next.begin(), next.end()).size(), 6u);
      for (uint32_t token : next) EXPECT_LT(token, 50u);
    }
  }
  // b = V: the successors are a permutation of the vocabulary.
  const std::vector<uint32_t> all = SyntheticSource(5, 1, 5, 3).successors({2});
  EXPECT_EQ(std::set<uint32_t>(all.begin(), all.end()), (std::set<uint32_t>{0, 1, 2, 3, 4}));
}

TEST(SyntheticSource, EntropyRateIsTheEntropyOfTheSuccessorProbabilities) {
  const SyntheticSource source(32, 2, 4, 1);
  const double expected = -(8.0 / 15 * std::log(8.0 / 15) + 4.0 / 15 * std::log(4.0 / 15) +
                            2.0 / 15 * std::log(2.0 / 15) + 1.0 / 15 * std::log(1.0 / 15));
  EXPECT_NEAR(source.entropy_rate_nats(), expected, 1e-12);
  EXPECT_DOUBLE_EQ(SyntheticSource(32, 2, 1, 1).entropy_rate_nats(), 0.0);
  EXPECT_NEAR(SyntheticSource(32, 0, 2, 1).entropy_rate_nats(),
              -(2.0 / 3 * std::log(2.0 / 3) + 1.0 / 3 * std::log(1.0 / 3)), 1e-12);
}

// Over a long sample: each context is followed only by its b successors, all of them seen
// where the context occurs often; the most probable successor is the most frequent; and the
// plug-in conditional entropy H(next | previous k) is within 2% of entropy_rate_nats.
TEST(SyntheticSource, EmpiricalStatisticsMatchTheSpecification) {
  const int64_t vocab = 16;
  const int order = 2;
  const int branching = 4;
  const SyntheticSource source(vocab, order, branching, 1234);
  const std::vector<uint32_t> tokens = source.generate(400000);
  std::map<uint64_t, std::map<uint32_t, int64_t>> counts;
  std::map<uint64_t, std::vector<uint32_t>> contexts;
  for (size_t t = order; t < tokens.size(); ++t) {
    const uint64_t key = context_key(tokens, t, order, vocab);
    ++counts[key][tokens[t]];
    if (contexts.count(key) == 0) {
      contexts[key] = std::vector<uint32_t>(tokens.begin() + static_cast<long>(t) - order,
                                            tokens.begin() + static_cast<long>(t));
    }
  }
  double conditional_entropy = 0.0;
  const auto total = static_cast<double>(tokens.size() - order);
  int well_visited = 0;
  for (const auto& [key, next] : counts) {
    const std::vector<uint32_t> successors = source.successors(contexts[key]);
    int64_t visits = 0;
    for (const auto& [token, count] : next) {
      visits += count;
      EXPECT_NE(std::find(successors.begin(), successors.end(), token), successors.end());
    }
    EXPECT_LE(next.size(), static_cast<size_t>(branching));
    if (visits >= 300) {
      ++well_visited;
      EXPECT_EQ(next.size(), static_cast<size_t>(branching));
      const auto most = std::max_element(next.begin(), next.end(), [](auto& x, auto& y) {
        return x.second < y.second;
      });
      EXPECT_EQ(most->first, successors[0]);
    }
    for (const auto& [token, count] : next) {
      const double p = static_cast<double>(count) / static_cast<double>(visits);
      conditional_entropy -= static_cast<double>(visits) / total * p * std::log(p);
    }
  }
  EXPECT_GE(well_visited, 20);
  EXPECT_NEAR(conditional_entropy, source.entropy_rate_nats(),
              0.02 * source.entropy_rate_nats());
}

TEST(SyntheticSource, RejectsParametersOutOfRange) {
  EXPECT_THROW(SyntheticSource(1, 2, 1, 0), UserError);
  EXPECT_THROW(SyntheticSource(32, -1, 4, 0), UserError);
  EXPECT_THROW(SyntheticSource(32, 65, 4, 0), UserError);
  EXPECT_THROW(SyntheticSource(32, 2, 0, 0), UserError);
  EXPECT_THROW(SyntheticSource(32, 2, 33, 0), UserError);
  EXPECT_THROW(SyntheticSource(1000, 2, 65, 0), UserError);
}

TEST(SyntheticSource, TrainSplitIsTheFloorWithOneTokenEachSide) {
  EXPECT_EQ(train_split_tokens(1000, 0.05), 950);
  EXPECT_EQ(train_split_tokens(1001, 0.05), 950);  // floor(950.95)
  EXPECT_EQ(train_split_tokens(2, 0.001), 1);
  EXPECT_EQ(train_split_tokens(2, 0.5), 1);
  EXPECT_EQ(train_split_tokens(11, 0.5), 5);  // floor(5.5): the larger half is validation's
  EXPECT_THROW(train_split_tokens(1, 0.5), UserError);
  EXPECT_THROW(train_split_tokens(100, 0.0), UserError);
  EXPECT_THROW(train_split_tokens(100, 0.6), UserError);  // more than kMaxValFraction
}

TEST(SyntheticSource, FileHoldsTrainAndValidationStreamsAsTwoDocuments) {
  ScratchDir dir;
  const std::string path = dir.file("synthetic.h5");
  make_synthetic_file(path, 32, 2, 4, 10000, 0.1, 99);
  const TokenDataset dataset(path, MPI_COMM_SELF);
  const TokenFileInfo& info = dataset.info();
  const SyntheticSource source(32, 2, 4, 99);
  EXPECT_EQ(info.vocab_size, 33);
  EXPECT_EQ(info.eot_id, 32);
  EXPECT_EQ(info.total_tokens, 10000);
  EXPECT_EQ(info.train_tokens, 9000);
  EXPECT_EQ(info.num_docs, 2);
  EXPECT_EQ(info.tokenizer, "synthetic");
  EXPECT_DOUBLE_EQ(info.entropy_rate_nats, source.entropy_rate_nats());
  EXPECT_NE(info.description.find("order-2"), std::string::npos) << info.description;

  // Sample 0 of each split is the start of that split's stream.
  std::vector<int32_t> sample(101);
  const std::vector<uint32_t> train = source.generate(101, 0);
  const std::vector<uint32_t> validation = source.generate(101, 1);
  dataset.read_sample(Split::kTrain, 0, 100, sample.data());
  for (int t = 0; t <= 100; ++t) EXPECT_EQ(sample[t], static_cast<int32_t>(train[t]));
  dataset.read_sample(Split::kValidation, 0, 100, sample.data());
  for (int t = 0; t <= 100; ++t) EXPECT_EQ(sample[t], static_cast<int32_t>(validation[t]));
  for (int64_t i = 0; i < dataset.num_samples(Split::kTrain, 100); ++i) {
    dataset.read_sample(Split::kTrain, i, 100, sample.data());
    for (int32_t token : sample) ASSERT_NE(token, 32);  // end-of-text never occurs
  }
}

TEST(SyntheticSource, FileParametersOutOfRangeAreUserErrors) {
  ScratchDir dir;
  EXPECT_THROW(make_synthetic_file(dir.file("x.h5"), 32, 2, 40, 1000, 0.1, 1), UserError);
  EXPECT_THROW(make_synthetic_file(dir.file("x.h5"), 32, 2, 4, 1, 0.1, 1), UserError);
  EXPECT_THROW(make_synthetic_file(dir.file("x.h5"), 32, 2, 4, 1000, 1.5, 1), UserError);
}

// A file made with some parameters is recognised as theirs under any seed, and each changed
// parameter (vocabulary, order, branching, tokens, validation share) is a named difference.
TEST(SyntheticSource, FileDifferenceNamesChangedParametersButNotTheSeed) {
  ScratchDir dir;
  make_synthetic_file(dir.file("s.h5"), 32, 2, 4, 10000, 0.1, 99);
  const TokenFileInfo info = read_token_file_info(dir.file("s.h5"));
  EXPECT_EQ(synthetic_file_difference(info, 32, 2, 4, 10000, 0.1), "");
  const std::string made = "'synthetic order-2 Markov source: vocabulary 32, branching 4', 10000 tokens, 9000 for training";
  EXPECT_EQ(synthetic_file_difference(info, 32, 2, 4, 20000, 0.1),
            made + "; the deck's data.synthetic_* and data.val_fraction ask for 'synthetic order-2 Markov source: "
                   "vocabulary 32, branching 4', 20000 tokens, 18000 for training");
  EXPECT_NE(synthetic_file_difference(info, 33, 2, 4, 10000, 0.1), "");
  EXPECT_NE(synthetic_file_difference(info, 32, 3, 4, 10000, 0.1), "");
  EXPECT_NE(synthetic_file_difference(info, 32, 2, 3, 10000, 0.1), "");
  EXPECT_NE(synthetic_file_difference(info, 32, 2, 4, 10000, 0.2), "");
  // "branching 4" must not pass for "branching 40" (the parameters end at a comma).
  make_synthetic_file(dir.file("wide.h5"), 64, 2, 40, 10000, 0.1, 99);
  EXPECT_NE(synthetic_file_difference(read_token_file_info(dir.file("wide.h5")), 64, 2, 4, 10000, 0.1), "");
}

}  // namespace
}  // namespace trident::io
