#include "parallel/comm.h"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace trident::parallel {

namespace {

class CompletedRequest final : public CommRequest {
 public:
  void wait() override {}
  bool test() override { return true; }
};

}  // namespace

std::unique_ptr<CommRequest> completed_request() { return std::make_unique<CompletedRequest>(); }

std::unique_ptr<CommRequest> Comm::ibroadcast(kernels::ActPtr data, std::size_t count, int root) {
  broadcast(data.get(), data.bytes(count), root);
  return completed_request();
}

std::string broadcast_string(Comm& comm, const std::string& value, int root) {
  uint64_t length = value.size();
  comm.broadcast(&length, sizeof length, root);
  std::string result = comm.rank() == root ? value : std::string(length, '\0');
  if (length > 0) comm.broadcast(result.data(), length, root);
  return result;
}

std::vector<std::string> all_gather_strings(Comm& comm, const std::string& value) {
  std::vector<std::string> all;
  all.reserve(static_cast<std::size_t>(comm.size()));
  for (int root = 0; root < comm.size(); ++root) all.push_back(broadcast_string(comm, value, root));
  return all;
}

std::string agree_on_error(Comm& comm, const std::string& local_error) {
  // The lowest failing rank is found with a max over (size - rank) for failing ranks.
  const int mine = local_error.empty() ? 0 : comm.size() - comm.rank();
  const int best = comm.all_reduce_max(mine);
  if (best == 0) return "";
  return broadcast_string(comm, local_error, comm.size() - best);
}

WirePrecision in_place_wire(kernels::ConstActPtr data, WirePrecision wire) {
  if (data.is_fp32()) return wire;
  if (wire != WirePrecision::kFp32 && wire != data.storage()) {
    throw std::logic_error(std::string("reduce_scatter_sum_in_place: ") + kernels::precision_name(data.storage()) +
                           " buffer with a " + kernels::precision_name(wire) + " wire");
  }
  return data.storage();
}

void require_same_storage(kernels::ConstActPtr send, kernels::ConstActPtr recv, const char* what) {
  if (send.storage() != recv.storage()) {
    throw std::logic_error(std::string(what) + ": send buffer in " + kernels::precision_name(send.storage()) +
                           ", receive buffer in " + kernels::precision_name(recv.storage()));
  }
}

}  // namespace trident::parallel
