// MpiComm, ParallelContext and GradientBuckets under mpirun (2 and 4 ranks): every collective
// against the value computed by hand, group membership against the rank-grid table.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "parallel/grad_buckets.h"
#include "parallel/mpi_comm.h"
#include "parallel/param_gather.h"
#include "parallel/parallel_context.h"
#include "parallel/tensor_parallel.h"
#include "parallel/zero_shard.h"

using namespace trident::parallel;

namespace {
int world_rank() {
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int s;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}
MpiComm make_world() {
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  return MpiComm(dup, "world");
}
}  // namespace

TEST(MpiComm, AllReduceSumsEveryRank) {
  auto comm = make_world();
  const int n = comm.size();
  std::vector<float> data = {static_cast<float>(comm.rank()), 1.0f, 2.5f};
  comm.all_reduce_sum(data.data(), data.size());
  EXPECT_FLOAT_EQ(data[0], static_cast<float>(n * (n - 1) / 2));
  EXPECT_FLOAT_EQ(data[1], static_cast<float>(n));
  EXPECT_FLOAT_EQ(data[2], 2.5f * static_cast<float>(n));
  double d = comm.rank() + 0.5;
  comm.all_reduce_sum(&d, 1);
  EXPECT_DOUBLE_EQ(d, n * (n - 1) / 2.0 + 0.5 * n);
  EXPECT_EQ(comm.all_reduce_max(comm.rank() * 3), 3 * (n - 1));
  std::vector<float> maxima = {static_cast<float>(comm.rank()), -static_cast<float>(comm.rank())};
  comm.all_reduce_max(maxima.data(), maxima.size());
  EXPECT_EQ(maxima[0], static_cast<float>(n - 1));
  EXPECT_EQ(maxima[1], 0.0f);
}

TEST(MpiComm, NonBlockingAllReduceCompletesOnWait) {
  auto comm = make_world();
  std::vector<float> data(1000, static_cast<float>(comm.rank() + 1));
  auto request = comm.iall_reduce_sum(data.data(), data.size(), WirePrecision::kFp32);
  request->wait();
  const float expected = static_cast<float>(comm.size() * (comm.size() + 1) / 2);
  for (float v : data) ASSERT_FLOAT_EQ(v, expected);
  EXPECT_TRUE(request->test());
}

TEST(MpiComm, ReduceScatterAndAllGatherAreDuals) {
  auto comm = make_world();
  const int n = comm.size();
  const size_t block = 3;
  std::vector<float> send(block * n);
  for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>(i + 100 * comm.rank());
  std::vector<float> mine(block);
  comm.reduce_scatter_sum(send.data(), mine.data(), block);
  for (size_t j = 0; j < block; ++j) {
    const size_t i = comm.rank() * block + j;
    EXPECT_FLOAT_EQ(mine[j], static_cast<float>(n * i + 100 * n * (n - 1) / 2));
  }
  std::vector<float> gathered(block * n);
  comm.all_gather(mine.data(), gathered.data(), block);
  for (int r = 0; r < n; ++r)
    for (size_t j = 0; j < block; ++j)
      EXPECT_FLOAT_EQ(gathered[r * block + j], static_cast<float>(n * (r * block + j) + 100 * n * (n - 1) / 2));
}

TEST(MpiComm, InPlaceReduceScatterAndAllGatherUseTheOwnBlock) {
  auto comm = make_world();
  const int n = comm.size();
  const size_t block = 5;
  std::vector<float> data(block * n);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) + 0.5f * static_cast<float>(comm.rank());
  comm.reduce_scatter_sum_in_place(data.data(), block, WirePrecision::kFp32);
  const float rank_sum = 0.5f * static_cast<float>(n * (n - 1) / 2);
  for (size_t j = 0; j < block; ++j) {
    const size_t i = comm.rank() * block + j;
    EXPECT_FLOAT_EQ(data[i], static_cast<float>(n) * static_cast<float>(i) + rank_sum) << i;
  }
  // Each rank writes a recognisable block, then gathers everyone's.
  for (size_t j = 0; j < block; ++j) data[comm.rank() * block + j] = static_cast<float>(1000 * comm.rank() + j);
  comm.all_gather_in_place(data.data(), block);
  for (int r = 0; r < n; ++r)
    for (size_t j = 0; j < block; ++j) EXPECT_EQ(data[r * block + j], static_cast<float>(1000 * r + j));
}

