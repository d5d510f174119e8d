#include "parallel/comm_buffers.h"

#include <algorithm>
#include <cstdint>

#include "parallel/grad_buckets.h"

namespace trident::parallel {

namespace {

constexpr std::size_t kWireBytes = sizeof(uint16_t);

// The data group's buffers. The buckets are all-reduced, or under ZeRO-1 (cut again at the
// blocks) summed to their owners; ZeRO-1 then all-gathers the parameters in place (or
// broadcasts them bucket by bucket, overlapping the next forward).
CommBufferBytes data_group(const GradientReductionPlan& plan, CommTransport transport) {
  CommBufferBytes held;
  const bool wire16 = plan.wire != WirePrecision::kFp32 && plan.dp > 1;
  const std::size_t owner_block = plan.zero ? plan.padded_size / static_cast<std::size_t>(plan.dp) : 0;
  const std::vector<Bucket> buckets = plan_buckets(plan.tensor_ends, plan.bucket_elems, owner_block);
  std::size_t bucketed = 0, largest_bucket = 0;
  for (const Bucket& b : buckets) {
    bucketed += b.end - b.begin;
    largest_bucket = std::max(largest_bucket, b.end - b.begin);
  }
  switch (transport) {
    case CommTransport::kMpi:
      // MpiComm keeps one encoded buffer per reduced address: the non-blocking bucket
      // reductions are in flight together.
      if (wire16) held.host = bucketed * kWireBytes;
      break;
    case CommTransport::kNccl:
      // One device buffer for the largest call (its stream orders the calls), in whole floats.
      if (wire16) held.device = (largest_bucket + 1) / 2 * sizeof(float);
      break;
    case CommTransport::kMpiStaged:
      // A float mirror per bucket (in flight together), and MpiComm's encoded copy of each.
      if (plan.dp > 1) held.host = bucketed * (sizeof(float) + (wire16 ? kWireBytes : 0));
      // ZeRO-1's parameter gather, a host copy in the parameters' storage precision: of the whole
      // arena for the blocking all-gather (staged even for one rank), or of the largest piece for
      // the overlapped one (parallel/param_gather.h: its pieces are the buckets, staged one at a
      // time; nothing for one rank).
      if (plan.zero && !plan.overlap_param_gather) {
        held.host += plan.padded_size * kernels::precision_bytes(plan.parameters);
      } else if (plan.zero && plan.dp > 1) {
        held.host += largest_bucket * kernels::precision_bytes(plan.parameters);
      }
      break;
  }
  return held;
}

}  // namespace

CommBufferBytes gradient_comm_buffers(const GradientReductionPlan& plan, CommTransport transport) {
  CommBufferBytes held = data_group(plan, transport);
  // The tied embedding's fp32 sum is in place over MPI and NCCL; staged, it is a host copy.
  if (transport == CommTransport::kMpiStaged) held.host += plan.tied_embedding * sizeof(float);
  return held;
}

}  // namespace trident::parallel
