#include "parallel/mpi_comm.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "mpi_support/mpi_check.h"

namespace trident::parallel {

namespace {

// MPI counts are int: larger buffers go in pieces.
constexpr std::size_t kMaxCount = INT_MAX / 2;

// The calls below that move one block in one MPI call (no piecewise form): a block past MPI's
// int counts is a caller's error, named with its size.
[[noreturn]] void throw_too_large(const char* call, std::size_t count) {
  throw std::length_error(std::string(call) + ": a block of " + std::to_string(count) +
                          " elements, more than the " + std::to_string(kMaxCount) + " one MPI call moves here");
}

int as_count(std::size_t count) { return static_cast<int>(count); }

// Starts one non-blocking call per piece of at most kMaxCount elements:
// start(first element, piece count, request).
template <class Start>
std::vector<MPI_Request> start_in_pieces(std::size_t count, Start&& start) {
  std::vector<MPI_Request> requests;
  for (std::size_t done = 0; done < count; done += kMaxCount) {
    MPI_Request request;
    start(done, as_count(std::min(kMaxCount, count - done)), &request);
    requests.push_back(request);
  }
  return requests;
}

// Pending MPI requests; `finish` (if any) runs once they have completed, on the host (the
// 16-bit wire decodes its result into the caller's buffer there).
class MpiRequest final : public CommRequest {
 public:
  MpiRequest(std::vector<MPI_Request> requests, std::function<void()> finish = {})
      : requests_(std::move(requests)), finish_(std::move(finish)) {}
  ~MpiRequest() override { wait(); }
  void wait() override {
    if (!requests_.empty()) {
      TRIDENT_MPI_CHECK(MPI_Waitall(as_count(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE));
      requests_.clear();
    }
    complete();
  }
  bool test() override {
    if (!requests_.empty()) {
      int done = 0;
      TRIDENT_MPI_CHECK(MPI_Testall(as_count(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE));
      if (!done) return false;
      requests_.clear();
    }
    complete();
    return true;
  }

 private:
  void complete() {
    if (!finish_) return;
    finish_();
    finish_ = nullptr;
  }
  std::vector<MPI_Request> requests_;
  std::function<void()> finish_;
};

// The MPI reduction ops of the 16-bit wire: inout[i] = round(in[i] + inout[i]) on encoded
// values, the addition in float (exact for two 16-bit values up to the final rounding).
template <kernels::Precision P>
void sum_16bit(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  const int n = *len;
  for (int i = 0; i < n; ++i) {
    b[i] = kernels::encode_16bit(kernels::decode_16bit(a[i], P) + kernels::decode_16bit(b[i], P), P);
  }
}

void encode(uint16_t* wire, const float* data, std::size_t count, WirePrecision precision) {
  for (std::size_t i = 0; i < count; ++i) wire[i] = kernels::encode_16bit(data[i], precision);
}

void decode(float* data, const uint16_t* wire, std::size_t count, WirePrecision precision) {
  for (std::size_t i = 0; i < count; ++i) data[i] = kernels::decode_16bit(wire[i], precision);
}

}  // namespace

MpiComm::MpiComm(MPI_Comm comm, std::string name) : comm_(comm), name_(std::move(name)) {
  TRIDENT_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  TRIDENT_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  // Commutative (1): like MPI_SUM on floats, the order of the additions is the library's, and
  // fixed for a given group size and count.
  TRIDENT_MPI_CHECK(MPI_Op_create(&sum_16bit<kernels::Precision::kBf16>, 1, &bf16_sum_));
  TRIDENT_MPI_CHECK(MPI_Op_create(&sum_16bit<kernels::Precision::kFp16>, 1, &fp16_sum_));
}

MpiComm::~MpiComm() {
  int finalized = 0;
  TRIDENT_MPI_CHECK(MPI_Finalized(&finalized));
  if (finalized) return;
  if (bf16_sum_ != MPI_OP_NULL) TRIDENT_MPI_CHECK(MPI_Op_free(&bf16_sum_));
  if (fp16_sum_ != MPI_OP_NULL) TRIDENT_MPI_CHECK(MPI_Op_free(&fp16_sum_));
  if (comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_SELF && comm_ != MPI_COMM_NULL) {
    TRIDENT_MPI_CHECK(MPI_Comm_free(&comm_));
  }
}

std::vector<uint16_t>& MpiComm::wire_buffer(const float* data, std::size_t count) {
  std::vector<uint16_t>& buffer = wire_buffers_[data];
  if (buffer.size() < count) buffer.resize(count);
  return buffer;
}

CommBufferBytes MpiComm::buffer_bytes() const {
  CommBufferBytes held;
  for (const auto& entry : wire_buffers_) held.host += entry.second.capacity() * sizeof(uint16_t);
  return held;
}

void MpiComm::all_reduce_sum(kernels::ActPtr data, std::size_t count) {
  const MPI_Datatype type = element_type(data.storage());
  const MPI_Op sum = sum_op(data.storage());
  for (std::size_t done = 0; done < count; done += kMaxCount) {
    const std::size_t n = std::min(kMaxCount, count - done);
    TRIDENT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, (data + done).get(), as_count(n), type, sum, comm_));
  }
}

void MpiComm::all_reduce_sum(double* data, std::size_t count) {
  for (std::size_t done = 0; done < count; done += kMaxCount) {
    const std::size_t n = std::min(kMaxCount, count - done);
    TRIDENT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + done, as_count(n), MPI_DOUBLE, MPI_SUM, comm_));
  }
}

