// The process's MPI (mpi_support/): errors returned to the caller's check, the check's line,
// the world's facts, and the barrier that gives up. Runs on one rank (unit) and on two
// (mpi.mpi_support.np2), where the barrier's time-out is tested.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <string>
#include <thread>

#include "mpi_support/mpi_check.h"
#include "mpi_support/mpi_process.h"
#include "mpi_support/timed_barrier.h"

namespace trident::mpi_support {
namespace {

// The test main leaves MPI's fatal handler on: restore it after a test that changes it.
class FatalHandlerRestored {
 public:
  ~FatalHandlerRestored() {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
  }
};

std::string reason_of(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  return {text, static_cast<std::size_t>(length)};
}

TEST(MpiCheck, LineNamesTheCallTheFileAndLineTheRankAndMpisReason) {
  const std::string text = mpi_error_text(MPI_ERR_COUNT, "MPI_Bcast(&n, -1, MPI_INT, 0, comm)", "io/x.cpp", 42);
  const std::string expected = "MPI error in MPI_Bcast(&n, -1, MPI_INT, 0, comm) at io/x.cpp:42 on rank " +
                               std::to_string(world_rank()) + ": " + reason_of(MPI_ERR_COUNT);
  EXPECT_EQ(text, expected);
  EXPECT_FALSE(reason_of(MPI_ERR_COUNT).empty());
}

TEST(MpiCheck, SuccessReturns) {
  int size = 0;
  TRIDENT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));  // aborts the test program if it fails
  EXPECT_EQ(size, world_size());
}

// What start_mpi sets after MPI_Init: without it, the bad call below would end the test program
// in MPI's fatal handler instead of returning its code.
TEST(MpiProcess, ErrorsReturnToTheCallerOnTheWorldItsDuplicatesAndSelf) {
  FatalHandlerRestored restore;
  return_errors(MPI_COMM_WORLD);
  return_errors(MPI_COMM_SELF);
  for (MPI_Comm comm : {MPI_COMM_WORLD, MPI_COMM_SELF}) {
    MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
    ASSERT_EQ(MPI_Comm_get_errhandler(comm, &handler), MPI_SUCCESS);
    EXPECT_EQ(handler, MPI_ERRORS_RETURN);
    MPI_Errhandler_free(&handler);
  }
  int value = 0;
  EXPECT_NE(MPI_Bcast(&value, -1, MPI_INT, 0, MPI_COMM_WORLD), MPI_SUCCESS);  // a negative count
  MPI_Comm copy = duplicate(MPI_COMM_WORLD);  // inherits the handler
  EXPECT_NE(MPI_Bcast(&value, 1, MPI_INT, world_size(), copy), MPI_SUCCESS);  // a root past the end
  free_comm(&copy);
  EXPECT_EQ(copy, MPI_COMM_NULL);
}

TEST(MpiProcess, WorldFacts) {
  int rank = -1;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(world_rank(), rank);
  EXPECT_EQ(world_size(), size);
  EXPECT_FALSE(processor_name().empty());
  const std::string version = library_version();
  EXPECT_FALSE(version.empty());
  EXPECT_EQ(version.find_first_of(",\n"), std::string::npos);  // cut at its first comma or newline
}

TEST(TimedBarrier, EveryRankArrivingInTimeIsTrue) {
  MPI_Comm comm = duplicate(MPI_COMM_WORLD);
  EXPECT_TRUE(every_rank_arrives(comm, std::chrono::seconds(30)));
  free_comm(&comm);
}

// With two ranks or more: rank 1 comes a second late, past rank 0's patience of 100 ms, and
// rank 0 gives up (false) instead of waiting; rank 1 then finds rank 0's barrier posted. On one
// rank, the rank's own barrier completes at once.
TEST(TimedBarrier, ARankLatePastThePatienceIsFalseForTheOnesWaiting) {
  MPI_Comm comm = duplicate(MPI_COMM_WORLD);
  const int rank = world_rank();
  if (world_size() == 1) {
    EXPECT_TRUE(every_rank_arrives(comm, std::chrono::milliseconds(100)));
  } else if (rank == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    EXPECT_TRUE(every_rank_arrives(comm, std::chrono::seconds(30)));
  } else {
    // True would mean it waited the second for rank 1.
    EXPECT_FALSE(every_rank_arrives(comm, std::chrono::milliseconds(100)));
  }
  // Rank 0's barrier is left pending, as the function's contract says: free_comm only marks the
  // communicator, which MPI frees once the barrier completes.
  free_comm(&comm);
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace trident::mpi_support
