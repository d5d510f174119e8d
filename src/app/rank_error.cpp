#include "src/app/rank_error.h"

#include <cstdio>
#include <cstdlib>  // std::_Exit
#include <exception>
#include <stdexcept>
#include <thread>

#include "io/user_error.h"
#include "kernels/out_of_memory.h"
#include "parallel/mpi_comm.h"  // TRIDENT_MPI_CHECK
#include "src/train/training_diverged.h"

namespace trident::app {

bool every_rank_arrives(MPI_Comm comm, std::chrono::milliseconds patience) {
  MPI_Request request = MPI_REQUEST_NULL;
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

void end_job_from_rank(int world_rank, const char* kind, const std::string& message, int status) {
  // What stdout holds first, so that the error follows the report in a shared log.
  std::fflush(stdout);
  std::fprintf(stderr, "trident: %s on rank %d: %s\n", kind, world_rank, message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);  // MPI_Abort does not return; should it, the status still reaches mpirun
}

void end_job_on_rank_error(MPI_Comm comm, int world_rank, const std::function<void()>& work) {
  // Its own communicator: a rank that times out leaves its barrier pending on it.
  MPI_Comm agreement = MPI_COMM_NULL;
  TRIDENT_MPI_CHECK(MPI_Comm_dup(comm, &agreement));
  try {
    work();
  } catch (const io::UserError& e) {
    if (!every_rank_arrives(agreement, kAgreementPatience)) end_job_from_rank(world_rank, "error", e.what(), 2);
    MPI_Comm_free(&agreement);
    throw;
  } catch (const train::TrainingDiverged&) {
    MPI_Comm_free(&agreement);
    throw;
  } catch (const kernels::OutOfMemory& e) {
    end_job_from_rank(world_rank, "error", e.what(), 1);
  } catch (const std::exception& e) {
    end_job_from_rank(world_rank, "internal error", e.what(), 1);
  }
  MPI_Comm_free(&agreement);
}

}  // namespace trident::app
