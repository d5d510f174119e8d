#include "parallel/grad_buckets.h"

#include <algorithm>

namespace trident::parallel {

std::vector<Bucket> plan_buckets(const std::vector<std::size_t>& tensor_ends, std::size_t bucket_elems,
                                 std::size_t owner_block) {
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
  if (owner_block == 0) return buckets;
  std::vector<Bucket> owned;
  for (const Bucket& b : buckets) {
    // From the bucket's end down, a piece per block it crosses.
    for (std::size_t piece_end = b.end; piece_end > b.begin;) {
      const std::size_t block = (piece_end - 1) / owner_block;
      const std::size_t piece_begin = std::max(b.begin, block * owner_block);
      owned.push_back({piece_begin, piece_end, static_cast<int>(block)});
      piece_end = piece_begin;
    }
  }
  return owned;
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

void GradientBuckets::mark_final_from(std::size_t offset) { start_from(std::max(offset, held_below_)); }

void GradientBuckets::start_from(std::size_t offset) {
  if (comm_.size() == 1) return;
  while (next_ < buckets_.size() && buckets_[next_].begin >= offset) {
    const Bucket& b = buckets_[next_++];
    float* data = grads_ + b.begin;
    const std::size_t count = b.end - b.begin;
    pending_.push_back(b.owner < 0 ? comm_.iall_reduce_sum(data, count, wire_)
                                   : comm_.ireduce_sum(data, count, b.owner, wire_));
  }
  // Without an asynchronous progress thread, MPI advances collectives only inside MPI calls.
  for (auto& request : pending_) request->test();
}

void GradientBuckets::wait_started() {
  for (auto& request : pending_) request->wait();
  pending_.clear();
}

void GradientBuckets::finish() {
  if (comm_.size() == 1) return;
  start_from(0);
  wait_started();
}

}  // namespace trident::parallel
