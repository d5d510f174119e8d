#include "src/app/rank_error.h"

#include <cstdio>
#include <exception>
#include <stdexcept>

#include "io/user_error.h"
#include "kernels/out_of_memory.h"
#include "mpi_support/mpi_process.h"   // abort_job, duplicate, free_comm
#include "mpi_support/timed_barrier.h"  // every_rank_arrives
#include "src/train/training_diverged.h"

namespace trident::app {

void end_job_from_rank(int world_rank, const char* kind, const std::string& message, int status) {
  // What stdout holds first, so that the error follows the report in a shared log.
  std::fflush(stdout);
  std::fprintf(stderr, "trident: %s on rank %d: %s\n", kind, world_rank, message.c_str());
  mpi_support::abort_job(status);
}

void end_job_on_rank_error(MPI_Comm comm, int world_rank, const std::function<void()>& work) {
  // Its own communicator: a rank that times out leaves its barrier pending on it.
  MPI_Comm agreement = mpi_support::duplicate(comm);
  try {
    work();
  } catch (const io::UserError& e) {
    if (!mpi_support::every_rank_arrives(agreement, kAgreementPatience)) {
      end_job_from_rank(world_rank, "error", e.what(), 2);
    }
    mpi_support::free_comm(&agreement);
    throw;
  } catch (const train::TrainingDiverged&) {
    mpi_support::free_comm(&agreement);
    throw;
  } catch (const kernels::OutOfMemory& e) {
    end_job_from_rank(world_rank, "error", e.what(), 1);
  } catch (const std::exception& e) {
    end_job_from_rank(world_rank, "internal error", e.what(), 1);
  }
  mpi_support::free_comm(&agreement);
}

}  // namespace trident::app