// Sequence parallelism's operators against tensor parallelism's: scatter_to_sp then
// gather_from_sp forward is reduce_from_tp's all-reduce, and gather_from_sp backward leaves in
// the own rows what copy_to_tp's all-reduce leaves there.
TEST(TensorParallel, SequenceParallelOperatorsSplitTheAllReduce) {
  auto comm = make_world();
  const TensorParallel tp(&comm);
  const int n = comm.size();
  const size_t rows = 2, C = 3, block = rows * C;
  std::vector<float> partial(block * n), summed(block * n);
  for (size_t i = 0; i < partial.size(); ++i) partial[i] = static_cast<float>(i % 7) + 0.25f * static_cast<float>(comm.rank());
  summed = partial;
  tp.reduce_from_tp_forward(summed.data(), summed.size());
  std::vector<float> own(block), full(block * n, -1.0f);
  tp.scatter_to_sp_forward(partial.data(), own.data(), block);
  for (size_t j = 0; j < block; ++j) EXPECT_FLOAT_EQ(own[j], summed[comm.rank() * block + j]);
  std::copy(own.begin(), own.end(), tp.own_block(full.data(), block).f32());
  tp.gather_from_sp_forward(full.data(), block);
  for (size_t i = 0; i < full.size(); ++i) EXPECT_FLOAT_EQ(full[i], summed[i]) << i;
  // Backward: scatter_to_sp gathers the rows' gradients; gather_from_sp sums the own rows.
  std::vector<float> grads(block * n);
  tp.scatter_to_sp_backward(own.data(), grads.data(), block);
  for (size_t i = 0; i < grads.size(); ++i) EXPECT_FLOAT_EQ(grads[i], summed[i]) << i;
  grads = partial;
  tp.gather_from_sp_backward(grads.data(), block);
  const float* mine = tp.own_block(grads.data(), block).f32();
  for (size_t j = 0; j < block; ++j) EXPECT_FLOAT_EQ(mine[j], summed[comm.rank() * block + j]);
}

TEST(MpiComm, BroadcastSendRecvAndErrorAgreement) {
  auto comm = make_world();
  EXPECT_EQ(broadcast_string(comm, comm.rank() == 0 ? "deck text" : "", 0), "deck text");
  // Ring: send my rank to the next, receive from the previous (even ranks send first).
  const int n = comm.size();
  float out = static_cast<float>(comm.rank()), in = -1;
  const int next = (comm.rank() + 1) % n, prev = (comm.rank() + n - 1) % n;
  if (comm.rank() % 2 == 0) {
    comm.send(&out, 1, next);
    comm.recv(&in, 1, prev);
  } else {
    comm.recv(&in, 1, prev);
    comm.send(&out, 1, next);
  }
  EXPECT_FLOAT_EQ(in, static_cast<float>(prev));
  EXPECT_EQ(agree_on_error(comm, ""), "");
  // Ranks 1 and up fail with their own text: everyone gets rank 1's.
  const std::string mine = comm.rank() >= 1 ? "bad file on rank " + std::to_string(comm.rank()) : "";
  EXPECT_EQ(agree_on_error(comm, mine), "bad file on rank 1");
}

TEST(MpiComm, AllGatherStringsKeepsRankOrderAndLengths) {
  auto comm = make_world();
  // Lengths differ by rank and rank 1's is empty, as for a rank that sees no GPU.
  const auto text_of = [](int r) {
    return r == 1 ? std::string() : std::string(static_cast<std::size_t>(r) + 1, static_cast<char>('a' + r));
  };
  const std::vector<std::string> all = all_gather_strings(comm, text_of(comm.rank()));
  ASSERT_EQ(static_cast<int>(all.size()), comm.size());
  for (int r = 0; r < comm.size(); ++r) EXPECT_EQ(all[r], text_of(r)) << "rank " << r;
}

