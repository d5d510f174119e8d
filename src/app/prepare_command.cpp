// trident prepare ...: dataset preparation runs on one process; under mpirun only rank 0 works
// and the others wait for its verdict, so every rank exits with the same status.
#include <mpi.h>

#include "io/prepare_command.h"
#include "io/user_error.h"
#include "parallel/comm.h"
#include "parallel/mpi_comm.h"
#include "src/app/commands.h"

namespace trident::app {

int prepare_command(const std::vector<std::string>& args) {
  MPI_Comm world_dup;
  TRIDENT_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &world_dup));
  parallel::MpiComm world(world_dup, "world");
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
