/* A preload library for tests/mpi/rank_error_test.sh: an MPI call that fails on one rank, as a
 * broken link or a lost peer would make it fail, to show that every MPI call of Trident is checked
 * (mpi_support/mpi_check.h) and that one rank's failure ends the job at once, without a hook in
 * Trident's code. Loaded into the ranks only (mpirun -x LD_PRELOAD=...), it overrides the calls
 * below through MPI's profiling interface (PMPI_*):
 *
 *   TRIDENT_TEST_FAULT_RANK=R           the MPI world rank (OMPI_COMM_WORLD_RANK) that fails
 *   TRIDENT_TEST_MPI_FAIL=NAME          the call that fails there: MPI_Allgatherv or MPI_Allreduce
 *   TRIDENT_TEST_MPI_FAIL_AFTER=N       its first N calls succeed (default 0)
 *
 * The failing call does what MPI does with an error: it calls the communicator's error handler
 * (MPI_Comm_call_errhandler) and returns MPI_ERR_OTHER, without communicating, so the other ranks
 * wait in it. Under MPI's default handler (MPI_ERRORS_ARE_FATAL) the job would end in MPI's own
 * message; only with start_mpi's MPI_ERRORS_RETURN does the caller's check print its line. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

/* Whether this call of `name` on this rank fails; counts the calls of the failing name. */
static int fails(const char* name) {
  static long calls;
  const char* rank = getenv("OMPI_COMM_WORLD_RANK");
  const char* target = getenv("TRIDENT_TEST_FAULT_RANK");
  const char* call = getenv("TRIDENT_TEST_MPI_FAIL");
  if (rank == NULL || target == NULL || call == NULL || strcmp(rank, target) != 0 || strcmp(call, name) != 0) {
    return 0;
  }
  const char* after = getenv("TRIDENT_TEST_MPI_FAIL_AFTER");
  return calls++ >= (after != NULL ? atol(after) : 0);
}

/* What MPI does with an error on `comm`: its handler first, then the code to the caller. */
static int failure(MPI_Comm comm) {
  MPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
  return MPI_ERR_OTHER;
}

int MPI_Allgatherv(const void* send, int count, MPI_Datatype send_type, void* recv, const int counts[],
                   const int displacements[], MPI_Datatype recv_type, MPI_Comm comm) {
  if (fails("MPI_Allgatherv")) return failure(comm);
  return PMPI_Allgatherv(send, count, send_type, recv, counts, displacements, recv_type, comm);
}

int MPI_Allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  if (fails("MPI_Allreduce")) return failure(comm);
  return PMPI_Allreduce(send, recv, count, type, op, comm);
}
