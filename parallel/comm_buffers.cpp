#include "parallel/comm_buffers.h"

#include <algorithm>
#include <cstdint>

#include "parallel/grad_buckets.h"

namespace trident::parallel {

namespace {

constexpr std::size_t kWireBytes = sizeof(uint16_t);

// The data group's buffers. Without ZeRO the buckets are all-reduced; with it, the whole padded
// arena is reduce-scattered and the parameters all-gathered in place.
CommBufferBytes data_group(const GradientReductionPlan& plan, CommTransport transport) {
  CommBufferBytes held;
  const bool wire16 = plan.wire != WirePrecision::kFp32 && plan.dp > 1;
  const std::vector<Bucket> buckets = plan_buckets(plan.tensor_ends, plan.bucket_elems);
  std::size_t bucketed = 0, largest_bucket = 0;
  for (const Bucket& b : buckets) {
    bucketed += b.end - b.begin;
    largest_bucket = std::max(largest_bucket, b.end - b.begin);
  }
  switch (transport) {
    case CommTransport::kMpi:
      // MpiComm keeps one encoded buffer per reduced address: the non-blocking bucket
      // reductions are in flight together.
      if (wire16) held.host = (plan.zero ? plan.padded_size : bucketed) * kWireBytes;
      break;
    case CommTransport::kNccl:
      // One device buffer for the largest call (its stream orders the calls), in whole floats.
      if (wire16) held.device = ((plan.zero ? plan.padded_size : largest_bucket) + 1) / 2 * sizeof(float);
      break;
    case CommTransport::kMpiStaged:
      if (plan.zero) {
        // The blocking calls' host copy: the fp32 gradients, and (16-bit storage) the parameters
        // beside them; staged even for one rank. Then MpiComm's encoded copy of the gradients.
        held.host = plan.padded_size * sizeof(float);
        if (plan.parameters != kernels::Precision::kFp32) held.host += plan.padded_size * kWireBytes;
        if (wire16) held.host += plan.padded_size * kWireBytes;
      } else if (plan.dp > 1) {
        // A float mirror per bucket (in flight together), and MpiComm's encoded copy of each.
        held.host = bucketed * (sizeof(float) + (wire16 ? kWireBytes : 0));
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
