#include "mpi_support/timed_barrier.h"

#include <thread>

namespace trident::mpi_support {

bool every_rank_arrives(MPI_Comm comm, std::chrono::milliseconds patience) {
  MPI_Request request = MPI_REQUEST_NULL;
  // A failed call answers "no" rather than aborting: the caller then ends the job with its own,
  // more telling error.
  if (MPI_Ibarrier(comm, &request) != MPI_SUCCESS) return false;
  const auto deadline = std::chrono::steady_clock::now() + patience;
  for (;;) {
    int done = 0;
    if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (done != 0) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace trident::mpi_support
