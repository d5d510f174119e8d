// NcclComm: the collectives of one group on device memory through NCCL (parallel.comm = nccl).
//
// Each group gets an NCCL communicator: its rank 0 makes the unique id, which is broadcast on
// the group's MPI communicator (design.md section 5). NCCL calls are queued on a stream of the
// communicator's own, ordered against the backend's compute stream by events:
//
//   compute ──record A──┐                    ┌──wait B── compute continues
//                        └─ comm waits A ─ NCCL op ─ record B
//
// so the host never blocks, a collective starts only after the kernels that produced its
// input, and the kernels after it see its result. A non-blocking reduction (the data-parallel
// buckets during backward) makes the compute stream wait only in CommRequest::wait(): until
// then backward goes on while NCCL reduces the finished buckets.
//
// The trainer's host scalars (loss sums, the gradient norm, stop and overflow flags) and any
// host buffer go to the group's MPI communicator instead, which this class wraps.
//
// CountingComm times these calls as the host sees them: queueing, not the transfer.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>

#include "parallel/comm.h"
#include "parallel/host_staged_comm.h"  // DeviceMemory

struct ncclComm;
struct CUstream_st;

namespace trident::parallel {

class NcclComm final : public Comm {
 public:
  // Collective over the members of `host`'s MPI communicator `mpi` (every member calls it, in the
  // same order of groups). The calling thread's current CUDA device is the rank's GPU.
  // compute_stream: the backend's stream (Backend::device_stream()). memory tells device buffers
  // from host ones and holds the 16-bit wire buffer; it must outlive this (the destructor
  // releases through it). host is owned.
  NcclComm(std::unique_ptr<Comm> host, MPI_Comm mpi, void* compute_stream, DeviceMemory& memory);
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const std::string& name() const override { return host_->name(); }

  void all_reduce_sum(kernels::ActPtr data, std::size_t count) override;
  void all_reduce_sum(double* data, std::size_t count) override;  // host scalars: MPI
  std::unique_ptr<CommRequest> iall_reduce_sum(float* data, std::size_t count, WirePrecision wire) override;
  std::unique_ptr<CommRequest> ireduce_sum(float* data, std::size_t count, int root, WirePrecision wire) override;
  int all_reduce_max(int value) override { return host_->all_reduce_max(value); }
  void all_reduce_max(float* data, std::size_t count) override;
  void reduce_scatter_sum(kernels::ConstActPtr send, kernels::ActPtr recv, std::size_t count) override;
  void all_gather(kernels::ConstActPtr send, kernels::ActPtr recv, std::size_t count) override;
  void reduce_scatter_sum_in_place(kernels::ActPtr data, std::size_t count, WirePrecision wire) override;
  void all_gather_in_place(kernels::ActPtr data, std::size_t count) override;
  void broadcast(void* data, std::size_t bytes, int root) override;
  std::unique_ptr<CommRequest> ibroadcast(kernels::ActPtr data, std::size_t count, int root) override;
  void send(kernels::ConstActPtr data, std::size_t count, int peer) override;
  void recv(kernels::ActPtr data, std::size_t count, int peer) override;
  // Waits for this group's queued NCCL work, then an MPI barrier.
  void barrier() override;
  // The 16-bit wire buffer (device, as allocated: whole floats) plus the MPI fallback's.
  CommBufferBytes buffer_bytes() const override {
    CommBufferBytes held = host_->buffer_bytes();
    held.device += (wire_count_ + 1) / 2 * sizeof(float);
    return held;
  }

 private:
  bool on_device(const void* ptr) const { return memory_.is_device_memory(ptr); }
  // Makes the comm stream wait for the compute stream's work so far.
  void after_compute();
  // Makes the compute stream wait for the comm stream's work so far.
  void before_compute();
  // A request for the work queued on the comm stream so far: wait() makes the compute stream
  // wait for it (the non-blocking reductions).
  std::unique_ptr<CommRequest> queued_request();
  // Queues on the comm stream: pack data[count] into 16 bits, `reduce` the packed buffer (an
  // NCCL call given the buffer and the NCCL type), unpack `result_count` values starting at
  // result_offset back into data + result_offset.
  template <class Reduce>
  void reduce_16bit(float* data, std::size_t count, WirePrecision wire, std::size_t result_offset,
                    std::size_t result_count, Reduce&& reduce);
  // The device buffer of count encoded values. One buffer serves every 16-bit reduction of
  // this communicator: a call's encode, NCCL operation and decode are all queued on stream_,
  // ahead of the next call's, so the stream's order keeps the calls apart even while several
  // gradient buckets are in flight. It grows to the largest call (a bucket) on first use,
  // through the backend's memory so that its high-water mark counts it (before, each bucket kept
  // a buffer of its own: 2 bytes per parameter in all); freed with the communicator.
  uint16_t* wire_buffer(std::size_t count);

  std::unique_ptr<Comm> host_;
  DeviceMemory& memory_;
  CUstream_st* compute_ = nullptr;
  CUstream_st* stream_ = nullptr;  // this communicator's own
  ncclComm* comm_ = nullptr;
  float* wire_ = nullptr;  // wire_count_ 16-bit values, from memory_.allocate_device
  std::size_t wire_count_ = 0;
};

}  // namespace trident::parallel
