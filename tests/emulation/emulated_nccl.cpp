// The NCCL calls Trident makes (parallel/nccl), carried out over MPI for the CUDA emulation
// (cuda_emulation.h), so that parallel.comm = nccl runs there: the communicator's set-up from
// a unique id, its stream ordering and its 16-bit wire, with ranks each on an emulated GPU.
//
// - ncclCommInitRank makes an MPI communicator of the group's members alone, as NCCL's set-up
//   involves only them (the embedding group of a pipeline has no middle stages): the unique id
//   names the world rank that made it and a number of its own; each member sends its (rank,
//   world rank) there, gets the whole list back, and MPI_Comm_create_group builds the group.
//   Members must create their shared communicators in the same order, as NCCL's ranks must.
// - A call first runs the work queued on its stream (emulated_streams.cpp), so it reads its
//   send buffer after the writes it was ordered after and no sooner; then it communicates at
//   once, over the split communicator (the ranks' MPI calls stay in program order, so none
//   waits on a rank whose host is blocked elsewhere); and its result is written into the
//   receive buffer only when the stream runs that far. Work on another stream that reads the
//   result without waiting for this stream's event therefore reads the old values, and the
//   twin comparison fails, as it could on the GPU.
// - The send buffer is read at the call, as early as the stream allows; on the GPU it is read
//   when the stream gets there, perhaps much later, with the other streams run ahead. So each
//   call also queues, at its place in its stream, a check: the other streams run as far as
//   their events let them (run_other_streams_ahead), and the send buffer must still hold what
//   was read. Work on another stream that writes it without an event ordering the two (before
//   the call: a write the call should have waited for; after: an overwrite that should have
//   waited for the call) stops the program, naming the call.
// - Buffers are checked to be device memory, as the real library requires.
// - 16-bit sums add in fp32 and round after each addition, as NCCL's bf16 and fp16 sums do.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/emulation/emulated_state.h"

