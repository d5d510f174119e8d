// parallel/comm_buffers.h under mpirun (2 and 4 ranks): the buffers a data group's
// communicator really holds after the trainer's sequence of gradient reductions (buckets, under
// ZeRO-1 summed to their owners, then its parameter all-gather, whole or overlapped bucket by
// bucket), and the embedding group's, against the
// estimate, byte for byte: MPI on host memory, and MPI staged from "device" memory (host memory
// the fake says is the device's). NCCL's single device buffer needs GPUs (tests/gpu).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "parallel/comm_buffers.h"
#include "parallel/grad_buckets.h"
#include "parallel/host_staged_comm.h"
#include "parallel/mpi_comm.h"
#include "parallel/param_gather.h"
#include "parallel/zero_shard.h"

using namespace trident::parallel;
using trident::kernels::Precision;

namespace {

std::unique_ptr<Comm> make_world_comm(const char* name) {
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  return std::make_unique<MpiComm>(dup, name);
}

// "Device" memory: one host arena that the staging decorator must copy to and from.
class ArenaDevice final : public DeviceMemory {
 public:
  explicit ArenaDevice(std::size_t floats) : arena(floats, 0.0f) {}
  std::vector<float> arena;
  bool is_device_memory(const void* p) const override {
    const auto* f = static_cast<const float*>(p);
    return f >= arena.data() && f < arena.data() + arena.size();
  }
  void copy_to_host(float* h, const float* d, std::size_t n) override { std::copy(d, d + n, h); }
  void copy_to_device(float* d, const float* h, std::size_t n) override { std::copy(h, h + n, d); }
  void copy_bytes_to_host(void* h, const void* d, std::size_t bytes) override { std::memcpy(h, d, bytes); }
  void copy_bytes_to_device(void* d, const void* h, std::size_t bytes) override { std::memcpy(d, h, bytes); }
  float* allocate_device(std::size_t) override {
    ADD_FAILURE() << "MPI staging allocated device memory";
    return nullptr;
  }
  void release_device(float*) override { ADD_FAILURE() << "MPI staging released device memory"; }
};

// Two steps of the trainer's data-parallel sequence (trainer.cpp): the second must reuse the
// first's buffers. grads and params lie in the same memory (the arena, or plain host memory).
void run_steps(const GradientReductionPlan& plan, Comm& data, Comm* embedding, float* grads,
               trident::kernels::ActPtr params, std::size_t wte_offset, std::size_t wte_count) {
  const std::size_t block = plan.padded_size / static_cast<std::size_t>(plan.dp);
  GradientBuckets buckets(data, grads, plan_buckets(plan.tensor_ends, plan.bucket_elems, plan.zero ? block : 0),
                          plan.wire);
  std::optional<ParameterGather> gather;
  if (plan.zero) gather.emplace(data, params, buckets.buckets());
  if (plan.zero && embedding != nullptr) buckets.hold_below(wte_offset + wte_count);
  for (int step = 0; step < 2; ++step) {
    buckets.begin();
    buckets.mark_final_from(plan.tensor_ends[plan.tensor_ends.size() / 2]);
    buckets.mark_final_from(0);
    if (embedding != nullptr) {
      buckets.wait_started();
      embedding->all_reduce_sum(grads + wte_offset, wte_count);
    }
    buckets.finish();
    if (plan.zero && plan.overlap_param_gather) {
      gather->start();
      gather->wait_below(plan.tensor_ends[0]);  // as the next forward would, a piece at a time
      gather->finish();
    } else if (plan.zero) {
      data.all_gather_in_place(params, block);
    }
  }
}

struct Case {
  bool zero;
  bool overlap;  // ZeRO-1's parameter gather bucket by bucket (parallel.overlap_param_gather)
  Precision wire;
  Precision parameters;
  bool tied;  // a pipeline's first or last stage: the embedding group sums wte
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (int zero_mode = 0; zero_mode < 3; ++zero_mode) {  // off, whole all-gather, overlapped
    for (Precision wire : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
      for (Precision parameters : {Precision::kFp32, Precision::kBf16}) {
        for (bool tied : {false, true}) all.push_back({zero_mode > 0, zero_mode == 2, wire, parameters, tied});
      }
    }
  }
  return all;
}

std::string describe(const Case& c) {
  return std::string("zero ") + (c.zero ? "1" : "0") + (c.overlap ? " overlapped" : "") + ", wire " + trident::kernels::precision_name(c.wire) +
         ", parameters " + trident::kernels::precision_name(c.parameters) + (c.tied ? ", tied embedding" : "");
}

GradientReductionPlan plan_for(const Case& c, int dp) {
  GradientReductionPlan plan;
  // Tensors of uneven sizes, one (the "embedding", the first) larger than a bucket.
  plan.tensor_ends = {301, 310, 340, 395, 402, 460, 471, 530};
  plan.bucket_elems = 64;
  plan.dp = dp;
  plan.zero = c.zero;
  plan.overlap_param_gather = c.overlap;
  plan.padded_size = shard_arena(plan.tensor_ends.back(), c.zero ? dp : 1, 0).padded_size;
  plan.wire = c.wire;
  plan.parameters = c.parameters;
  plan.tied_embedding = c.tied ? 301 : 0;
  return plan;
}

}  // namespace

