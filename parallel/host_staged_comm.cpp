#include "parallel/host_staged_comm.h"

#include <stdexcept>
#include <utility>

namespace trident::parallel {

namespace {

// A non-blocking all-reduce on a host copy: the copy goes back to the device after the wait.
class StagedRequest final : public CommRequest {
 public:
  StagedRequest(std::vector<float> host, float* device, DeviceMemory& memory, Comm& inner, WirePrecision wire)
      : host_(std::move(host)), device_(device), memory_(memory) {
    inner_ = inner.iall_reduce_sum(host_.data(), host_.size(), wire);
  }
  ~StagedRequest() override {
    if (!done_) inner_->wait();  // the host copy must outlive the operation; no copy back
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
    memory_.copy_to_device(device_, host_.data(), host_.size());
    done_ = true;
  }
  std::vector<float> host_;
  float* device_;
  DeviceMemory& memory_;
  std::unique_ptr<CommRequest> inner_;
  bool done_ = false;
};

}  // namespace

template <class Op>
void HostStagedComm::staged(float* data, std::size_t count, bool in, bool out, Op&& op) {
  if (count == 0 || !memory_.is_device_memory(data)) {
    op(data);
    return;
  }
  host_.resize(count);
  if (in) memory_.copy_to_host(host_.data(), data, count);
  op(host_.data());
  if (out) memory_.copy_to_device(data, host_.data(), count);
}

void HostStagedComm::all_reduce_sum(float* data, std::size_t count) {
  staged(data, count, true, true, [&](float* h) { inner_->all_reduce_sum(h, count); });
}

void HostStagedComm::all_reduce_sum(double* data, std::size_t count) {
  if (count > 0 && memory_.is_device_memory(data)) {
    throw std::logic_error("HostStagedComm: all_reduce_sum of doubles in device memory is not supported");
  }
  inner_->all_reduce_sum(data, count);
}

std::unique_ptr<CommRequest> HostStagedComm::iall_reduce_sum(float* data, std::size_t count, WirePrecision wire) {
  if (count == 0 || !memory_.is_device_memory(data)) return inner_->iall_reduce_sum(data, count, wire);
  // The host copy is float: the 16-bit wire (if any) is the inner communicator's.
  std::vector<float> host(count);
  memory_.copy_to_host(host.data(), data, count);
  return std::make_unique<StagedRequest>(std::move(host), data, memory_, *inner_, wire);
}

void HostStagedComm::all_reduce_max(float* data, std::size_t count) {
  staged(data, count, true, true, [&](float* h) { inner_->all_reduce_max(h, count); });
}

const float* HostStagedComm::readable(const float* send, std::size_t count) {
  if (count == 0 || !memory_.is_device_memory(send)) return send;
  host_extra_.resize(count);
  memory_.copy_to_host(host_extra_.data(), send, count);
  return host_extra_.data();
}

void HostStagedComm::reduce_scatter_sum(const float* send, float* recv, std::size_t count) {
  const float* from = readable(send, count * static_cast<std::size_t>(size()));
  staged(recv, count, false, true, [&](float* h) { inner_->reduce_scatter_sum(from, h, count); });
}

void HostStagedComm::all_gather(const float* send, float* recv, std::size_t count) {
  const float* from = readable(send, count);
  staged(recv, count * static_cast<std::size_t>(size()), false, true,
         [&](float* h) { inner_->all_gather(from, h, count); });
}

void HostStagedComm::reduce_scatter_sum_in_place(float* data, std::size_t count, WirePrecision wire) {
  staged(data, count * static_cast<std::size_t>(size()), true, true,
         [&](float* h) { inner_->reduce_scatter_sum_in_place(h, count, wire); });
}

void HostStagedComm::all_gather_in_place(float* data, std::size_t count) {
  staged(data, count * static_cast<std::size_t>(size()), true, true,
         [&](float* h) { inner_->all_gather_in_place(h, count); });
}

void HostStagedComm::broadcast(void* data, std::size_t bytes, int root) {
  if (bytes > 0 && memory_.is_device_memory(data)) {
    if (bytes % sizeof(float) != 0) throw std::logic_error("HostStagedComm: device broadcast of a partial float");
    staged(static_cast<float*>(data), bytes / sizeof(float), true, true,
           [&](float* h) { inner_->broadcast(h, bytes, root); });
    return;
  }
  inner_->broadcast(data, bytes, root);
}

void HostStagedComm::send(kernels::ConstActPtr data, std::size_t count, int peer) {
  if (data.is_fp32()) return inner_->send(readable(data.f32(), count), count, peer);
  if (count == 0 || !memory_.is_device_memory(data.get())) return inner_->send(data, count, peer);
  // 16-bit activations: their bytes, staged as they are.
  host_bits_.resize(count);
  memory_.copy_bytes_to_host(host_bits_.data(), data.get(), data.bytes(count));
  inner_->send(kernels::ConstActPtr(host_bits_.data(), data.storage()), count, peer);
}

void HostStagedComm::recv(kernels::ActPtr data, std::size_t count, int peer) {
  if (data.is_fp32()) {
    float* device = data.f32();
    return staged(device, count, false, true, [&](float* h) { inner_->recv(h, count, peer); });
  }
  if (count == 0 || !memory_.is_device_memory(data.get())) return inner_->recv(data, count, peer);
  host_bits_.resize(count);
  inner_->recv(kernels::ActPtr(host_bits_.data(), data.storage()), count, peer);
  memory_.copy_bytes_to_device(data.get(), host_bits_.data(), data.bytes(count));
}

}  // namespace trident::parallel