std::unique_ptr<CommRequest> MpiComm::iall_reduce_sum(float* data, std::size_t count, WirePrecision wire) {
  if (wire == WirePrecision::kFp32 || size_ == 1) {
    return std::make_unique<MpiRequest>(start_in_pieces(count, [&](std::size_t done, int n, MPI_Request* request) {
      TRIDENT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data + done, n, MPI_FLOAT, MPI_SUM, comm_, request));
    }));
  }
  uint16_t* encoded = wire_buffer(data, count).data();
  encode(encoded, data, count, wire);
  std::vector<MPI_Request> requests = start_in_pieces(count, [&](std::size_t done, int n, MPI_Request* request) {
    TRIDENT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, encoded + done, n, MPI_UINT16_T, wire_sum(wire), comm_, request));
  });
  return std::make_unique<MpiRequest>(std::move(requests), [=] { decode(data, encoded, count, wire); });
}

std::unique_ptr<CommRequest> MpiComm::ireduce_sum(float* data, std::size_t count, int root, WirePrecision wire) {
  if (root < 0 || root >= size_) {
    throw std::logic_error("ireduce_sum: root " + std::to_string(root) + " not in the group");
  }
  const bool at_root = rank_ == root;
  // MPI's in-place form: the root's buffer is its contribution and then the sum; the other
  // ranks only send theirs.
  auto start = [&](void* values, int n, MPI_Datatype type, MPI_Op op, MPI_Request* request) {
    TRIDENT_MPI_CHECK(MPI_Ireduce(at_root ? MPI_IN_PLACE : values, at_root ? values : nullptr, n, type, op, root,
                                  comm_, request));
  };
  if (wire == WirePrecision::kFp32 || size_ == 1) {
    return std::make_unique<MpiRequest>(start_in_pieces(count, [&](std::size_t done, int n, MPI_Request* request) {
      start(data + done, n, MPI_FLOAT, MPI_SUM, request);
    }));
  }
  uint16_t* encoded = wire_buffer(data, count).data();
  encode(encoded, data, count, wire);
  std::vector<MPI_Request> requests = start_in_pieces(count, [&](std::size_t done, int n, MPI_Request* request) {
    start(encoded + done, n, MPI_UINT16_T, wire_sum(wire), request);
  });
  if (!at_root) return std::make_unique<MpiRequest>(std::move(requests));
  return std::make_unique<MpiRequest>(std::move(requests), [=] { decode(data, encoded, count, wire); });
}

int MpiComm::all_reduce_max(int value) {
  int result = value;
  TRIDENT_MPI_CHECK(MPI_Allreduce(&value, &result, 1, MPI_INT, MPI_MAX, comm_));
  return result;
}

void MpiComm::all_reduce_max(float* data, std::size_t count) {
  for (std::size_t done = 0; done < count; done += kMaxCount) {
    const std::size_t n = std::min(kMaxCount, count - done);
    TRIDENT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + done, as_count(n), MPI_FLOAT, MPI_MAX, comm_));
  }
}

void MpiComm::reduce_scatter_sum(kernels::ConstActPtr send, kernels::ActPtr recv, std::size_t count) {
  require_same_storage(send, recv, "reduce_scatter_sum");
  if (count > kMaxCount) throw_too_large("reduce_scatter_sum", count);
  TRIDENT_MPI_CHECK(MPI_Reduce_scatter_block(send.get(), recv.get(), as_count(count), element_type(recv.storage()),
                                             sum_op(recv.storage()), comm_));
}

