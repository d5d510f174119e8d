// Collective agreement on an error for io's MPI-aware files (io cannot use parallel/'s Comm).
#pragma once

#include <mpi.h>

#include <string>

namespace trident::io {

// Every rank of `comm` calls it with its own error ("" = none). When any rank failed, every
// rank throws UserError with the message of the lowest failing rank, so none is left waiting.
void agree_or_throw(MPI_Comm comm, const std::string& local_error);

}  // namespace trident::io
