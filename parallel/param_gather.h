// ParameterGather: ZeRO-1's all-gather of the updated parameters, overlapping the next forward.
//
// After AdamW each data rank holds the new values of its own block of the parameter arena only
// (zero_shard.h). Instead of one all-gather that the next step waits for whole, the arena goes
// out in the gradient buckets' pieces (grad_buckets.h: cut at tensor boundaries and at the
// blocks, so each piece has one owner), each broadcast from its owner, non-blocking, in forward
// order (ascending offsets: the arena is laid out in the order forward reads it). The forward
// waits for a piece only when it reaches the first tensor in it (wait_below), so on NCCL the
// first layers compute while the later layers' weights are still on the wire (Megatron-LM's
// overlapped parameter gather). On MPI without a progress thread the transfers advance inside
// MPI calls, so there the gather mostly runs at the first wait: the same bytes, no overlap.
//
// The values are the owner's bits whichever form moves them: a run gives the same numbers with
// the overlap on or off.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "kernels/act_ptr.h"
#include "parallel/comm.h"
#include "parallel/grad_buckets.h"

namespace trident::parallel {

class ParameterGather {
 public:
  // buckets: ZeRO-1's (plan_buckets with owner_block), in any order; each must have an owner.
  // params: the parameter arena, in its storage precision.
  ParameterGather(Comm& data_comm, kernels::ActPtr params, std::vector<Bucket> buckets);
  // Starts every piece's broadcast from its owner (after the update of this rank's block).
  void start();
  // Returns once every parameter below arena offset `offset` has arrived (for NCCL: once the
  // compute stream waits for it). Cheap when nothing is pending.
  void wait_below(std::size_t offset);
  // Waits for every piece: before anything reads the parameters outside a forward (checkpoints,
  // final files, the next update).
  void finish() { wait_below(static_cast<std::size_t>(-1)); }
  bool pending() const { return next_wait_ < pending_.size(); }
  const std::vector<Bucket>& pieces() const { return pieces_; }

 private:
  Comm& comm_;
  kernels::ActPtr params_;
  std::vector<Bucket> pieces_;  // ascending offsets
  std::vector<std::unique_ptr<CommRequest>> pending_;  // one per piece while a gather is on
  std::size_t next_wait_ = 0;  // pending_[0, next_wait_) have been waited for
};

}  // namespace trident::parallel
