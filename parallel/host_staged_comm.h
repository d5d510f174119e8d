// HostStagedComm: MPI collectives on device buffers, staged through host memory.
//
// MPI (without CUDA awareness) reads and writes host memory. Under the CUDA backend the model's
// buffers (gradients, activations, logits pieces) live on the GPU, while the trainer's scalars
// (loss sums, the gradient norm, flags) are on the host. This decorator asks, per call, whether
// a buffer is device memory: device buffers are copied to the host, the inner communicator
// works on the copy, and the result is copied back; host buffers pass straight through. It is
// `parallel.comm = mpi` on GPUs (design.md section 5), and lets several ranks share one GPU to
// test layouts. NCCL, which reads device memory itself, does not need it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/backend.h"
#include "parallel/comm.h"

namespace trident::parallel {

// What the decorator needs of a backend's memory (kernels::Backend provides it; tests fake it).
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual bool is_device_memory(const void* ptr) const = 0;
  virtual void copy_to_host(float* host, const float* device, std::size_t count) = 0;
  virtual void copy_to_device(float* device, const float* host, std::size_t count) = 0;
  virtual void copy_bytes_to_host(void* host, const void* device, std::size_t bytes) = 0;
  virtual void copy_bytes_to_device(void* device, const void* host, std::size_t bytes) = 0;
  // Device memory for a communicator's own buffers (NCCL's 16-bit wire), so that the backend's
  // high-water mark counts them. Contents undefined; release with release_device.
  virtual float* allocate_device(std::size_t floats) = 0;
  virtual void release_device(float* ptr) = 0;
};

// A backend's memory as DeviceMemory.
class BackendMemory final : public DeviceMemory {
 public:
  explicit BackendMemory(kernels::Backend& backend) : backend_(backend) {}
  bool is_device_memory(const void* ptr) const override { return backend_.is_device_memory(ptr); }
  void copy_to_host(float* host, const float* device, std::size_t count) override {
    backend_.copy_to_host(host, device, count);
  }
  void copy_to_device(float* device, const float* host, std::size_t count) override {
    backend_.copy_to_device(device, host, count);
  }
  void copy_bytes_to_host(void* host, const void* device, std::size_t bytes) override {
    backend_.copy_bytes_to_host(host, device, bytes);
  }
  void copy_bytes_to_device(void* device, const void* host, std::size_t bytes) override {
    backend_.copy_bytes_to_device(device, host, bytes);
  }
  float* allocate_device(std::size_t floats) override { return backend_.allocate(floats); }
  void release_device(float* ptr) override { backend_.release(ptr); }

 private:
  kernels::Backend& backend_;
};

class HostStagedComm final : public Comm {
 public:
  // `memory` must outlive the communicator.
  HostStagedComm(std::unique_ptr<Comm> inner, DeviceMemory& memory) : inner_(std::move(inner)), memory_(memory) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }

  void all_reduce_sum(kernels::ActPtr data, std::size_t count) override;
  // Doubles are host scalars in Trident (the gradient norm); a device buffer is a logic error.
  void all_reduce_sum(double* data, std::size_t count) override;
  std::unique_ptr<CommRequest> iall_reduce_sum(float* data, std::size_t count, WirePrecision wire) override;
  std::unique_ptr<CommRequest> ireduce_sum(float* data, std::size_t count, int root, WirePrecision wire) override;
  int all_reduce_max(int value) override { return inner_->all_reduce_max(value); }
  void all_reduce_max(float* data, std::size_t count) override;
  void reduce_scatter_sum(kernels::ConstActPtr send, kernels::ActPtr recv, std::size_t count) override;
  void all_gather(kernels::ConstActPtr send, kernels::ActPtr recv, std::size_t count) override;
  void reduce_scatter_sum_in_place(kernels::ActPtr data, std::size_t count, WirePrecision wire) override;
  void all_gather_in_place(kernels::ActPtr data, std::size_t count) override;
  // The host copies (mirrors of reduced buffers, blocking calls' copies) plus the inner's.
  CommBufferBytes buffer_bytes() const override;
  void broadcast(void* data, std::size_t bytes, int root) override;
  // Device buffers: a blocking broadcast through the host copy (finished when returned); host
  // buffers: the inner communicator's.
  std::unique_ptr<CommRequest> ibroadcast(kernels::ActPtr data, std::size_t count, int root) override;
  void send(kernels::ConstActPtr data, std::size_t count, int peer) override;
  void recv(kernels::ActPtr data, std::size_t count, int peer) override;
  void barrier() override { inner_->barrier(); }

  // The host mirror of one device buffer for its non-blocking reductions (one in flight at a
  // time: a second before the first is done is a logic error).
  struct Mirror {
    std::vector<float> values;
    bool in_flight = false;
  };

 private:
  // Runs op on a host view of data[count] (an ActPtr in data's storage precision): the data
  // itself when it is host memory, else a host copy of its bytes (copied in when `in`, copied
  // back when `out`).
  template <class Op>
  void staged(kernels::ActPtr data, std::size_t count, bool in, bool out, Op&& op);
  // The host mirror of device buffer data, holding its count values now (a logic error while
  // a reduction of it is in flight).
  Mirror& mirror_of(float* data, std::size_t count);
  // A host-readable view of an input buffer: itself, or a copy of its bytes.
  kernels::ConstActPtr readable(kernels::ConstActPtr send, std::size_t count);

  // Host copies reused between blocking calls, one pair per width.
  struct HostCopy {
    std::vector<float> f32;
    std::vector<uint16_t> bits16;
    kernels::ActPtr view(kernels::Precision storage, std::size_t count);
    std::size_t bytes() const { return f32.capacity() * sizeof(float) + bits16.capacity() * sizeof(uint16_t); }
  };
  std::unique_ptr<Comm> inner_;
  DeviceMemory& memory_;
  HostCopy host_, host_extra_;
  std::unordered_map<const float*, Mirror> mirrors_;  // by device buffer, kept for the run
};

}  // namespace trident::parallel
