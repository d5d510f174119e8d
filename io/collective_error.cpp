#include "io/collective_error.h"

#include <climits>

#include "io/user_error.h"
#include "mpi_support/mpi_check.h"

namespace trident::io {

void agree_or_throw(MPI_Comm comm, const std::string& local_error) {
  int rank = 0;
  TRIDENT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  const int mine = local_error.empty() ? INT_MAX : rank;
  int first = INT_MAX;
  TRIDENT_MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == INT_MAX) return;
  int length = rank == first ? static_cast<int>(local_error.size()) : 0;
  TRIDENT_MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT, first, comm));
  std::string message = rank == first ? local_error : std::string(static_cast<size_t>(length), ' ');
  TRIDENT_MPI_CHECK(MPI_Bcast(message.data(), length, MPI_CHAR, first, comm));
  throw UserError(message);
}

}  // namespace trident::io