// Every rank of these tests runs on one machine, so the node group is the world.
TEST(ParallelContext, NodeGroupHoldsTheRanksOfThisMachine) {
  ParallelContext ctx(MPI_COMM_WORLD, 1, world_size(), 1);
  EXPECT_EQ(ctx.node_local_size(), world_size());
  EXPECT_EQ(ctx.node_local_rank(), world_rank());
  EXPECT_EQ(ctx.node().size(), world_size());
  const std::vector<std::string> ranks = all_gather_strings(ctx.node(), std::to_string(world_rank()));
  for (int r = 0; r < world_size(); ++r) EXPECT_EQ(ranks[r], std::to_string(r));
}

TEST(ParallelContext, GroupsMatchTheRankGrid) {
  const int n = world_size();
  // Pure data parallelism over the world and, with 4 ranks, every split that fits.
  std::vector<std::array<int, 3>> layouts = {{1, n, 1}};
  if (n == 4) layouts.push_back({2, 2, 1}), layouts.push_back({2, 1, 2}), layouts.push_back({1, 2, 2});
  for (const auto& [tp, dp, pp] : layouts) {
    ParallelContext ctx(MPI_COMM_WORLD, tp, dp, pp);
    const int rank = world_rank();
    for (auto [kind, comm] : {std::pair{GroupKind::kTensor, &ctx.tensor()}, {GroupKind::kData, &ctx.data()},
                              {GroupKind::kPipeline, &ctx.pipeline()}, {GroupKind::kModel, &ctx.model()}}) {
      const auto members = ctx.grid().group_members(kind, rank);
      ASSERT_EQ(comm->size(), static_cast<int>(members.size()));
      // Gather the world ranks of the group through the group's own communicator.
      std::vector<float> got(members.size());
      const float me = static_cast<float>(rank);
      comm->all_gather(&me, got.data(), 1);
      for (size_t i = 0; i < members.size(); ++i) EXPECT_EQ(got[i], static_cast<float>(members[i]));
    }
  }
}

TEST(GradientBuckets, OverlappedBucketsSumEveryElement) {
  auto comm = make_world();
  const std::vector<size_t> ends = {5, 12, 30, 31, 50};
  std::vector<float> grads(50);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>(i) * static_cast<float>(comm.rank() + 1);
  GradientBuckets buckets(comm, grads.data(), plan_buckets(ends, 8), WirePrecision::kFp32);
  buckets.begin();
  buckets.mark_final_from(30);  // as backward would: the last tensors first
  buckets.mark_final_from(12);
  buckets.finish();
  const int n = comm.size();
  for (size_t i = 0; i < grads.size(); ++i) EXPECT_FLOAT_EQ(grads[i], static_cast<float>(i) * static_cast<float>(n * (n + 1) / 2)) << i;
}

// ZeRO-1's reduction: the root receives the sum, every other rank keeps its own values.
TEST(MpiComm, NonBlockingReduceSumsAtTheRootOnly) {
  auto comm = make_world();
  const int n = comm.size();
  for (int root = 0; root < n; ++root) {
    std::vector<float> data(1000);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) * static_cast<float>(comm.rank() + 1);
    const std::vector<float> mine = data;
    comm.ireduce_sum(data.data(), data.size(), root, WirePrecision::kFp32)->wait();
    for (size_t i = 0; i < data.size(); ++i) {
      const float sum = static_cast<float>(i) * static_cast<float>(n * (n + 1) / 2);
      const float expected = comm.rank() == root ? sum : mine[i];
      ASSERT_EQ(data[i], expected) << "root " << root << ", element " << i;
    }
  }
  std::vector<float> one(1, 1.0f);
  EXPECT_THROW(comm.ireduce_sum(one.data(), 1, n, WirePrecision::kFp32), std::logic_error);
}

