// GradientBuckets: data-parallel gradient averaging that overlaps backward.
//
// The gradient arena is cut into buckets at tensor boundaries, from the END of the arena,
// because backward produces the last layers' gradients first. The model reports progress as
// "every gradient at arena offset >= X is final" (mark_final_from); each bucket whose range
// lies entirely above X starts its non-blocking all-reduce at once, while backward continues.
// finish() starts what is left and waits for everything.
//
// The reduction is a plain SUM: the loss gradient is already divided by the global number of
// tokens, so the sum over data ranks is exactly the global mean (design.md section 4). Its
// values travel in `wire` precision (parallel.grad_reduce; comm.h says what 16 bits means).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "parallel/comm.h"

namespace trident::parallel {

struct Bucket {
  std::size_t begin = 0;  // arena offsets [begin, end)
  std::size_t end = 0;
};

// Cuts [0, tensor_ends.back()) into buckets of at least `bucket_elems` elements (the first
// bucket of the arena may be smaller), never splitting a tensor. tensor_ends are the arena
// end offsets of the tensors, ascending. Buckets are returned from the end of the arena.
std::vector<Bucket> plan_buckets(const std::vector<std::size_t>& tensor_ends, std::size_t bucket_elems);
// parallel.bucket_mb (MiB of fp32 gradients) in elements.
std::size_t bucket_elems_of_mib(double bucket_mb);

class GradientBuckets {
 public:
  GradientBuckets(Comm& data_comm, float* grads, std::vector<Bucket> buckets, WirePrecision wire);
  // Called before each step's last micro-batch backward: nothing has been started yet.
  void begin();
  // Every gradient element at offset >= `offset` is final for this step.
  void mark_final_from(std::size_t offset);
  // Starts the remaining buckets and waits for all of them.
  void finish();
  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  Comm& comm_;
  float* grads_;
  std::vector<Bucket> buckets_;
  WirePrecision wire_;
  std::size_t next_ = 0;  // buckets_[0, next_) have been started this step
  std::vector<std::unique_ptr<CommRequest>> pending_;
};

}  // namespace trident::parallel
