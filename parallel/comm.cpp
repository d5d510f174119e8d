#include "parallel/comm.h"

#include <cstdint>

namespace trident::parallel {

std::string broadcast_string(Comm& comm, const std::string& value, int root) {
  uint64_t length = value.size();
  comm.broadcast(&length, sizeof length, root);
  std::string result = comm.rank() == root ? value : std::string(length, '\0');
  if (length > 0) comm.broadcast(result.data(), length, root);
  return result;
}

std::string agree_on_error(Comm& comm, const std::string& local_error) {
  // The lowest failing rank is found with a max over (size - rank) for failing ranks.
  const int mine = local_error.empty() ? 0 : comm.size() - comm.rank();
  const int best = comm.all_reduce_max(mine);
  if (best == 0) return "";
  return broadcast_string(comm, local_error, comm.size() - best);
}

}  // namespace trident::parallel