// Buckets owned by ranks (ZeRO-1's plan): each rank ends with the sums of its own block, as the
// in-place reduce-scatter of the whole arena gives them, bit for bit.
TEST(GradientBuckets, OwnedBucketsSumEachBlockAtItsRank) {
  auto comm = make_world();
  const int n = comm.size();
  const std::vector<size_t> ends = {5, 12, 30, 31, 50};
  const size_t block = shard_arena(50, n, 0).block;
  std::vector<float> grads(block * static_cast<size_t>(n), 0.0f);
  std::mt19937 rng(static_cast<unsigned>(5 + comm.rank()));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (size_t i = 0; i < 50; ++i) grads[i] = uniform(rng);
  std::vector<float> whole = grads;
  comm.reduce_scatter_sum_in_place(whole.data(), block, WirePrecision::kFp32);
  GradientBuckets buckets(comm, grads.data(), plan_buckets(ends, 8, block), WirePrecision::kFp32);
  buckets.begin();
  buckets.mark_final_from(30);
  buckets.mark_final_from(12);
  buckets.finish();
  const size_t begin = static_cast<size_t>(comm.rank()) * block;
  for (size_t i = begin; i < std::min<size_t>(begin + block, 50); ++i) {
    if (n <= 2) {
      ASSERT_EQ(grads[i], whole[i]) << i;  // one addition: the same in any order
    } else {
      ASSERT_NEAR(grads[i], whole[i], 1e-6f) << i;  // the library may order the sums differently
    }
  }
}

TEST(MpiComm, NonBlockingBroadcastCopiesTheRootsBitsInEveryStorage) {
  auto comm = make_world();
  const int root = comm.size() - 1;
  std::vector<float> f(7, static_cast<float>(comm.rank()) + 0.25f);
  std::vector<uint16_t> h(5, static_cast<uint16_t>(0x1000u + static_cast<unsigned>(comm.rank())));
  auto fr = comm.ibroadcast(f.data(), f.size(), root);
  auto hr = comm.ibroadcast(trident::kernels::ActPtr(h.data(), trident::kernels::Precision::kBf16), h.size(), root);
  hr->wait();
  fr->wait();
  for (float v : f) EXPECT_EQ(v, static_cast<float>(root) + 0.25f);
  for (uint16_t v : h) EXPECT_EQ(v, 0x1000u + static_cast<unsigned>(root));
  EXPECT_THROW(comm.ibroadcast(f.data(), 1, comm.size()), std::logic_error);
}

// ZeRO-1's overlapped gather: after wait_below(x) every element below x holds its owner's value
// (each rank starts with its own rank number everywhere, and owns its block of the buckets);
// after finish() the whole arena does, as one all-gather of the blocks would leave it.
TEST(ParameterGather, EachPieceArrivesFromItsOwnerByTheTimeForwardReachesIt) {
  auto comm = make_world();
  const int n = comm.size();
  const std::vector<size_t> ends = {5, 12, 30, 31, 50};
  const size_t block = shard_arena(50, n, 0).block;
  for (trident::kernels::Precision storage : {trident::kernels::Precision::kFp32, trident::kernels::Precision::kBf16}) {
    std::vector<float> f(block * static_cast<size_t>(n), static_cast<float>(comm.rank()));
    std::vector<uint16_t> h(f.size(), static_cast<uint16_t>(comm.rank()));
    const bool fp32 = storage == trident::kernels::Precision::kFp32;
    const trident::kernels::ActPtr params = fp32 ? trident::kernels::ActPtr(f.data())
                                                 : trident::kernels::ActPtr(h.data(), storage);
    auto value = [&](size_t i) { return fp32 ? f[i] : static_cast<float>(h[i]); };
    ParameterGather gather(comm, params, plan_buckets(ends, 8, block));
    ASSERT_FALSE(gather.pending());
    for (size_t i = 1; i < gather.pieces().size(); ++i) {
      ASSERT_EQ(gather.pieces()[i - 1].end, gather.pieces()[i].begin);  // ascending, no gaps
    }
    for (int step = 0; step < 2; ++step) {
      gather.start();
      EXPECT_EQ(gather.pending(), n > 1);
      for (size_t reached : {size_t{12}, size_t{31}}) {
        gather.wait_below(reached);
        for (size_t i = 0; i < reached; ++i) ASSERT_EQ(value(i), static_cast<float>(i / block)) << i;
      }
      gather.finish();
      EXPECT_FALSE(gather.pending());
      for (size_t i = 0; i < 50; ++i) ASSERT_EQ(value(i), static_cast<float>(i / block)) << i;
      // The next step: every rank's own block changes again (AdamW), the rest is stale.
      for (size_t i = 0; i < f.size(); ++i) {
        if (i / block != static_cast<size_t>(comm.rank())) {
          f[i] = -1.0f;
          h[i] = 0xffffu;
        }
      }
    }
  }
}

