#include "parallel/host_staged_comm.h"

#include <stdexcept>
#include <utility>

namespace trident::parallel {

namespace {

// A non-blocking reduction on the buffer's host mirror: the mirror goes back to the device after
// the wait (where this rank receives the result), and is free for the buffer's next request
// once this one is done or destroyed.
class StagedRequest final : public CommRequest {
 public:
  StagedRequest(HostStagedComm::Mirror& host, std::size_t count, float* device, DeviceMemory& memory,
                std::unique_ptr<CommRequest> inner, bool receives)
      : host_(host), count_(count), device_(device), memory_(memory), inner_(std::move(inner)), receives_(receives) {
    host_.in_flight = true;
  }
  ~StagedRequest() override {
    if (!done_) inner_->wait();  // the host copy must outlive the operation; no copy back
    host_.in_flight = false;
  }
  void wait() override {
    if (done_) return;
    inner_->wait();
    finish();
  }
  bool test() override {
    if (done_) return true;
    if (!inner_->test()) return false;
    finish();
    return true;
  }

 private:
  void finish() {
    if (receives_) memory_.copy_to_device(device_, host_.values.data(), count_);
    done_ = true;
    host_.in_flight = false;
  }
  HostStagedComm::Mirror& host_;
  std::size_t count_;
  float* device_;
  DeviceMemory& memory_;
  std::unique_ptr<CommRequest> inner_;
  bool receives_;  // false: a reduction to another rank, which leaves this rank's values alone
  bool done_ = false;
};

}  // namespace

kernels::ActPtr HostStagedComm::HostCopy::view(kernels::Precision storage, std::size_t count) {
  if (storage == kernels::Precision::kFp32) {
    if (f32.size() < count) f32.resize(count);
    return f32.data();
  }
  if (bits16.size() < count) bits16.resize(count);
  return {bits16.data(), storage};
}

template <class Op>
void HostStagedComm::staged(kernels::ActPtr data, std::size_t count, bool in, bool out, Op&& op) {
  if (count == 0 || !memory_.is_device_memory(data.get())) {
    op(data);
    return;
  }
  const kernels::ActPtr host = host_.view(data.storage(), count);
  if (in) memory_.copy_bytes_to_host(host.get(), data.get(), data.bytes(count));
  op(host);
  if (out) memory_.copy_bytes_to_device(data.get(), host.get(), data.bytes(count));
}

kernels::ConstActPtr HostStagedComm::readable(kernels::ConstActPtr send, std::size_t count) {
  if (count == 0 || !memory_.is_device_memory(send.get())) return send;
  const kernels::ActPtr host = host_extra_.view(send.storage(), count);
  memory_.copy_bytes_to_host(host.get(), send.get(), send.bytes(count));
  return host;
}

void HostStagedComm::all_reduce_sum(kernels::ActPtr data, std::size_t count) {
  staged(data, count, true, true, [&](kernels::ActPtr h) { inner_->all_reduce_sum(h, count); });
}

void HostStagedComm::all_reduce_sum(double* data, std::size_t count) {
  if (count > 0 && memory_.is_device_memory(data)) {
    throw std::logic_error("HostStagedComm: all_reduce_sum of doubles in device memory is not supported");
  }
  inner_->all_reduce_sum(data, count);
}

std::unique_ptr<CommRequest> HostStagedComm::iall_reduce_sum(float* data, std::size_t count, WirePrecision wire) {
  if (count == 0 || !memory_.is_device_memory(data)) return inner_->iall_reduce_sum(data, count, wire);
  Mirror& host = mirror_of(data, count);
  return std::make_unique<StagedRequest>(host, count, data, memory_,
                                         inner_->iall_reduce_sum(host.values.data(), count, wire), true);
}

std::unique_ptr<CommRequest> HostStagedComm::ireduce_sum(float* data, std::size_t count, int root,
                                                         WirePrecision wire) {
  if (count == 0 || !memory_.is_device_memory(data)) return inner_->ireduce_sum(data, count, root, wire);
  Mirror& host = mirror_of(data, count);
  return std::make_unique<StagedRequest>(host, count, data, memory_,
                                         inner_->ireduce_sum(host.values.data(), count, root, wire), rank() == root);
}

HostStagedComm::Mirror& HostStagedComm::mirror_of(float* data, std::size_t count) {
  // The host copy is float: the 16-bit wire (if any) is the inner communicator's. One mirror per
  // device buffer, kept: the gradient buckets reduce the same buffers every step, so after the
  // first step nothing is allocated, and the inner communicator sees the same host addresses
  // (MpiComm keys its wire buffers by them).
  Mirror& host = mirrors_[data];
  if (host.in_flight) {
    throw std::logic_error(
        "HostStagedComm: a second non-blocking reduction of one device buffer before the first is done");
  }
  if (host.values.size() < count) host.values.resize(count);
  memory_.copy_to_host(host.values.data(), data, count);
  return host;
}

CommBufferBytes HostStagedComm::buffer_bytes() const {
  CommBufferBytes held = inner_->buffer_bytes();
  held.host += host_.bytes() + host_extra_.bytes();
  for (const auto& entry : mirrors_) held.host += entry.second.values.capacity() * sizeof(float);
  return held;
}

void HostStagedComm::all_reduce_max(float* data, std::size_t count) {
  staged(data, count, true, true, [&](kernels::ActPtr h) { inner_->all_reduce_max(h.f32(), count); });
}

void HostStagedComm::reduce_scatter_sum(kernels::ConstActPtr send, kernels::ActPtr recv, std::size_t count) {
  const kernels::ConstActPtr from = readable(send, count * static_cast<std::size_t>(size()));
  staged(recv, count, false, true, [&](kernels::ActPtr h) { inner_->reduce_scatter_sum(from, h, count); });
}

void HostStagedComm::all_gather(kernels::ConstActPtr send, kernels::ActPtr recv, std::size_t count) {
  const kernels::ConstActPtr from = readable(send, count);
  staged(recv, count * static_cast<std::size_t>(size()), false, true,
         [&](kernels::ActPtr h) { inner_->all_gather(from, h, count); });
}

void HostStagedComm::reduce_scatter_sum_in_place(kernels::ActPtr data, std::size_t count, WirePrecision wire) {
  staged(data, count * static_cast<std::size_t>(size()), true, true,
         [&](kernels::ActPtr h) { inner_->reduce_scatter_sum_in_place(h, count, wire); });
}

void HostStagedComm::all_gather_in_place(kernels::ActPtr data, std::size_t count) {
  staged(data, count * static_cast<std::size_t>(size()), true, true,
         [&](kernels::ActPtr h) { inner_->all_gather_in_place(h, count); });
}

void HostStagedComm::broadcast(void* data, std::size_t bytes, int root) {
  if (bytes > 0 && memory_.is_device_memory(data)) {
    if (bytes % sizeof(float) != 0) throw std::logic_error("HostStagedComm: device broadcast of a partial float");
    staged(static_cast<float*>(data), bytes / sizeof(float), true, true,
           [&](kernels::ActPtr h) { inner_->broadcast(h.get(), bytes, root); });
    return;
  }
  inner_->broadcast(data, bytes, root);
}

std::unique_ptr<CommRequest> HostStagedComm::ibroadcast(kernels::ActPtr data, std::size_t count, int root) {
  if (count == 0 || !memory_.is_device_memory(data.get())) return inner_->ibroadcast(data, count, root);
  // The root's values go up, the others' come down; the host copy is the one of the blocking
  // calls (no mirror per buffer: nothing stays in flight).
  const bool at_root = rank() == root;
  staged(data, count, at_root, !at_root,
         [&](kernels::ActPtr h) { inner_->broadcast(h.get(), h.bytes(count), root); });
  return completed_request();
}

void HostStagedComm::send(kernels::ConstActPtr data, std::size_t count, int peer) {
  inner_->send(readable(data, count), count, peer);
}

void HostStagedComm::recv(kernels::ActPtr data, std::size_t count, int peer) {
  staged(data, count, false, true, [&](kernels::ActPtr h) { inner_->recv(h, count, peer); });
}

}  // namespace trident::parallel
