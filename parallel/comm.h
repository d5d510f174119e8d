// Comm: the collectives of one rank group, behind one interface so that MPI (host memory) and
// NCCL (device memory, its own issue) are interchangeable. Model and trainer code only ever
// talk to a Comm, never to MPI or NCCL directly.
//
// Every collective must be called by every member of the group, in the same order.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kernels/act_ptr.h"
#include "kernels/precision.h"

namespace trident::parallel {

// What a gradient reduction's values travel as (parallel.grad_reduce). kFp32: the plain float
// sum. kBf16 / kFp16: each rank's values are rounded to the format (nearest, ties to even)
// before they leave it, every partial sum is rounded to it again (as NCCL's 16-bit reductions
// do), and the result, a 16-bit value, is widened back into the float buffer. Half the bytes,
// at the format's precision; which partial sums form depends on the library's algorithm, so
// the result may differ between group sizes in the last 16-bit place, never between runs. A
// group of one rank leaves the data untouched.
using WirePrecision = kernels::Precision;

// A pending non-blocking operation. After wait() returns, whatever is issued next sees the
// completed result: on the host for MPI (wait() blocks), on the backend's stream for NCCL
// (the stream waits; the host does not). Read a device result through the backend, never
// directly. test() only checks (and lets the library make progress). Destroying a pending
// request waits for it.
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;
};

// The memory a communicator holds for its own buffers (the 16-bit wire's encoded values, host
// copies of device buffers), kept for reuse between steps. `device`: allocated through the
// backend (DeviceMemory::allocate_device), counted in its high-water mark; `host`: host memory.
struct CommBufferBytes {
  std::size_t device = 0;
  std::size_t host = 0;
  CommBufferBytes& operator+=(const CommBufferBytes& o) {
    device += o.device;
    host += o.host;
    return *this;
  }
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // What this group is ("data", "tensor", ...), for messages.
  virtual const std::string& name() const = 0;

  // Buffers of activations are ActPtr (kernels/act_ptr.h; a float* converts as fp32): a 16-bit
  // buffer travels in its own format and its sums are formed as the 16-bit wire's (rounded to
  // the format after every addition, as NCCL's 16-bit reductions do), half of fp32's bytes.
  // Operands of one call share one storage precision.

  // In-place sums over the group.
  virtual void all_reduce_sum(kernels::ActPtr data, std::size_t count) = 0;
  virtual void all_reduce_sum(double* data, std::size_t count) = 0;
  virtual std::unique_ptr<CommRequest> iall_reduce_sum(float* data, std::size_t count, WirePrecision wire) = 0;
  // In place, non-blocking: after wait(), root's data[count] holds the sum over the group, its
  // values travelling in `wire` as iall_reduce_sum's. The other ranks' data is left as it was
  // by MPI, the host staging and NCCL (whose receive buffer counts at the root only); the
  // trainer never reads it. ZeRO-1's gradient buckets: each lies in one rank's block and is
  // summed to that rank.
  virtual std::unique_ptr<CommRequest> ireduce_sum(float* data, std::size_t count, int root, WirePrecision wire) = 0;
  virtual int all_reduce_max(int value) = 0;
  virtual void all_reduce_max(float* data, std::size_t count) = 0;
  // recv[count] = the sum over ranks of the rank-th block of send[count * size].
  virtual void reduce_scatter_sum(kernels::ConstActPtr send, kernels::ActPtr recv, std::size_t count) = 0;
  // recv[count * size] = every rank's send[count], in rank order.
  virtual void all_gather(kernels::ConstActPtr send, kernels::ActPtr recv, std::size_t count) = 0;
  // In place over data[count * size] (as NCCL's in-place forms): afterwards the rank's own
  // block data[rank*count, (rank+1)*count) holds the sum of that block over the group; the
  // other blocks are unspecified. `wire` is what an fp32 buffer's values travel as; a 16-bit
  // buffer always travels as itself (in_place_wire).
  virtual void reduce_scatter_sum_in_place(kernels::ActPtr data, std::size_t count, WirePrecision wire) = 0;
  // In place over data[count * size]: every rank's own block is copied to all ranks.
  virtual void all_gather_in_place(kernels::ActPtr data, std::size_t count) = 0;
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  // In place, non-blocking: after wait(), data[count] holds root's values on every rank (their
  // bits, in the buffer's storage). ZeRO-1's parameter gather (parallel/param_gather.h): each
  // bucket from the rank whose block holds it, waited for by the next forward as it reaches the
  // bucket. This default broadcasts at once and returns a finished request; MpiComm and NcclComm
  // queue it.
  virtual std::unique_ptr<CommRequest> ibroadcast(kernels::ActPtr data, std::size_t count, int root);
  // Point-to-point (pipeline boundaries): `count` elements in the buffer's storage precision,
  // fp32 or 16-bit activations (kernels/act_ptr.h; a float* converts). Both sides must agree.
  virtual void send(kernels::ConstActPtr data, std::size_t count, int peer) = 0;
  virtual void recv(kernels::ActPtr data, std::size_t count, int peer) = 0;
  virtual void barrier() = 0;

  // What this communicator (and any it wraps) holds now; parallel/comm_buffers.h estimates it.
  virtual CommBufferBytes buffer_bytes() const { return {}; }
};

// A request that is already complete (an operation done before it was returned).
std::unique_ptr<CommRequest> completed_request();

// Broadcasts a string from root to every member (helpers over Comm::broadcast).
std::string broadcast_string(Comm& comm, const std::string& value, int root);
// Every member's string, in rank order, on every member. One broadcast per member: for a few
// start-up facts on small groups (a node's GPU identities), not for data.
std::vector<std::string> all_gather_strings(Comm& comm, const std::string& value);

// Collective agreement on an error: every member passes its own error text ("" = fine). If
// any member failed, every member gets the text of the lowest failing rank; else "". Lets a
// check that only some ranks can make (a file, a device) fail on every rank with one message.
std::string agree_on_error(Comm& comm, const std::string& local_error);

// The format reduce_scatter_sum_in_place's values travel as: `wire` for an fp32 buffer, the
// buffer's own for a 16-bit one (std::logic_error if `wire` names the other 16-bit format).
WirePrecision in_place_wire(kernels::ConstActPtr data, WirePrecision wire);
// std::logic_error unless send and recv have one storage precision (`what` names the call).
void require_same_storage(kernels::ConstActPtr send, kernels::ConstActPtr recv, const char* what);

}  // namespace trident::parallel
