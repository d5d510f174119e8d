#include "parallel/grad_buckets.h"

namespace trident::parallel {

std::vector<Bucket> plan_buckets(const std::vector<std::size_t>& tensor_ends, std::size_t bucket_elems) {
  std::vector<Bucket> buckets;
  if (tensor_ends.empty()) return buckets;
  std::size_t end = tensor_ends.back();
  // Walk the tensor boundaries downwards; cut once a bucket holds enough elements.
  for (std::size_t i = tensor_ends.size() - 1; i > 0; --i) {
    const std::size_t begin = tensor_ends[i - 1];
    if (end - begin >= bucket_elems) {
      buckets.push_back({begin, end});
      end = begin;
    }
  }
  if (end > 0) buckets.push_back({0, end});
  return buckets;
}

std::size_t bucket_elems_of_mib(double bucket_mb) {
  return static_cast<std::size_t>(bucket_mb * 1024.0 * 1024.0 / sizeof(float));
}

GradientBuckets::GradientBuckets(Comm& data_comm, float* grads, std::vector<Bucket> buckets, WirePrecision wire)
    : comm_(data_comm), grads_(grads), buckets_(std::move(buckets)), wire_(wire) {}

void GradientBuckets::begin() {
  next_ = 0;
  pending_.clear();
}

void GradientBuckets::mark_final_from(std::size_t offset) {
  if (comm_.size() == 1) return;
  while (next_ < buckets_.size() && buckets_[next_].begin >= offset) {
    const Bucket& b = buckets_[next_++];
    pending_.push_back(comm_.iall_reduce_sum(grads_ + b.begin, b.end - b.begin, wire_));
  }
  // Without an asynchronous progress thread, MPI advances collectives only inside MPI calls.
  for (auto& request : pending_) request->test();
}

void GradientBuckets::finish() {
  if (comm_.size() == 1) return;
  mark_final_from(0);
  for (auto& request : pending_) request->wait();
  pending_.clear();
}

}  // namespace trident::parallel
