// Rank-grid math against worked tables (mission.md point 2 and a 16-rank layout).
#include <gtest/gtest.h>

#include <array>

#include "parallel/grad_buckets.h"
#include "parallel/rank_grid.h"

using trident::parallel::GroupKind;
using trident::parallel::RankGrid;
using Groups = std::vector<std::vector<int>>;

TEST(RankGrid, EightRanksTwoByTwoByTwoMatchesMission) {
  const RankGrid grid(/*tp=*/2, /*dp=*/2, /*pp=*/2);
  EXPECT_EQ(grid.all_groups(GroupKind::kTensor), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(grid.all_groups(GroupKind::kData), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(grid.all_groups(GroupKind::kPipeline), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(grid.all_groups(GroupKind::kModel), (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  // Stage 0 is ranks 0-3, stage 1 ranks 4-7.
  for (int r = 0; r < 8; ++r) EXPECT_EQ(grid.coord(r).pp_rank, r / 4) << "rank " << r;
}

TEST(RankGrid, EightRanksDataTwoTensorFourMatchesMission) {
  const RankGrid grid(/*tp=*/4, /*dp=*/2, /*pp=*/1);
  EXPECT_EQ(grid.all_groups(GroupKind::kTensor), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(grid.all_groups(GroupKind::kData), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
}

TEST(RankGrid, SixteenRanksTwoFourTwo) {
  // tp = 2, dp = 4, pp = 2: rank = tp_rank + 2 * (dp_rank + 4 * stage).
  const RankGrid grid(2, 4, 2);
  EXPECT_EQ(grid.all_groups(GroupKind::kTensor),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(grid.all_groups(GroupKind::kData), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}));
  EXPECT_EQ(grid.all_groups(GroupKind::kPipeline),
            (Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}}));
  const auto c = grid.coord(13);
  EXPECT_EQ(c.tp_rank, 1);
  EXPECT_EQ(c.dp_rank, 2);
  EXPECT_EQ(c.pp_rank, 1);
  for (int r = 0; r < 16; ++r) EXPECT_EQ(grid.rank_of(grid.coord(r)), r);
}

TEST(RankGrid, PureDataParallelHasOneDataGroup) {
  const RankGrid grid(1, 4, 1);
  EXPECT_EQ(grid.all_groups(GroupKind::kData), (Groups{{0, 1, 2, 3}}));
  EXPECT_EQ(grid.all_groups(GroupKind::kTensor).size(), 4u);
}

TEST(RankGrid, LayoutTableListsEveryRankAndGroup) {
  const std::string table = RankGrid(2, 2, 2).layout_table();
  EXPECT_NE(table.find("tensor groups: [0,1] [2,3] [4,5] [6,7]"), std::string::npos) << table;
  EXPECT_NE(table.find("data groups: [0,2] [1,3] [4,6] [5,7]"), std::string::npos) << table;
  EXPECT_NE(table.find("pipeline groups: [0,4] [1,5] [2,6] [3,7]"), std::string::npos) << table;
}

TEST(GradientBuckets, PlanCutsAtTensorBoundariesFromTheEnd) {
  // Tensors of 10, 5, 20, 3, 7 elements: ends 10, 15, 35, 38, 45.
  const std::vector<std::size_t> ends = {10, 15, 35, 38, 45};
  const auto buckets = trident::parallel::plan_buckets(ends, 9);
  // From the end: [35,45) has 10 >= 9; [15,35) 20; [0,15) the rest.
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].begin, 35u);
  EXPECT_EQ(buckets[0].end, 45u);
  EXPECT_EQ(buckets[1].begin, 15u);
  EXPECT_EQ(buckets[1].end, 35u);
  EXPECT_EQ(buckets[2].begin, 0u);
  EXPECT_EQ(buckets[2].end, 15u);
}

// ZeRO-1: the same buckets cut again at the blocks of 16, each piece owned by its block's rank,
// still from the end of the arena, and together covering it once.
TEST(GradientBuckets, OwnerBlocksCutBucketsAndNameTheirRank) {
  const std::vector<std::size_t> ends = {10, 15, 35, 38, 45};
  const auto buckets = trident::parallel::plan_buckets(ends, 9, 16);
  // [35,45) crosses 32? no: it lies in block 2 [32,48). [15,35) crosses 16 and 32. [0,15): block 0.
  const std::vector<std::array<std::size_t, 3>> expected = {
      {35, 45, 2}, {32, 35, 2}, {16, 32, 1}, {15, 16, 0}, {0, 15, 0}};
  ASSERT_EQ(buckets.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(buckets[i].begin, expected[i][0]) << i;
    EXPECT_EQ(buckets[i].end, expected[i][1]) << i;
    EXPECT_EQ(buckets[i].owner, static_cast<int>(expected[i][2])) << i;
  }
  // Without owner blocks nobody owns a bucket: all-reduces.
  for (const auto& b : trident::parallel::plan_buckets(ends, 9)) EXPECT_EQ(b.owner, -1);
}

TEST(GradientBuckets, HugeBucketSizeGivesOneBucket) {
  const auto buckets = trident::parallel::plan_buckets({4, 8, 12}, 1000);
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_EQ(buckets[0].begin, 0u);
  EXPECT_EQ(buckets[0].end, 12u);
}

#include "parallel/zero_shard.h"

TEST(ZeroShard, BlocksAreEqualAlignedAndCoverTheArena) {
  for (std::size_t n : {1u, 15u, 16u, 17u, 1000u, 124475904u}) {
    for (int dp : {1, 2, 3, 4, 8}) {
      std::size_t covered = 0;
      for (int r = 0; r < dp; ++r) {
        const auto s = trident::parallel::shard_arena(n, dp, r);
        EXPECT_EQ(s.begin, covered) << n << " " << dp << " " << r;
        EXPECT_EQ(s.size(), s.block);
        EXPECT_EQ(s.begin % 16, 0u);
        covered = s.end;
      }
      const auto s = trident::parallel::shard_arena(n, dp, 0);
      EXPECT_EQ(covered, s.padded_size);
      EXPECT_GE(s.padded_size, n);
      EXPECT_LT(s.padded_size - n, static_cast<std::size_t>(16 * dp));  // padding stays small
    }
  }
}

#include "parallel/tensor_parallel.h"

TEST(VocabShard, RanksOwnEqualRowRangesAndTheRealTokensAmongThem) {
  // GPT-2 with tp = 2: 50257 real tokens padded to 50432, a multiple of vocab_multiple 128 x tp 2.
  const auto a = trident::parallel::vocab_shard(50432, 50257, 2, 0);
  const auto b = trident::parallel::vocab_shard(50432, 50257, 2, 1);
  EXPECT_EQ(a.begin, 0);
  EXPECT_EQ(a.end, 25216);
  EXPECT_EQ(a.real, 25216);
  EXPECT_EQ(b.begin, 25216);
  EXPECT_EQ(b.real, 50257 - 25216);
  // A rank may hold padding only.
  const auto last = trident::parallel::vocab_shard(16, 9, 4, 3);
  EXPECT_EQ(last.begin, 12);
  EXPECT_EQ(last.real, 0);
  const auto third = trident::parallel::vocab_shard(16, 9, 4, 2);
  EXPECT_EQ(third.real, 1);
}