void MpiComm::all_gather(kernels::ConstActPtr send, kernels::ActPtr recv, std::size_t count) {
  require_same_storage(send, recv, "all_gather");
  if (count > kMaxCount) throw_too_large("all_gather", count);
  const MPI_Datatype type = element_type(recv.storage());
  TRIDENT_MPI_CHECK(MPI_Allgather(send.get(), as_count(count), type, recv.get(), as_count(count), type, comm_));
}

void MpiComm::reduce_scatter_sum_in_place(kernels::ActPtr data, std::size_t count, WirePrecision wire) {
  wire = in_place_wire(data, wire);
  if (size_ == 1) return;
  if (count > kMaxCount) throw_too_large("reduce_scatter_sum_in_place", count);
  const kernels::ActPtr own = data + static_cast<std::size_t>(rank_) * count;
  if (data.is_fp32() && wire != WirePrecision::kFp32) {
    float* values = data.f32();
    const std::size_t total = count * static_cast<std::size_t>(size_);
    uint16_t* encoded = wire_buffer(values, total).data();
    encode(encoded, values, total, wire);
    // The in-place form leaves this rank's summed block at the start of the buffer.
    TRIDENT_MPI_CHECK(
        MPI_Reduce_scatter_block(MPI_IN_PLACE, encoded, as_count(count), MPI_UINT16_T, wire_sum(wire), comm_));
    decode(own.f32(), encoded, count, wire);
    return;
  }
  // The buffer travels as it is stored (fp32, or 16-bit activations summed in their format).
  // MPI's in-place form leaves the result at the start of the buffer: move it to our block.
  TRIDENT_MPI_CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, data.get(), as_count(count), element_type(data.storage()),
                                             sum_op(data.storage()), comm_));
  if (rank_ != 0) std::memmove(own.get(), data.get(), data.bytes(count));
}

void MpiComm::all_gather_in_place(kernels::ActPtr data, std::size_t count) {
  if (size_ == 1) return;
  if (count > kMaxCount) throw_too_large("all_gather_in_place", count);
  TRIDENT_MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data.get(), as_count(count),
                                  element_type(data.storage()), comm_));
}

void MpiComm::broadcast(void* data, std::size_t bytes, int root) {
  auto* p = static_cast<char*>(data);
  for (std::size_t done = 0; done < bytes; done += kMaxCount) {
    const std::size_t n = std::min(kMaxCount, bytes - done);
    TRIDENT_MPI_CHECK(MPI_Bcast(p + done, as_count(n), MPI_BYTE, root, comm_));
  }
}

std::unique_ptr<CommRequest> MpiComm::ibroadcast(kernels::ActPtr data, std::size_t count, int root) {
  if (root < 0 || root >= size_) throw std::logic_error("ibroadcast: root " + std::to_string(root) + " not in the group");
  const MPI_Datatype type = element_type(data.storage());
  return std::make_unique<MpiRequest>(start_in_pieces(count, [&](std::size_t done, int n, MPI_Request* request) {
    TRIDENT_MPI_CHECK(MPI_Ibcast((data + done).get(), n, type, root, comm_, request));
  }));
}

void MpiComm::send(kernels::ConstActPtr data, std::size_t count, int peer) {
  // 16-bit activations travel as their bit patterns: nothing is computed on them.
  const MPI_Datatype type = data.is_fp32() ? MPI_FLOAT : MPI_UINT16_T;
  for (std::size_t done = 0; done < count; done += kMaxCount) {
    const std::size_t n = std::min(kMaxCount, count - done);
    TRIDENT_MPI_CHECK(MPI_Send((data + done).get(), as_count(n), type, peer, 0, comm_));
  }
}

void MpiComm::recv(kernels::ActPtr data, std::size_t count, int peer) {
  const MPI_Datatype type = data.is_fp32() ? MPI_FLOAT : MPI_UINT16_T;
  for (std::size_t done = 0; done < count; done += kMaxCount) {
    const std::size_t n = std::min(kMaxCount, count - done);
    TRIDENT_MPI_CHECK(MPI_Recv((data + done).get(), as_count(n), type, peer, 0, comm_, MPI_STATUS_IGNORE));
  }
}

void MpiComm::barrier() { TRIDENT_MPI_CHECK(MPI_Barrier(comm_)); }

}  // namespace trident::parallel