namespace cuda_emu {
namespace {

struct NcclComm {
  MPI_Comm mpi;
  int rank;
  int size;
};

NcclComm& comm_of(ncclComm_t comm) { return *reinterpret_cast<NcclComm*>(comm); }

std::size_t element_bytes(ncclDataType_t type) {
  switch (type) {
    case ncclFloat32: return 4;
    case ncclBfloat16:
    case ncclFloat16: return 2;
    case ncclUint8: return 1;
    default: return 0;
  }
}

float widen(ncclDataType_t type, const void* p) {
  if (type == ncclBfloat16) return __bfloat162float(*static_cast<const __nv_bfloat16*>(p));
  return __half2float(*static_cast<const __half*>(p));
}

void narrow(ncclDataType_t type, void* p, float value) {
  if (type == ncclBfloat16) {
    *static_cast<__nv_bfloat16*>(p) = __float2bfloat16_rn(value);
  } else {
    *static_cast<__half*>(p) = __float2half_rn(value);
  }
}

// MPI reductions of 16-bit values, each addition rounded to the format.
template <ncclDataType_t Type>
void sum_16bit(void* in, void* inout, int* count, MPI_Datatype*) {
  auto* a = static_cast<unsigned char*>(in);
  auto* b = static_cast<unsigned char*>(inout);
  for (int i = 0; i < *count; ++i) narrow(Type, b + 2 * i, widen(Type, a + 2 * i) + widen(Type, b + 2 * i));
}

struct Reduction {
  MPI_Datatype type;
  MPI_Op op;
};

// The MPI type and operation of an NCCL reduction (the 16-bit operations made once, freed at
// MPI_Finalize).
bool reduction(ncclDataType_t type, ncclRedOp_t op, Reduction& out) {
  if (type == ncclFloat32 && (op == ncclSum || op == ncclMax)) {
    out = {MPI_FLOAT, op == ncclSum ? MPI_SUM : MPI_MAX};
    return true;
  }
  if ((type == ncclBfloat16 || type == ncclFloat16) && op == ncclSum) {
    static MPI_Op bf16_sum = MPI_OP_NULL, fp16_sum = MPI_OP_NULL;
    MPI_Op& made = type == ncclBfloat16 ? bf16_sum : fp16_sum;
    if (made == MPI_OP_NULL) {
      MPI_Op_create(type == ncclBfloat16 ? sum_16bit<ncclBfloat16> : sum_16bit<ncclFloat16>, 1, &made);
    }
    out = {MPI_UINT16_T, made};
    return true;
  }
  return false;
}

ncclResult_t checked(int mpi_result) { return mpi_result == MPI_SUCCESS ? ncclSuccess : ncclSystemError; }

// TRIDENT_CUDA_EMULATION_NCCL_FAIL_RANK=R: ncclAllReduce on world rank R returns ncclSystemError, as
// a lost peer or a NIC fault would, to test how Trident ends the job (the status it exits with).
bool injected_failure() {
  const char* rank_text = std::getenv("TRIDENT_CUDA_EMULATION_NCCL_FAIL_RANK");
  if (rank_text == nullptr) return false;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return std::to_string(rank) == rank_text;
}

// The work queued on the call's stream runs first: the call reads its inputs after it.
void reach(cudaStream_t stream) { synchronize_stream(stream); }

[[noreturn]] void stop_unordered_write(const char* call, const void* send, std::size_t bytes) {
  std::fprintf(stderr,
               "NCCL emulation: %s's send buffer (%zu bytes at %p) was written by work on another stream that is "
               "not ordered with the call by an event: a missing event (on the GPU NCCL could send the old values "
               "or the new)\n",
               call, bytes, send);
  std::abort();
}

// Called after reach(stream), before the call communicates: what `send` holds now is what the
// call reads, and it must still be there when the stream runs the call.
void expect_unchanged_until_reached(cudaStream_t stream, const char* call, const void* send, std::size_t bytes) {
  if (bytes == 0) return;
  const auto* from = static_cast<const unsigned char*>(send);
  auto read = std::make_shared<const std::vector<unsigned char>>(from, from + bytes);
  enqueue(stream, [stream, call, send, bytes, read] {
    // The most that other streams may have written by the time the GPU reads the buffer.
    run_other_streams_ahead(stream);
    if (std::memcmp(send, read->data(), bytes) != 0) stop_unordered_write(call, send, bytes);
  });
}

// A private buffer for a call's result, written into `recv` when the stream reaches the call.
using Result = std::shared_ptr<std::vector<unsigned char>>;

Result result_buffer(std::size_t bytes) { return std::make_shared<std::vector<unsigned char>>(bytes); }

void deliver(cudaStream_t stream, void* recv, const Result& result) {
  enqueue(stream, [recv, result] {
    if (!result->empty()) std::memcpy(recv, result->data(), result->size());
  });
}

}  // namespace
}  // namespace cuda_emu

using cuda_emu::comm_of;

extern "C" {

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument (NCCL emulation)";
    case ncclInvalidUsage: return "invalid usage (NCCL emulation)";
    default: return "system error (NCCL emulation over MPI)";
  }
}

