#include "parallel/param_gather.h"

#include <algorithm>
#include <stdexcept>

namespace trident::parallel {

ParameterGather::ParameterGather(Comm& data_comm, kernels::ActPtr params, std::vector<Bucket> buckets)
    : comm_(data_comm), params_(params), pieces_(std::move(buckets)) {
  std::sort(pieces_.begin(), pieces_.end(), [](const Bucket& a, const Bucket& b) { return a.begin < b.begin; });
  for (const Bucket& b : pieces_) {
    if (b.owner < 0 || b.owner >= comm_.size()) {
      throw std::logic_error("ParameterGather: a bucket without an owner in the data group");
    }
  }
}

void ParameterGather::start() {
  if (comm_.size() == 1) return;
  finish();  // a previous gather (none in a normal step: the forward waited for it)
  pending_.clear();
  next_wait_ = 0;
  for (const Bucket& b : pieces_) pending_.push_back(comm_.ibroadcast(params_ + b.begin, b.end - b.begin, b.owner));
  // Without an asynchronous progress thread, MPI advances collectives only inside MPI calls.
  for (auto& request : pending_) request->test();
}

void ParameterGather::wait_below(std::size_t offset) {
  while (next_wait_ < pending_.size() && pieces_[next_wait_].begin < offset) pending_[next_wait_++]->wait();
  if (next_wait_ == pending_.size()) {
    pending_.clear();
    next_wait_ = 0;
  }
}

}  // namespace trident::parallel
