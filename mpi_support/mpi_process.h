// The process's MPI: its start and end, the job's abort, and the few world-level facts that the
// commands in src/ need, so that src/ makes no raw MPI call (design.md section 2).
#pragma once

#include <mpi.h>

#include <string>

namespace trident::mpi_support {

// MPI_Init, then MPI_ERRORS_RETURN on MPI_COMM_WORLD and MPI_COMM_SELF: every communicator made
// from them inherits it, so a failed call returns to its TRIDENT_MPI_CHECK (mpi_check.h), which
// names Trident's file and line. HDF5 duplicates the communicators it is given and checks its own
// MPI calls, reporting a failure as an HDF5 error.
void start_mpi(int* argc, char*** argv);

// MPI_ERRORS_RETURN on `comm` (start_mpi's setting, for a communicator made another way).
void return_errors(MPI_Comm comm);

// MPI_Finalize, checked.
void finish_mpi();

// Ends the whole job with `status` (MPI_Abort on MPI_COMM_WORLD; stderr is flushed first). Every
// rank's mpirun reports the status; the other ranks are killed wherever they wait.
[[noreturn]] void abort_job(int status);

int world_rank();
int world_size();

// A new communicator over the ranks of `comm` (MPI_Comm_dup), for traffic of its own; the caller
// frees it (free_comm, or by handing it to parallel::MpiComm).
MPI_Comm duplicate(MPI_Comm comm);
void free_comm(MPI_Comm* comm);

// This rank's node, as MPI names it (MPI_Get_processor_name): ranks with the same name share a
// machine's memory.
std::string processor_name();

// The MPI library's own version line, up to its first comma or newline; safe before MPI_Init.
std::string library_version();

}  // namespace trident::mpi_support
