#include "parallel/nccl/nccl_comm.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <new>
#include <string>
#include <stdexcept>

#include "kernels/cuda/wire_cast.cuh"  // encode_16bit, decode_16bit
#include "mpi_support/mpi_check.h"
#include "mpi_support/mpi_process.h"  // abort_job

namespace trident::parallel {

namespace {

// Library errors after start-up cannot be recovered by one rank: report the call, file and line
// (design.md section 8) and abort the job, so that no other rank waits forever. Exit status 1, an
// internal error (docs/running.md): 3 means a diverged run, which job scripts do not retry.
[[noreturn]] void abort_job(const char* library, const char* call, const char* error, const char* file, int line) {
  std::fprintf(stderr, "trident: %s error: %s failed: %s (%s:%d)\n", library, call, error, file, line);
  mpi_support::abort_job(1);
}

void check_nccl(ncclResult_t result, const char* call, const char* file, int line) {
  if (result == ncclSuccess) return;
  const char* last = ncclGetLastError(nullptr);
  std::string text = ncclGetErrorString(result);
  if (last != nullptr && *last != '\0') text += std::string(": ") + last;
  abort_job("NCCL", call, text.c_str(), file, line);
}

void check_cuda(cudaError_t result, const char* call, const char* file, int line) {
  if (result != cudaSuccess) abort_job("CUDA", call, cudaGetErrorString(result), file, line);
}

#define NCCL_CHECK(call) check_nccl((call), #call, __FILE__, __LINE__)
#define CUDA_CALL_CHECK(call) check_cuda((call), #call, __FILE__, __LINE__)

// An event recorded on `from` that `to` waits for; the event is released at once (CUDA keeps it
// alive until it has completed).
void order(cudaStream_t from, cudaStream_t to) {
  cudaEvent_t event;
  CUDA_CALL_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  CUDA_CALL_CHECK(cudaEventRecord(event, from));
  CUDA_CALL_CHECK(cudaStreamWaitEvent(to, event, 0));
  CUDA_CALL_CHECK(cudaEventDestroy(event));
}

// NCCL's element type of a buffer in its storage precision. 16-bit sums are NCCL's own: each
// addition rounded to the format, as comm.h's 16-bit wire describes.
ncclDataType_t nccl_type(kernels::Precision storage) {
  switch (storage) {
    case kernels::Precision::kBf16: return ncclBfloat16;
    case kernels::Precision::kFp16: return ncclFloat16;
    case kernels::Precision::kFp32: break;
  }
  return ncclFloat32;
}

// A queued all-reduce: its completion event, which the compute stream waits for in wait().
class NcclRequest final : public CommRequest {
 public:
  NcclRequest(cudaEvent_t done, cudaStream_t compute) : done_(done), compute_(compute) {}
  ~NcclRequest() override { wait(); }
  void wait() override {
    if (done_ == nullptr) return;
    CUDA_CALL_CHECK(cudaStreamWaitEvent(compute_, done_, 0));
    CUDA_CALL_CHECK(cudaEventDestroy(done_));
    done_ = nullptr;
  }
  bool test() override {
    if (done_ == nullptr) return true;
    const cudaError_t state = cudaEventQuery(done_);
    if (state == cudaErrorNotReady) {
      // The runtime also records "not ready" as this thread's last error (PyTorch clears it the
      // same way). Left there, the next kernel launch's CUDA_CHECK_LAUNCH (cudaGetLastError)
      // would throw it as a failure: GradientBuckets::mark_final_from calls test() in the middle
      // of backward. Clear it only if it is that error, so a real one is not swallowed.
      if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
      return false;
    }
    CUDA_CALL_CHECK(state);
    return true;  // complete; wait() still orders the compute stream after it
  }

