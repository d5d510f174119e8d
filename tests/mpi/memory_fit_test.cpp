// The check that a run fits in memory before its model is allocated (src/app/memory_fit.h),
// under mpirun (2 and 4 ranks, one node): the message, the host pool, and the collective that
// adds up the needs of the ranks sharing a pool and gives every rank the same answer.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>

#include "parallel/mpi_comm.h"
#include "src/app/memory_fit.h"

namespace trident::app {
namespace {

parallel::MpiComm make_world() {
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  return parallel::MpiComm(dup, "world");
}

MemoryPool gpu_pool(std::size_t free_bytes) {
  return MemoryPool{free_bytes, std::size_t{1} << 40, "GPU 0 (Test GPU) of node n1", "free"};
}

TEST(MemoryFitError, EmptyWhenTheNeedFitsOrThePoolIsUnknown) {
  EXPECT_EQ(memory_fit_error(1000, 1, gpu_pool(1000), true), "");
  EXPECT_EQ(memory_fit_error(1, 3, MemoryPool{}, false), "") << "an unknown pool (total 0) is not checked";
}

TEST(MemoryFitError, NamesThePoolTheNeedAndTheWaysOut) {
  const std::string gpu = memory_fit_error(3 * 1024 * 1024, 1, gpu_pool(2 * 1024 * 1024), true);
  EXPECT_EQ(gpu.rfind("not enough memory on GPU 0 (Test GPU) of node n1: the rank on it needs about 3.0 MiB", 0), 0u)
      << gpu;
  EXPECT_NE(gpu.find("2.0 MiB of 1.0 TiB are free"), std::string::npos) << gpu;
  for (const char* key : {"train.micro_batch", "train.recompute", "parallel.tp", "parallel.pp", "parallel.zero"}) {
    EXPECT_NE(gpu.find(key), std::string::npos) << key << " missing from: " << gpu;
  }
  EXPECT_EQ(gpu.find("fewer ranks"), std::string::npos) << "one rank on the GPU: no fewer ranks to start";
  EXPECT_NE(memory_fit_error(3, 2, gpu_pool(2), true).find("fewer ranks per GPU"), std::string::npos);
  const std::string host =
      memory_fit_error(5000, 4, MemoryPool{100, 9000, "node cn1", "available (MemAvailable)"}, false);
  EXPECT_NE(host.find("on node cn1: its 4 ranks need about 4.9 KiB"), std::string::npos) << host;
  EXPECT_NE(host.find("available (MemAvailable)"), std::string::npos) << host;
  EXPECT_NE(host.find("fewer ranks per node"), std::string::npos) << host;
}

TEST(HostMemoryPool, ReadsProcMeminfo) {
  const MemoryPool pool = host_memory_pool("here");
  EXPECT_GT(pool.total_bytes, 0u) << "Linux has /proc/meminfo";
  EXPECT_GT(pool.free_bytes, 0u);
  EXPECT_LE(pool.free_bytes, pool.total_bytes);
  EXPECT_EQ(pool.name, "node here");
}

// A rank that could not measure its pool (total 0) takes no part in the smallest free, but
// its need still counts; a pool no rank could measure is not checked.
TEST(CheckMemoryFits, RanksThatCannotTellAreLeftOutOfTheFreeBytes) {
  auto world = make_world();
  auto node = make_world();
  const bool first = world.rank() == 0;
  const std::size_t everyone = 10 * static_cast<std::size_t>(world.size());
  const MemoryPool unknown{0, 0, "GPU 0 (Test GPU) of node n1", "free"};
  EXPECT_EQ(check_memory_fits(node, world, "gpu", 10, first ? unknown : gpu_pool(everyone), true), "");
  EXPECT_EQ(check_memory_fits(node, world, "gpu", 10, first ? gpu_pool(everyone - 1) : unknown, true),
            memory_fit_error(everyone, world.size(), gpu_pool(everyone - 1), true));
  EXPECT_EQ(check_memory_fits(node, world, "gpu", 1000, unknown, true), "");
}

// Ranks alternate between two pools ("gpu0", "gpu1"): each pool's need is the sum over its
// ranks, so with 100 bytes each and 150 free, two ranks on one pool overflow it where one alone
// does not; every rank gets the lowest failing rank's message.
TEST(CheckMemoryFits, AddsTheNeedsOfTheRanksSharingAPool) {
  auto world = make_world();
  auto node = make_world();
  const int ranks_per_pool = (world.size() + 1) / 2;
  const std::string key = "gpu" + std::to_string(world.rank() % 2);
  EXPECT_EQ(check_memory_fits(node, world, key, 100, gpu_pool(100 * static_cast<std::size_t>(ranks_per_pool)), true),
            "");
  const std::string error = check_memory_fits(node, world, key, 100, gpu_pool(150), true);
  if (ranks_per_pool == 1) {
    EXPECT_EQ(error, "");
  } else {
    EXPECT_EQ(error, memory_fit_error(100 * static_cast<std::size_t>(ranks_per_pool), ranks_per_pool, gpu_pool(150),
                                      true));
  }
}

// The pool's free bytes are the smallest any of its ranks measured: the last rank saw the
// pool after others had taken from it.
TEST(CheckMemoryFits, TakesTheSmallestFreeMeasuredInThePool) {
  auto world = make_world();
  auto node = make_world();
  const bool last = world.rank() == world.size() - 1;
  const std::size_t need = 10;
  const std::size_t everyone = need * static_cast<std::size_t>(world.size());
  const std::string error = check_memory_fits(node, world, "host", need, gpu_pool(last ? everyone - 1 : 4000), true);
  EXPECT_EQ(error, memory_fit_error(everyone, world.size(), gpu_pool(everyone - 1), true));
  EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace trident::app
