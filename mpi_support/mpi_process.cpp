#include "mpi_support/mpi_process.h"

#include <cstdio>
#include <cstdlib>  // std::_Exit

#include "mpi_support/mpi_check.h"

namespace trident::mpi_support {

void start_mpi(int* argc, char*** argv) {
  TRIDENT_MPI_CHECK(MPI_Init(argc, argv));  // MPI's own fatal handler is still on: fails loudly
  return_errors(MPI_COMM_WORLD);
  return_errors(MPI_COMM_SELF);
}

void return_errors(MPI_Comm comm) { TRIDENT_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN)); }

void finish_mpi() { TRIDENT_MPI_CHECK(MPI_Finalize()); }

void abort_job(int status) {
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);  // MPI_Abort does not return; should it, the status still reaches mpirun
}

int world_rank() {
  int rank = 0;
  TRIDENT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  return rank;
}

int world_size() {
  int size = 1;
  TRIDENT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  return size;
}

MPI_Comm duplicate(MPI_Comm comm) {
  MPI_Comm copy = MPI_COMM_NULL;
  TRIDENT_MPI_CHECK(MPI_Comm_dup(comm, &copy));
  return copy;
}

void free_comm(MPI_Comm* comm) { TRIDENT_MPI_CHECK(MPI_Comm_free(comm)); }

std::string processor_name() {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  TRIDENT_MPI_CHECK(MPI_Get_processor_name(name, &length));
  return {name, static_cast<std::size_t>(length)};
}

std::string library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  TRIDENT_MPI_CHECK(MPI_Get_library_version(text, &length));
  std::string version(text, static_cast<std::size_t>(length));
  if (auto cut = version.find_first_of(",\n"); cut != std::string::npos) version.resize(cut);
  return version;
}

}  // namespace trident::mpi_support