// A held range starts only in finish(), after what mark_final_from allowed; its sums are the same.
TEST(GradientBuckets, HeldBucketsStartOnlyInFinish) {
  auto comm = make_world();
  const std::vector<size_t> ends = {5, 12, 30, 31, 50};
  std::vector<float> grads(50, 1.0f);
  GradientBuckets buckets(comm, grads.data(), plan_buckets(ends, 8), WirePrecision::kFp32);
  buckets.hold_below(12);
  buckets.begin();
  buckets.mark_final_from(0);
  buckets.wait_started();
  const float n = static_cast<float>(comm.size());
  for (size_t i = 0; i < 50; ++i) ASSERT_EQ(grads[i], i < 12 ? 1.0f : n) << i;
  buckets.finish();
  for (size_t i = 0; i < 50; ++i) ASSERT_EQ(grads[i], n) << i;
}

// --- the 16-bit wire (parallel.grad_reduce) -------------------------------------------------------

namespace {
using trident::kernels::Precision;
using trident::kernels::round_to_precision;

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// 1 plus less than half a 16-bit unit at 1 (bf16's unit there is 2^-7, fp16's 2^-10): rounds
// to exactly 1 before it leaves the rank, while a float sum of n of them would not be n.
float just_above_one(Precision p) { return p == Precision::kBf16 ? 1.0f + 0x1p-9f + 0x1p-12f : 1.0f + 0x1p-12f; }
}  // namespace

// Each rank's values are rounded before they are summed, the sums are 16-bit values, and the
// same call gives the same bits every time.
TEST(MpiComm, SixteenBitAllReduceRoundsContributionsAndSums) {
  auto comm = make_world();
  const int n = comm.size();
  for (Precision p : {Precision::kBf16, Precision::kFp16}) {
    std::vector<float> data(300, just_above_one(p));
    comm.iall_reduce_sum(data.data(), data.size(), p)->wait();
    for (float v : data) ASSERT_EQ(v, static_cast<float>(n)) << trident::kernels::precision_name(p);

    std::mt19937 rng(static_cast<unsigned>(17 + comm.rank()));
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> random(5000);
    for (float& v : random) v = uniform(rng);
    std::vector<float> exact = random, first = random, second = random;
    comm.all_reduce_sum(exact.data(), exact.size());
    auto request = comm.iall_reduce_sum(first.data(), first.size(), p);
    request->wait();
    EXPECT_TRUE(request->test());
    comm.iall_reduce_sum(second.data(), second.size(), p)->wait();
    // n - 1 roundings of partial sums below n, plus n roundings of the inputs below 1: each at
    // most half a unit of the format (2^-8 relative for bf16, 2^-11 for fp16) of values < n.
    const float unit = p == Precision::kBf16 ? 0x1p-8f : 0x1p-11f;
    const float bound = static_cast<float>(2 * n) * unit * static_cast<float>(n);
    for (std::size_t i = 0; i < random.size(); ++i) {
      ASSERT_EQ(round_to_precision(first[i], p), first[i]) << "not a 16-bit value at " << i;
      ASSERT_EQ(bits_of(first[i]), bits_of(second[i])) << "not deterministic at " << i;
      ASSERT_NEAR(first[i], exact[i], bound) << i;
    }
  }
}

