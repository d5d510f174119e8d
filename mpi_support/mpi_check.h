// TRIDENT_MPI_CHECK: every MPI call of Trident goes through it (design.md section 8).
//
// The process sets MPI_ERRORS_RETURN on its communicators at start-up (mpi_process.h), so a
// failed call comes back here instead of ending in MPI's default handler, whose message names
// the MPI call but not Trident's file and line. A failed MPI call after start-up cannot be
// recovered by one rank alone: the check prints the call, file, line, rank and MPI's reason, and
// aborts the job with exit status 1 (an internal error, docs/running.md).
#pragma once

#include <string>

namespace trident::mpi_support {

// The line check_mpi prints, without "trident: " and the newline: "MPI error in CALL at
// FILE:LINE on rank R: REASON" (rank -1 when MPI cannot tell it).
std::string mpi_error_text(int code, const char* call, const char* file, int line);

// Returns when `code` is MPI_SUCCESS; otherwise prints mpi_error_text and aborts the job.
void check_mpi(int code, const char* call, const char* file, int line);

}  // namespace trident::mpi_support

#define TRIDENT_MPI_CHECK(call) ::trident::mpi_support::check_mpi((call), #call, __FILE__, __LINE__)