 private:
  cudaEvent_t done_;
  cudaStream_t compute_;
};

}  // namespace

NcclComm::NcclComm(std::unique_ptr<Comm> host, MPI_Comm mpi, void* compute_stream, DeviceMemory& memory)
    : host_(std::move(host)), memory_(memory), compute_(static_cast<cudaStream_t>(compute_stream)) {
  if (compute_ == nullptr) throw std::logic_error("NcclComm: the backend has no CUDA stream");
  ncclUniqueId id;
  if (host_->rank() == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  TRIDENT_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, mpi));
  NCCL_CHECK(ncclCommInitRank(&comm_, host_->size(), id, host_->rank()));
  CUDA_CALL_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

NcclComm::~NcclComm() {
  // No throwing or aborting in a destructor: best effort.
  if (stream_ != nullptr) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  if (comm_ != nullptr) ncclCommDestroy(comm_);
  if (wire_ != nullptr) memory_.release_device(wire_);  // the backend's release does not throw
}

uint16_t* NcclComm::wire_buffer(std::size_t count) {
  if (wire_count_ < count) {
    // The old buffer may still be read by queued work on this stream: free it after that.
    if (wire_ != nullptr) {
      CUDA_CALL_CHECK(cudaStreamSynchronize(stream_));
      memory_.release_device(wire_);
      wire_ = nullptr;
      wire_count_ = 0;
    }
    try {
      wire_ = memory_.allocate_device((count + 1) / 2);  // two 16-bit values per float
    } catch (const std::bad_alloc&) {
      // In the middle of backward, with the other ranks inside NCCL: end the job, naming it.
      const std::string what = "out of device memory for " + std::to_string(count) +
                               " values (2 bytes each); parallel.grad_reduce = fp32 needs no wire buffer";
      abort_job("CUDA", "allocating the 16-bit gradient wire buffer", what.c_str(), __FILE__, __LINE__);
    }
    wire_count_ = count;
  }
  return reinterpret_cast<uint16_t*>(wire_);
}

template <class Reduce>
void NcclComm::reduce_16bit(float* data, std::size_t count, WirePrecision wire, std::size_t result_offset,
                            std::size_t result_count, Reduce&& reduce) {
  uint16_t* packed = wire_buffer(count);
  kernels::cuda::encode_16bit(packed, data, count, wire, stream_);
  reduce(packed, nccl_type(wire));
  kernels::cuda::decode_16bit(data + result_offset, packed + result_offset, result_count, wire, stream_);
}

void NcclComm::after_compute() { order(compute_, stream_); }
void NcclComm::before_compute() { order(stream_, compute_); }

void NcclComm::all_reduce_sum(kernels::ActPtr data, std::size_t count) {
  if (count == 0 || !on_device(data.get())) return host_->all_reduce_sum(data, count);
  after_compute();
  NCCL_CHECK(ncclAllReduce(data.get(), data.get(), count, nccl_type(data.storage()), ncclSum, comm_, stream_));
  before_compute();
}

void NcclComm::all_reduce_sum(double* data, std::size_t count) {
  if (count > 0 && on_device(data)) throw std::logic_error("NcclComm: doubles are host scalars in Trident");
  host_->all_reduce_sum(data, count);
}

std::unique_ptr<CommRequest> NcclComm::iall_reduce_sum(float* data, std::size_t count, WirePrecision wire) {
  if (count == 0 || !on_device(data)) return host_->iall_reduce_sum(data, count, wire);
  after_compute();
  if (wire == WirePrecision::kFp32 || size() == 1) {
    NCCL_CHECK(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream_));
  } else {
    reduce_16bit(data, count, wire, 0, count, [&](uint16_t* packed, ncclDataType_t type) {
      NCCL_CHECK(ncclAllReduce(packed, packed, count, type, ncclSum, comm_, stream_));
    });
  }
  return queued_request();
}

std::unique_ptr<CommRequest> NcclComm::ireduce_sum(float* data, std::size_t count, int root, WirePrecision wire) {
  if (root < 0 || root >= size()) throw std::logic_error("NcclComm::ireduce_sum: root not in the group");
  if (count == 0 || !on_device(data)) return host_->ireduce_sum(data, count, root, wire);
  after_compute();
  if (wire == WirePrecision::kFp32 || size() == 1) {
    // In place: NCCL reads every rank's buffer and writes the root's only.
    NCCL_CHECK(ncclReduce(data, data, count, ncclFloat32, ncclSum, root, comm_, stream_));
  } else {
    // Only the root decodes a result; elsewhere the floats stay as they were.
    reduce_16bit(data, count, wire, 0, rank() == root ? count : 0, [&](uint16_t* packed, ncclDataType_t type) {
      NCCL_CHECK(ncclReduce(packed, packed, count, type, ncclSum, root, comm_, stream_));
    });
  }
  return queued_request();
}

std::unique_ptr<CommRequest> NcclComm::queued_request() {
  cudaEvent_t done;
  CUDA_CALL_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  CUDA_CALL_CHECK(cudaEventRecord(done, stream_));
  return std::make_unique<NcclRequest>(done, compute_);
}

void NcclComm::all_reduce_max(float* data, std::size_t count) {
  if (count == 0 || !on_device(data)) return host_->all_reduce_max(data, count);
  after_compute();
  NCCL_CHECK(ncclAllReduce(data, data, count, ncclFloat32, ncclMax, comm_, stream_));
  before_compute();
}