TEST(CommBuffers, MpiOnHostMemoryHoldsWhatTheEstimateSays) {
  int dp = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &dp);
  for (const Case& c : cases()) {
    const GradientReductionPlan plan = plan_for(c, dp);
    auto data = make_world_comm("data");
    auto embedding = make_world_comm("embedding");
    std::vector<float> grads(plan.padded_size, 1.0f);
    std::vector<float> params32(plan.padded_size, 0.5f);
    std::vector<uint16_t> params16(plan.padded_size, 0x3f00u);
    const trident::kernels::ActPtr params =
        c.parameters == Precision::kFp32 ? trident::kernels::ActPtr(params32.data())
                                         : trident::kernels::ActPtr(params16.data(), c.parameters);
    run_steps(plan, *data, c.tied ? embedding.get() : nullptr, grads.data(), params, 0, 301);
    CommBufferBytes held = data->buffer_bytes();
    held += embedding->buffer_bytes();
    const CommBufferBytes expected = gradient_comm_buffers(plan, CommTransport::kMpi);
    EXPECT_EQ(held.host, expected.host) << describe(c);
    EXPECT_EQ(held.device, 0u) << describe(c);
    EXPECT_EQ(expected.device, 0u) << describe(c);
    // A 16-bit wire over several ranks needs its encoded copy; fp32 sums in place.
    EXPECT_EQ(expected.host > 0, dp > 1 && c.wire != Precision::kFp32) << describe(c);
  }
}

TEST(CommBuffers, MpiStagedFromDeviceHoldsWhatTheEstimateSays) {
  int dp = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &dp);
  for (const Case& c : cases()) {
    const GradientReductionPlan plan = plan_for(c, dp);
    // The gradients, then the parameters (16-bit ones packed two to a float), on the "device".
    ArenaDevice device(plan.padded_size + plan.padded_size);
    float* grads = device.arena.data();
    float* param_floats = grads + plan.padded_size;
    const trident::kernels::ActPtr params =
        c.parameters == Precision::kFp32
            ? trident::kernels::ActPtr(param_floats)
            : trident::kernels::ActPtr(reinterpret_cast<uint16_t*>(param_floats), c.parameters);
    HostStagedComm data(make_world_comm("data"), device);
    HostStagedComm embedding(make_world_comm("embedding"), device);
    run_steps(plan, data, c.tied ? &embedding : nullptr, grads, params, 0, 301);
    CommBufferBytes held = data.buffer_bytes();
    held += embedding.buffer_bytes();
    const CommBufferBytes expected = gradient_comm_buffers(plan, CommTransport::kMpiStaged);
    EXPECT_EQ(held.host, expected.host) << describe(c);
    EXPECT_EQ(held.device, 0u) << describe(c);
    EXPECT_EQ(expected.device, 0u) << describe(c);
  }
}

// NCCL's buffer: one, for the largest call, in whole floats; nothing without a 16-bit wire.
TEST(CommBuffers, NcclEstimateIsOneBufferForTheLargestCall) {
  GradientReductionPlan plan = plan_for({false, false, Precision::kBf16, Precision::kBf16, true}, 4);
  // Buckets of >= 64 from the end: [460, 530), [395, 460), [310, 395), then [0, 310), the
  // embedding (301) with the tensor after it: the largest, 310 values in 155 floats.
  EXPECT_EQ(gradient_comm_buffers(plan, CommTransport::kNccl).device, 155u * sizeof(float));
  EXPECT_EQ(gradient_comm_buffers(plan, CommTransport::kNccl).host, 0u);
  // ZeRO-1: blocks of 144 (530 padded to 576 over 4 ranks) cut the buckets again at 144, 288 and
  // 432: [0, 310) becomes [0, 144), [144, 288), [288, 310); the largest piece is 144 values.
  plan.zero = true;
  plan.padded_size = shard_arena(530, 4, 0).padded_size;
  ASSERT_EQ(plan.padded_size, 576u);
  EXPECT_EQ(gradient_comm_buffers(plan, CommTransport::kNccl).device, 72u * sizeof(float));
  plan.wire = Precision::kFp32;
  EXPECT_EQ(gradient_comm_buffers(plan, CommTransport::kNccl).device, 0u);
  plan.wire = Precision::kBf16;
  plan.dp = 1;
  EXPECT_EQ(gradient_comm_buffers(plan, CommTransport::kNccl).device, 0u);
}