TEST(MpiComm, SixteenBitReduceScatterInPlaceSumsTheOwnBlock) {
  auto comm = make_world();
  const int n = comm.size();
  const std::size_t block = 7;
  for (Precision p : {Precision::kBf16, Precision::kFp16}) {
    std::vector<float> data(block * static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = just_above_one(p) * static_cast<float>(1 + i % 3);
    comm.reduce_scatter_sum_in_place(data.data(), block, p);
    for (std::size_t j = 0; j < block; ++j) {
      const std::size_t i = static_cast<std::size_t>(comm.rank()) * block + j;
      // (1 + i % 3) * just_above_one rounds to 1 + i % 3 (both formats hold 1, 2, 3 and their
      // neighbours finely enough), and n times that is exact.
      EXPECT_EQ(data[i], static_cast<float>(n) * static_cast<float>(1 + i % 3)) << i;
    }
  }
}

TEST(MpiComm, SixteenBitReduceRoundsAtTheRootAndLeavesTheOthers) {
  auto comm = make_world();
  const int n = comm.size();
  for (Precision p : {Precision::kBf16, Precision::kFp16}) {
    std::vector<float> data(300, just_above_one(p));
    comm.ireduce_sum(data.data(), data.size(), n - 1, p)->wait();
    const float expected = comm.rank() == n - 1 ? static_cast<float>(n) : just_above_one(p);
    for (float v : data) ASSERT_EQ(v, expected) << trident::kernels::precision_name(p);
  }
}

TEST(GradientBuckets, SixteenBitBucketsRoundWhatTheySend) {
  auto comm = make_world();
  const std::vector<size_t> ends = {5, 12, 30, 31, 50};
  std::vector<float> grads(50, just_above_one(Precision::kBf16));
  GradientBuckets buckets(comm, grads.data(), plan_buckets(ends, 8), WirePrecision::kBf16);
  buckets.begin();
  buckets.mark_final_from(12);
  buckets.finish();
  for (size_t i = 0; i < grads.size(); ++i) EXPECT_EQ(grads[i], static_cast<float>(comm.size())) << i;
}

// What the fp16 loss scaler relies on: a sum past fp16's largest value (65504) becomes
// infinity on every rank, even when every contribution fits.
TEST(MpiComm, Fp16WireOverflowsToInfinity) {
  auto comm = make_world();
  std::vector<float> data = {40000.0f, -40000.0f, 1.0f};
  comm.iall_reduce_sum(data.data(), data.size(), WirePrecision::kFp16)->wait();
  EXPECT_TRUE(std::isinf(data[0]) && data[0] > 0);
  EXPECT_TRUE(std::isinf(data[1]) && data[1] < 0);
  EXPECT_EQ(data[2], static_cast<float>(comm.size()));
}

// --- 16-bit activations (tensor parallelism on bf16 / fp16 buffers) -------------------------------

namespace {
// A buffer of 16-bit values, as the model's arena holds them.
struct Buffer16 {
  Buffer16(std::size_t n, Precision p) : bits(n), storage(p) {}
  trident::kernels::ActPtr ptr() { return {bits.data(), storage}; }
  float at(std::size_t i) const { return trident::kernels::decode_16bit(bits[i], storage); }
  void set(std::size_t i, float v) { bits[i] = trident::kernels::encode_16bit(v, storage); }
  std::vector<uint16_t> bits;
  Precision storage;
};
}  // namespace

// Sums of 16-bit buffers are 16-bit values, rounded after each addition (as the wire's), within
// the wire's bound of the exact sum, and the same every time; the sum of exact small values is
// exact.
TEST(MpiComm, SixteenBitActivationAllReduceSumsInTheFormat) {
  auto comm = make_world();
  const int n = comm.size();
  for (Precision p : {Precision::kBf16, Precision::kFp16}) {
    Buffer16 small(5, p);
    for (std::size_t i = 0; i < 5; ++i) small.set(i, static_cast<float>(i) + 0.5f);
    comm.all_reduce_sum(small.ptr(), 5);
    for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(small.at(i), static_cast<float>(n) * (static_cast<float>(i) + 0.5f));

    std::mt19937 rng(static_cast<unsigned>(29 + comm.rank()));
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    Buffer16 first(3001, p);
    std::vector<float> exact(3001);
    for (std::size_t i = 0; i < exact.size(); ++i) {
      first.set(i, uniform(rng));
      exact[i] = first.at(i);
    }
    Buffer16 second = first;
    comm.all_reduce_sum(exact.data(), exact.size());
    comm.all_reduce_sum(first.ptr(), exact.size());
    comm.all_reduce_sum(second.ptr(), exact.size());
    // n - 1 roundings of partial sums of magnitude below n, each at most half a unit of the
    // format relative to n: below n^2 / 2 units; the bound allows n^2.
    const float unit = p == Precision::kBf16 ? 0x1p-8f : 0x1p-11f;
    const float bound = static_cast<float>(n) * unit * static_cast<float>(n);
    for (std::size_t i = 0; i < exact.size(); ++i) {
      ASSERT_EQ(first.bits[i], second.bits[i]) << "not deterministic at " << i;
      ASSERT_NEAR(first.at(i), exact[i], bound) << i;
    }
  }
}

TEST(MpiComm, SixteenBitActivationReduceScatterAndAllGather) {
  auto comm = make_world();
  const int n = comm.size();
  const auto r = static_cast<std::size_t>(comm.rank());
  const std::size_t block = 3;  // odd: blocks are not whole floats
  const std::size_t total = block * static_cast<std::size_t>(n);
  for (Precision p : {Precision::kBf16, Precision::kFp16}) {
    // Every rank holds j + 1 at full index j; the own block of the sum is n (j + 1).
    Buffer16 full(total, p), own(block, p);
    for (std::size_t j = 0; j < total; ++j) full.set(j, static_cast<float>(j + 1));
    comm.reduce_scatter_sum(full.ptr(), own.ptr(), block);
    for (std::size_t k = 0; k < block; ++k) EXPECT_EQ(own.at(k), static_cast<float>(n * static_cast<int>(r * block + k + 1)));

    comm.reduce_scatter_sum_in_place(full.ptr(), block, Precision::kFp32);  // the buffer's own format
    for (std::size_t k = 0; k < block; ++k) EXPECT_EQ(full.at(r * block + k), own.at(k));

    // Rank q contributes 10 q + k; everyone receives every block in rank order, bit for bit.
    Buffer16 mine(block, p), gathered(total, p), in_place(total, p);
    for (std::size_t k = 0; k < block; ++k) {
      mine.set(k, static_cast<float>(10 * r + k));
      in_place.set(r * block + k, static_cast<float>(10 * r + k));
    }
    comm.all_gather(mine.ptr(), gathered.ptr(), block);
    comm.all_gather_in_place(in_place.ptr(), block);
    for (std::size_t j = 0; j < total; ++j) {
      EXPECT_EQ(gathered.at(j), static_cast<float>(10 * (j / block) + j % block)) << j;
      EXPECT_EQ(in_place.bits[j], gathered.bits[j]) << j;
    }
  }
  // Operands in different formats, or an in-place wire naming the other format: logic errors.
  Buffer16 bf(total, Precision::kBf16), fp(total, Precision::kFp16);
  EXPECT_THROW(comm.all_gather(bf.ptr(), fp.ptr(), block), std::logic_error);
  EXPECT_THROW(comm.reduce_scatter_sum_in_place(bf.ptr(), block, Precision::kFp16), std::logic_error);
}

// The tensor-parallel operators pass 16-bit buffers through in their format.
TEST(TensorParallel, SixteenBitActivationsMoveAsSixteenBits) {
  auto comm = make_world();
  const TensorParallel tp(&comm);
  const int n = comm.size();
  Buffer16 partial(4, Precision::kBf16);
  for (std::size_t i = 0; i < 4; ++i) partial.set(i, 1.5f);
  tp.reduce_from_tp_forward(partial.ptr(), 4);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(partial.at(i), 1.5f * static_cast<float>(n));
  tp.copy_to_tp_backward(partial.ptr(), 4);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(partial.at(i), 1.5f * static_cast<float>(n * n));
}