const char* ncclGetLastError(ncclComm_t) { return ""; }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  // The maker's world rank and its count of ids so far: the members meet there, on a tag of
  // that count (emulated_nccl's own range, above Trident's).
  static int made = 0;  // the emulated library's state: one per process, as NCCL's
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  std::memset(id->internal, 0, sizeof id->internal);
  const int fields[2] = {world_rank, made++};
  std::memcpy(id->internal, fields, sizeof fields);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  int fields[2] = {};
  std::memcpy(fields, id.internal, sizeof fields);
  const int maker = fields[0], tag = 0x40000 + (fields[1] & 0xffff);
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  // members[r]: the world rank of the group's rank r, gathered at the maker.
  std::vector<int> members(static_cast<std::size_t>(nranks), -1);
  members[static_cast<std::size_t>(rank)] = world_rank;
  if (world_rank == maker) {
    for (int arrived = 1; arrived < nranks; ++arrived) {
      int pair[2] = {};
      MPI_Recv(pair, 2, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      members[static_cast<std::size_t>(pair[0])] = pair[1];
    }
    for (int r = 0; r < nranks; ++r) {
      if (r != rank) MPI_Send(members.data(), nranks, MPI_INT, members[static_cast<std::size_t>(r)], tag, MPI_COMM_WORLD);
    }
  } else {
    const int pair[2] = {rank, world_rank};
    MPI_Send(pair, 2, MPI_INT, maker, tag, MPI_COMM_WORLD);
    MPI_Recv(members.data(), nranks, MPI_INT, maker, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Group world_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_incl(world_group, nranks, members.data(), &group);
  auto* c = new cuda_emu::NcclComm{};
  const int created = MPI_Comm_create_group(MPI_COMM_WORLD, group, tag, &c->mpi);
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  if (created != MPI_SUCCESS) {
    delete c;
    return ncclSystemError;
  }
  MPI_Comm_rank(c->mpi, &c->rank);
  MPI_Comm_size(c->mpi, &c->size);
  if (c->size != nranks || c->rank != rank) {
    std::fprintf(stderr, "NCCL emulation: ncclCommInitRank(%d ranks, rank %d) met %d ranks, as rank %d: the ranks "
                         "did not create their communicators in the same order\n", nranks, rank, c->size, c->rank);
    std::abort();
  }
  *comm = reinterpret_cast<ncclComm_t>(c);
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  auto* c = &comm_of(comm);
  MPI_Comm_free(&c->mpi);
  delete c;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  cuda_emu::check_stream(stream);
  const std::size_t bytes = count * cuda_emu::element_bytes(type);
  cuda_emu::require_device_range(send, bytes, "ncclAllReduce send buffer");
  cuda_emu::require_device_range(recv, bytes, "ncclAllReduce receive buffer");
  cuda_emu::Reduction r{};
  if (!cuda_emu::reduction(type, op, r)) return ncclInvalidArgument;
  if (cuda_emu::injected_failure()) return ncclSystemError;
  cuda_emu::reach(stream);
  cuda_emu::expect_unchanged_until_reached(stream, "ncclAllReduce", send, bytes);
  const cuda_emu::Result result = cuda_emu::result_buffer(bytes);
  const int status = MPI_Allreduce(send, result->data(), static_cast<int>(count), r.type, r.op, comm_of(comm).mpi);
  cuda_emu::deliver(stream, recv, result);
  return cuda_emu::checked(status);
}

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  cuda_emu::check_stream(stream);
  const cuda_emu::NcclComm& c = comm_of(comm);
  const std::size_t bytes = count * cuda_emu::element_bytes(type);
  cuda_emu::require_device_range(send, bytes, "ncclReduce send buffer");
  if (c.rank == root) cuda_emu::require_device_range(recv, bytes, "ncclReduce receive buffer");
  cuda_emu::Reduction r{};
  if (!cuda_emu::reduction(type, op, r)) return ncclInvalidArgument;
  cuda_emu::reach(stream);
  cuda_emu::expect_unchanged_until_reached(stream, "ncclReduce", send, bytes);
  // Only the root receives: elsewhere the receive buffer is not touched (an empty result).
  const cuda_emu::Result result = cuda_emu::result_buffer(c.rank == root ? bytes : 0);
  const int status = MPI_Reduce(send, c.rank == root ? result->data() : nullptr, static_cast<int>(count), r.type,
                                r.op, root, c.mpi);
  cuda_emu::deliver(stream, recv, result);
  return cuda_emu::checked(status);
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recvcount, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  cuda_emu::check_stream(stream);
  const cuda_emu::NcclComm& c = comm_of(comm);
  const std::size_t element = cuda_emu::element_bytes(type);
  const std::size_t slice = recvcount * element;
  cuda_emu::require_device_range(send, slice * static_cast<std::size_t>(c.size), "ncclReduceScatter send buffer");
  cuda_emu::require_device_range(recv, slice, "ncclReduceScatter receive buffer");
  cuda_emu::Reduction r{};
  if (!cuda_emu::reduction(type, op, r)) return ncclInvalidArgument;
  cuda_emu::reach(stream);
  cuda_emu::expect_unchanged_until_reached(stream, "ncclReduceScatter", send, slice * static_cast<std::size_t>(c.size));
  const cuda_emu::Result result = cuda_emu::result_buffer(slice);
  const int status = MPI_Reduce_scatter_block(send, result->data(), static_cast<int>(recvcount), r.type, r.op, c.mpi);
  cuda_emu::deliver(stream, recv, result);
  return cuda_emu::checked(status);
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t sendcount, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  cuda_emu::check_stream(stream);
  const cuda_emu::NcclComm& c = comm_of(comm);
  const std::size_t slice = sendcount * cuda_emu::element_bytes(type);
  cuda_emu::require_device_range(send, slice, "ncclAllGather send buffer");
  cuda_emu::require_device_range(recv, slice * static_cast<std::size_t>(c.size), "ncclAllGather receive buffer");
  cuda_emu::reach(stream);
  cuda_emu::expect_unchanged_until_reached(stream, "ncclAllGather", send, slice);
  const cuda_emu::Result result = cuda_emu::result_buffer(slice * static_cast<std::size_t>(c.size));
  const int status = MPI_Allgather(send, static_cast<int>(slice), MPI_BYTE, result->data(), static_cast<int>(slice),
                                   MPI_BYTE, c.mpi);
  cuda_emu::deliver(stream, recv, result);
  return cuda_emu::checked(status);
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  cuda_emu::check_stream(stream);
  const cuda_emu::NcclComm& c = comm_of(comm);
  const std::size_t bytes = count * cuda_emu::element_bytes(type);
  cuda_emu::require_device_range(recv, bytes, "ncclBroadcast receive buffer");
  if (c.rank == root) cuda_emu::require_device_range(send, bytes, "ncclBroadcast send buffer");
  cuda_emu::reach(stream);
  if (c.rank == root) cuda_emu::expect_unchanged_until_reached(stream, "ncclBroadcast", send, bytes);
  const cuda_emu::Result result = cuda_emu::result_buffer(bytes);
  if (c.rank == root && bytes > 0) std::memcpy(result->data(), send, bytes);
  const int status = MPI_Bcast(result->data(), static_cast<int>(bytes), MPI_BYTE, root, c.mpi);
  cuda_emu::deliver(stream, recv, result);
  return cuda_emu::checked(status);
}

ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  cuda_emu::check_stream(stream);
  const std::size_t bytes = count * cuda_emu::element_bytes(type);
  cuda_emu::require_device_range(send, bytes, "ncclSend buffer");
  cuda_emu::reach(stream);
  cuda_emu::expect_unchanged_until_reached(stream, "ncclSend", send, bytes);
  return cuda_emu::checked(MPI_Send(send, static_cast<int>(bytes), MPI_BYTE, peer, 0, comm_of(comm).mpi));
}

ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
  cuda_emu::check_stream(stream);
  const std::size_t bytes = count * cuda_emu::element_bytes(type);
  cuda_emu::require_device_range(recv, bytes, "ncclRecv buffer");
  cuda_emu::reach(stream);
  const cuda_emu::Result result = cuda_emu::result_buffer(bytes);
  const int status =
      MPI_Recv(result->data(), static_cast<int>(bytes), MPI_BYTE, peer, 0, comm_of(comm).mpi, MPI_STATUS_IGNORE);
  cuda_emu::deliver(stream, recv, result);
  return cuda_emu::checked(status);
}

}  // extern "C"
