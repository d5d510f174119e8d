// trident prepare ...: dataset preparation runs on one process; under mpirun only rank 0 works
// and the others wait for its verdict, so every rank exits with the same status.
#include <mpi.h>

#include "io/prepare_command.h"
#include "io/user_error.h"
#include "mpi_support/mpi_process.h"  // duplicate
#include "parallel/comm.h"
#include "parallel/mpi_comm.h"
#include "src/app/commands.h"

namespace trident::app {

int prepare_command(const std::vector<std::string>& args) {
  parallel::MpiComm world(mpi_support::duplicate(MPI_COMM_WORLD), "world");
  std::string error;
  int status = 0;
  if (world.rank() == 0) {
    try {
      status = io::run_prepare(args);
    } catch (const io::UserError& e) {
      error = e.what();
    }
  }
  error = parallel::agree_on_error(world, error);
  if (!error.empty()) throw io::UserError(error);
  world.broadcast(&status, sizeof status, 0);
  return status;
}

}  // namespace trident::app
