// A barrier that gives up: whether every rank of a communicator reaches a point within a time.
#pragma once

#include <mpi.h>

#include <chrono>

namespace trident::mpi_support {

// True when every rank of `comm` calls it within `patience` (an MPI_Ibarrier, tested until then).
// `comm` must serve no other communication: a rank that times out leaves its barrier pending.
bool every_rank_arrives(MPI_Comm comm, std::chrono::milliseconds patience);

}  // namespace trident::mpi_support
