#include "mpi_support/mpi_check.h"

#include <mpi.h>

#include <cstdio>

#include "mpi_support/mpi_process.h"

namespace trident::mpi_support {

std::string mpi_error_text(int code, const char* call, const char* file, int line) {
  char reason[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, reason, &length) != MPI_SUCCESS) length = 0;
  int rank = -1;
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized != 0 && finalized == 0 && MPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS) rank = -1;
  std::string text = std::string("MPI error in ") + call + " at " + file + ":" + std::to_string(line) + " on rank " +
                     std::to_string(rank) + ": ";
  text += length > 0 ? std::string(reason, static_cast<std::size_t>(length)) : "error code " + std::to_string(code);
  return text;
}

void check_mpi(int code, const char* call, const char* file, int line) {
  if (code == MPI_SUCCESS) return;
  std::fflush(stdout);
  std::fprintf(stderr, "trident: %s\n", mpi_error_text(code, call, file, line).c_str());
  abort_job(1);
}

}  // namespace trident::mpi_support
