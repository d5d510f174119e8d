// GradientBuckets: data-parallel gradient reduction that overlaps backward.
//
// The gradient arena is cut into buckets at tensor boundaries, from the END of the arena,
// because backward produces the last layers' gradients first. The model reports progress as
// "every gradient at arena offset >= X is final" (mark_final_from); each bucket whose range
// lies entirely above X starts its non-blocking reduction at once, while backward continues.
// finish() starts what is left and waits for everything.
//
// Without ZeRO each bucket is all-reduced. With ZeRO-1 (zero_shard.h) the buckets are also cut
// at the data ranks' block boundaries, and each is summed to the rank whose block holds it
// (Comm::ireduce_sum): together the same sums as one reduce-scatter of the arena, but started
// bucket by bucket during backward, and each in a bucket-sized call.
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
  int owner = -1;  // ZeRO-1: the data rank whose block holds the bucket and receives its sum;
                   // -1: every rank receives it (all-reduce)
};

// Cuts [0, tensor_ends.back()) into buckets of at least `bucket_elems` elements (the first
// bucket of the arena may be smaller), never splitting a tensor. tensor_ends are the arena
// end offsets of the tensors, ascending. Buckets are returned from the end of the arena.
// owner_block > 0 (ZeRO-1: ArenaShard::block) cuts them again at its multiples, so that each
// lies in one data rank's block [r * owner_block, (r + 1) * owner_block), and owns it to r.
std::vector<Bucket> plan_buckets(const std::vector<std::size_t>& tensor_ends, std::size_t bucket_elems,
                                 std::size_t owner_block = 0);
// parallel.bucket_mb (MiB of fp32 gradients) in elements.
std::size_t bucket_elems_of_mib(double bucket_mb);

class GradientBuckets {
 public:
  GradientBuckets(Comm& data_comm, float* grads, std::vector<Bucket> buckets, WirePrecision wire);
  // From now on the buckets that begin below `offset` start only in finish(): under ZeRO-1 the
  // tied embedding's gradient must be summed over the embedding group before its data-parallel
  // reduction, since the two stages' arenas may give its elements different owners.
  void hold_below(std::size_t offset) { held_below_ = offset; }
  // Called before each step's last micro-batch backward: nothing has been started yet.
  void begin();
  // Every gradient element at offset >= `offset` is final for this step.
  void mark_final_from(std::size_t offset);
  // Waits for the buckets started so far (an in-place reduction of another group may then run
  // on their ranges); starts none.
  void wait_started();
  // Starts the remaining buckets, held ones included, and waits for all of them.
  void finish();
  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  // Starts, in order, the buckets not yet started that begin at or above `offset`.
  void start_from(std::size_t offset);
  Comm& comm_;
  float* grads_;
  std::vector<Bucket> buckets_;
  WirePrecision wire_;
  std::size_t held_below_ = 0;
  std::size_t next_ = 0;  // buckets_[0, next_) have been started this step
  std::vector<std::unique_ptr<CommRequest>> pending_;
};

}  // namespace trident::parallel