void NcclComm::reduce_scatter_sum(kernels::ConstActPtr send, kernels::ActPtr recv, std::size_t count) {
  require_same_storage(send, recv, "reduce_scatter_sum");
  if (count == 0) return;
  // MPI would be handed the device one (no caller mixes them; the fallback is for host buffers).
  if (on_device(send.get()) != on_device(recv.get())) {
    throw std::logic_error("NcclComm::reduce_scatter_sum: one buffer on the device and one on the host");
  }
  if (!on_device(send.get())) return host_->reduce_scatter_sum(send, recv, count);
  after_compute();
  NCCL_CHECK(ncclReduceScatter(send.get(), recv.get(), count, nccl_type(recv.storage()), ncclSum, comm_, stream_));
  before_compute();
}

void NcclComm::all_gather(kernels::ConstActPtr send, kernels::ActPtr recv, std::size_t count) {
  require_same_storage(send, recv, "all_gather");
  if (count == 0) return;
  // MPI would be handed the device one (no caller mixes them; the fallback is for host buffers).
  if (on_device(send.get()) != on_device(recv.get())) {
    throw std::logic_error("NcclComm::all_gather: one buffer on the device and one on the host");
  }
  if (!on_device(send.get())) return host_->all_gather(send, recv, count);
  after_compute();
  NCCL_CHECK(ncclAllGather(send.get(), recv.get(), count, nccl_type(recv.storage()), comm_, stream_));
  before_compute();
}

void NcclComm::reduce_scatter_sum_in_place(kernels::ActPtr data, std::size_t count, WirePrecision wire) {
  wire = in_place_wire(data, wire);
  if (count == 0 || !on_device(data.get())) return host_->reduce_scatter_sum_in_place(data, count, wire);
  after_compute();
  // NCCL's in-place form: the receive buffer is the rank's own block of the send buffer.
  const std::size_t own_offset = static_cast<std::size_t>(rank()) * count;
  if (!data.is_fp32() || wire == WirePrecision::kFp32 || size() == 1) {
    // As stored: fp32, or 16-bit activations summed in their format.
    NCCL_CHECK(ncclReduceScatter(data.get(), (data + own_offset).get(), count, nccl_type(data.storage()), ncclSum,
                                 comm_, stream_));
  } else {
    reduce_16bit(data.f32(), count * static_cast<std::size_t>(size()), wire, own_offset, count,
                 [&](uint16_t* packed, ncclDataType_t type) {
                   NCCL_CHECK(ncclReduceScatter(packed, packed + own_offset, count, type, ncclSum, comm_, stream_));
                 });
  }
  before_compute();
}

void NcclComm::all_gather_in_place(kernels::ActPtr data, std::size_t count) {
  if (count == 0 || !on_device(data.get())) return host_->all_gather_in_place(data, count);
  after_compute();
  const kernels::ActPtr own = data + static_cast<std::size_t>(rank()) * count;
  NCCL_CHECK(ncclAllGather(own.get(), data.get(), count, nccl_type(data.storage()), comm_, stream_));
  before_compute();
}

void NcclComm::broadcast(void* data, std::size_t bytes, int root) {
  if (bytes == 0 || !on_device(data)) return host_->broadcast(data, bytes, root);
  after_compute();
  NCCL_CHECK(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream_));
  before_compute();
}

std::unique_ptr<CommRequest> NcclComm::ibroadcast(kernels::ActPtr data, std::size_t count, int root) {
  if (root < 0 || root >= size()) throw std::logic_error("NcclComm::ibroadcast: root not in the group");
  if (count == 0 || !on_device(data.get())) return host_->ibroadcast(data, count, root);
  // After the kernels that wrote the root's values (AdamW's update of its block); the compute
  // stream waits for the result only in wait(), as the next forward reaches the bucket.
  after_compute();
  NCCL_CHECK(ncclBroadcast(data.get(), data.get(), count, nccl_type(data.storage()), root, comm_, stream_));
  return queued_request();
}

void NcclComm::send(kernels::ConstActPtr data, std::size_t count, int peer) {
  if (count == 0) return;
  if (!on_device(data.get())) return host_->send(data, count, peer);
  after_compute();
  NCCL_CHECK(ncclSend(data.get(), count, nccl_type(data.storage()), peer, comm_, stream_));
  // The buffer may be overwritten by the next kernels only once it has left.
  before_compute();
}

void NcclComm::recv(kernels::ActPtr data, std::size_t count, int peer) {
  if (count == 0) return;
  if (!on_device(data.get())) return host_->recv(data, count, peer);
  after_compute();
  NCCL_CHECK(ncclRecv(data.get(), count, nccl_type(data.storage()), peer, comm_, stream_));
  before_compute();
}

void NcclComm::barrier() {
  CUDA_CALL_CHECK(cudaStreamSynchronize(stream_));
  host_->barrier();
}

}  // namespace trident::parallel
