// MpiComm: Comm over an MPI communicator, on host memory.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "parallel/comm.h"

namespace trident::parallel {

class MpiComm final : public Comm {
 public:
  // Takes ownership of `comm` (freed in the destructor unless it is MPI_COMM_WORLD/SELF).
  MpiComm(MPI_Comm comm, std::string name);
  ~MpiComm() override;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  MPI_Comm handle() const { return comm_; }

  void all_reduce_sum(kernels::ActPtr data, std::size_t count) override;
  void all_reduce_sum(double* data, std::size_t count) override;
  std::unique_ptr<CommRequest> iall_reduce_sum(float* data, std::size_t count, WirePrecision wire) override;
  std::unique_ptr<CommRequest> ireduce_sum(float* data, std::size_t count, int root, WirePrecision wire) override;
  int all_reduce_max(int value) override;
  void all_reduce_max(float* data, std::size_t count) override;
  void reduce_scatter_sum(kernels::ConstActPtr send, kernels::ActPtr recv, std::size_t count) override;
  void all_gather(kernels::ConstActPtr send, kernels::ActPtr recv, std::size_t count) override;
  void reduce_scatter_sum_in_place(kernels::ActPtr data, std::size_t count, WirePrecision wire) override;
  void all_gather_in_place(kernels::ActPtr data, std::size_t count) override;
  void broadcast(void* data, std::size_t bytes, int root) override;
  std::unique_ptr<CommRequest> ibroadcast(kernels::ActPtr data, std::size_t count, int root) override;
  void send(kernels::ConstActPtr data, std::size_t count, int peer) override;
  void recv(kernels::ActPtr data, std::size_t count, int peer) override;
  void barrier() override;
  CommBufferBytes buffer_bytes() const override;  // the 16-bit wire's buffers (host)

 private:
  // The 16-bit wire: the MPI reduction op summing two encoded values (decode, add in float,
  // round back), and a buffer of encoded values per reduced buffer. Gradient buckets reduce
  // the same ranges every step, so the buffers are allocated in the first step and reused.
  MPI_Op wire_sum(WirePrecision wire) const { return wire == WirePrecision::kFp16 ? fp16_sum_ : bf16_sum_; }
  // The element type and sum of a buffer in its storage precision (MPI_FLOAT, MPI_SUM for fp32).
  static MPI_Datatype element_type(kernels::Precision storage) {
    return storage == kernels::Precision::kFp32 ? MPI_FLOAT : MPI_UINT16_T;
  }
  MPI_Op sum_op(kernels::Precision storage) const {
    return storage == kernels::Precision::kFp32 ? MPI_SUM : wire_sum(storage);
  }
  std::vector<uint16_t>& wire_buffer(const float* data, std::size_t count);

  MPI_Comm comm_;
  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  MPI_Op bf16_sum_ = MPI_OP_NULL;
  MPI_Op fp16_sum_ = MPI_OP_NULL;
  std::unordered_map<const float*, std::vector<uint16_t>> wire_buffers_;
};

}  // namespace trident::parallel
