// GoogleTest main for Trident tests: MPI is initialised (as a singleton when not under mpirun)
// because parts under test use MPI or parallel HDF5. Under mpirun, only rank 0 prints results,
// and the exit status is the worst of all ranks so a failure on any rank fails the test.
#include <gtest/gtest.h>
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int local = RUN_ALL_TESTS();
  int worst = local;
  MPI_Allreduce(&local, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
