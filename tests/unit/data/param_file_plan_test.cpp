// Who writes what in a parameter file (io/param_file_plan.h), for ranks that need not exist: each
// rank's message made as gather_holdings makes it, concatenated in rank order and read back, then
// planned. Ranks holding the same list send it once; the plan must be the one that every rank
// sending its own list gives (the gathering before 2026-11-25), its errors naming the same ranks.
#include "io/param_file_plan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>  // std::pair
#include <vector>

#include "io/user_error.h"

namespace trident::io::param_file_detail {
namespace {

// One rank of a tp x dp layout (rank = dp_rank * tp + tp_rank): "w" [4, 6] split along axis 1
// between the tensor ranks, "b" [6] whole on every rank. Each data-parallel rank writes its band
// of a third of its slice of "w", and tensor rank 0's data-parallel ranks their third of "b".
std::vector<TensorSlice> layout_rank(int rank, int tp, int dp) {
  const int tp_rank = rank % tp, dp_rank = rank / tp;
  const int64_t w_local = 4 * 6 / tp, w_band = w_local / dp, b_band = 6 / dp;
  TensorSlice w{"w", {4, 6}, 1, tp_rank * (6 / tp), 6 / tp, nullptr, true, dp_rank * w_band, w_band};
  TensorSlice b{"b", {6}, -1, 0, 0, nullptr, tp_rank == 0, dp_rank * b_band, tp_rank == 0 ? b_band : 0};
  return {w, b};
}

struct Gathered {
  GatheredHoldings holdings;
  std::size_t bytes = 0;  // what every rank receives
};

// As gather_holdings, without MPI. share = false: every rank sends its own list.
Gathered gather(const std::vector<std::vector<TensorSlice>>& ranks, bool share) {
  std::vector<ListKey> keys;
  std::vector<std::vector<char>> lists;
  for (const auto& tensors : ranks) {
    lists.push_back(held_list_bytes(tensors));
    keys.push_back(list_key(lists.back()));
  }
  std::vector<int> lowest = lowest_holders(keys);
  if (!share) {
    for (std::size_t r = 0; r < lowest.size(); ++r) lowest[r] = static_cast<int>(r);
  }
  std::vector<char> all;
  std::vector<int> bytes;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const std::vector<char> message = holdings_message(ranks[r], lists[r], lowest[r] == static_cast<int>(r));
    all.insert(all.end(), message.begin(), message.end());
    bytes.push_back(static_cast<int>(message.size()));
  }
  return {parse_holdings(all, bytes, lowest), all.size()};
}

std::vector<std::vector<TensorSlice>> layout(int tp, int dp) {
  std::vector<std::vector<TensorSlice>> ranks;
  for (int r = 0; r < tp * dp; ++r) ranks.push_back(layout_rank(r, tp, dp));
  return ranks;
}

std::string plan_error(const std::vector<std::vector<TensorSlice>>& ranks, bool share) {
  try {
    make_plan(gather(ranks, share).holdings, 0, ranks[0], 1 << 20, "p.h5");
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(ParamFilePlan, ListsAreKeyedByTheirBytes) {
  const auto ranks = layout(2, 3);
  EXPECT_EQ(list_key(held_list_bytes(ranks[0])).hash, list_key(held_list_bytes(ranks[2])).hash);
  EXPECT_NE(list_key(held_list_bytes(ranks[0])).hash, list_key(held_list_bytes(ranks[1])).hash);
  std::vector<ListKey> keys;
  for (const auto& r : ranks) keys.push_back(list_key(held_list_bytes(r)));
  EXPECT_EQ(lowest_holders(keys), (std::vector<int>{0, 1, 0, 1, 0, 1}));
}

// The replicas' lists travel once; the written parts of every rank, in rank order.
TEST(ParamFilePlan, ReplicasSendTheirListOnce) {
  const Gathered g = gather(layout(2, 3), true);
  ASSERT_EQ(g.holdings.held.size(), 4u);  // two lists of two tensors
  EXPECT_EQ(g.holdings.held[0].rank, 0);
  EXPECT_EQ(g.holdings.held[2].rank, 1);
  ASSERT_EQ(g.holdings.written.size(), 9u);  // "w" on 6 ranks, "b" on tensor rank 0's 3
  for (std::size_t i = 1; i < g.holdings.written.size(); ++i) {
    EXPECT_LE(g.holdings.written[i - 1].rank, g.holdings.written[i].rank);
  }
  const Holding& w5 = g.holdings.written[8];  // rank 5's part of "w": tensor rank 1, band 2
  EXPECT_EQ(w5.name, "w");
  EXPECT_EQ(w5.rank, 5);
  EXPECT_EQ(w5.axis, 1);
  EXPECT_EQ(w5.begin, 3);
  EXPECT_EQ(w5.write_begin, 8);
  EXPECT_EQ(w5.write_count, 4);
  EXPECT_LT(g.bytes, gather(layout(2, 3), false).bytes);
}

// What every rank receives grows with the written parts, not with ranks x tensors: 64 replicas
// send one list between them.
TEST(ParamFilePlan, GatheredBytesGrowWithTheWrittenParts) {
  std::vector<std::vector<TensorSlice>> ranks(64, layout_rank(0, 1, 1));
  for (auto& r : ranks) r[1].write = false;  // "b" written by none, "w" by all: duplicates
  const std::size_t list = held_list_bytes(ranks[0]).size();
  const Gathered shared = gather(ranks, true), own = gather(ranks, false);
  EXPECT_EQ(shared.bytes, list + 64 * (1 + 8 + 24));  // flag, part count, one part
  EXPECT_GE(own.bytes, 64 * list);
}

// The same plan as when every rank sends its own list, for every rank.
TEST(ParamFilePlan, SharingListsGivesEveryRanksPlan) {
  for (const auto& [tp, dp] : {std::pair{1, 1}, std::pair{2, 3}, std::pair{3, 2}, std::pair{1, 6}}) {
    const auto ranks = layout(tp, dp);
    const Gathered shared = gather(ranks, true), own = gather(ranks, false);
    for (int r = 0; r < tp * dp; ++r) {
      SCOPED_TRACE("tp " + std::to_string(tp) + " dp " + std::to_string(dp) + " rank " + std::to_string(r));
      const auto a = make_plan(shared.holdings, r, ranks[static_cast<std::size_t>(r)], 5, "p.h5");
      const auto b = make_plan(own.holdings, r, ranks[static_cast<std::size_t>(r)], 5, "p.h5");
      ASSERT_EQ(a.size(), 2u);
      ASSERT_EQ(b.size(), 2u);
      for (std::size_t p = 0; p < a.size(); ++p) {
        EXPECT_EQ(a[p].name, b[p].name);
        EXPECT_EQ(a[p].shape, b[p].shape);
        EXPECT_EQ(a[p].local, b[p].local);
        EXPECT_EQ(a[p].writes, b[p].writes);
        EXPECT_EQ(a[p].transfers, b[p].transfers);
      }
      EXPECT_EQ(a[0].name, "w");
      EXPECT_TRUE(a[0].writes);
      EXPECT_EQ(a[1].writes, r % tp == 0);
    }
  }
}

// A shape that differs names the lowest rank holding the tensor and the lowest that differs,
// as when every rank's list was read.
TEST(ParamFilePlan, DifferentShapesNameTheLowestRanks) {
  auto ranks = layout(2, 3);
  for (const int r : {3, 5}) ranks[static_cast<std::size_t>(r)][1].global_shape = {7};
  for (const bool share : {true, false}) {
    const std::string error = plan_error(ranks, share);
    EXPECT_NE(error.find("tensor 'b' has different global shapes on ranks 0 and 3"), std::string::npos) << error;
  }
}

TEST(ParamFilePlan, UncoveredElementsAndOverlapsAreRefused) {
  auto ranks = layout(2, 3);
  ranks[4][0].write_count = 3;  // one element of rank 4's band of "w" owned by nobody
  for (const bool share : {true, false}) {
    const std::string error = plan_error(ranks, share);
    EXPECT_NE(error.find("tensor 'w': the ranks' owned slices do not cover every element"), std::string::npos)
        << error;
  }
  ranks = layout(2, 3);
  ranks[4][0].write_begin = 3;  // rank 4's band starts inside rank 0's
  for (const bool share : {true, false}) {
    const std::string error = plan_error(ranks, share);
    EXPECT_NE(error.find("ranks 0 and 4 own overlapping slices"), std::string::npos) << error;
  }
}

TEST(ParamFilePlan, ATensorListedTwiceByOneRankIsRefused) {
  std::vector<TensorSlice> tensors = layout_rank(0, 2, 3);
  const std::vector<float> data(24, 1.0f);
  for (TensorSlice& t : tensors) t.data = data.data();
  EXPECT_NO_THROW(check_local(tensors, "p.h5"));
  tensors.push_back(tensors[0]);
  try {
    check_local(tensors, "p.h5");
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'w' is listed twice by one rank"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trident::io::param_file_detail
