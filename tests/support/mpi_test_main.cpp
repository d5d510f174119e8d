// GoogleTest main for Trident tests: MPI is initialised (as a singleton when not under mpirun)
// because parts under test use MPI or parallel HDF5. Under mpirun, only rank 0 prints results,
// and the exit status is the worst of all ranks so a failure on any rank fails the test.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>  // setenv

int main(int argc, char** argv) {
  // Open MPI's quicker start-up for a test (as TRIDENT_TEST_MPI_ENV in tests/CMakeLists.txt for
  // the tests under mpirun), unless the environment says otherwise: the ob1 messaging layer
  // without probing UCX first. MPI_Init took each of the 323 unit tests 0.33 s and now 0.14 s on
  // the 2-vCPU machine (2026-11-24), where most tests themselves run in 0.1 s or less. (Not
  // ess_singleton_isolated, which gets to 0.03 s: its singletons share one job id, so two tests
  // side by side share Open MPI's session directory, and parallel HDF5's shared-file-pointer
  // files in it collided: 1 to 3 TokenDatasetErrors tests failed in 3 runs of the unit label.)
  setenv("OMPI_MCA_pml", "ob1", /*overwrite=*/0);
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
