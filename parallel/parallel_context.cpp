#include "parallel/parallel_context.h"

#include <stdexcept>

#include "mpi_support/mpi_check.h"
#include "parallel/counting_comm.h"
#include "parallel/mpi_comm.h"
#ifdef TRIDENT_HAVE_NCCL
#include "parallel/nccl/nccl_comm.h"
#endif

namespace trident::parallel {

namespace {

std::unique_ptr<Comm> split(MPI_Comm world, const RankGrid& grid, GroupKind kind, int rank) {
  MPI_Comm comm;
  // key = world rank keeps group ranks in world order, as the layout table shows them.
  TRIDENT_MPI_CHECK(MPI_Comm_split(world, grid.group_color(kind, rank), rank, &comm));
  return std::make_unique<CountingComm>(std::make_unique<MpiComm>(comm, group_name(kind)));
}

}  // namespace

ParallelContext::ParallelContext(MPI_Comm world, int tp, int dp, int pp) : grid_(tp, dp, pp) {
  TRIDENT_MPI_CHECK(MPI_Comm_rank(world, &world_rank_));
  MPI_Comm world_copy;
  TRIDENT_MPI_CHECK(MPI_Comm_dup(world, &world_copy));
  world_ = std::make_unique<MpiComm>(world_copy, "world");
  world_handle_ = world_copy;
  tensor_ = split(world, grid_, GroupKind::kTensor, world_rank_);
  data_ = split(world, grid_, GroupKind::kData, world_rank_);
  pipeline_ = split(world, grid_, GroupKind::kPipeline, world_rank_);
  model_ = split(world, grid_, GroupKind::kModel, world_rank_);

  const GridCoord c = grid_.coord(world_rank_);
  const bool holds_embedding = c.pp_rank == 0 || c.pp_rank == pp - 1;
  MPI_Comm embedding;
  TRIDENT_MPI_CHECK(MPI_Comm_split(world, holds_embedding ? grid_.group_color(GroupKind::kPipeline, world_rank_)
                                                          : MPI_UNDEFINED,
                                   world_rank_, &embedding));
  if (holds_embedding) {
    embedding_ = std::make_unique<CountingComm>(std::make_unique<MpiComm>(embedding, "embedding"));
  }

  MPI_Comm node;
  TRIDENT_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, world_rank_, MPI_INFO_NULL, &node));
  node_ = std::make_unique<MpiComm>(node, "node");
  node_local_rank_ = node_->rank();
  node_local_size_ = node_->size();
}

std::vector<ParallelContext::GroupStats> ParallelContext::comm_stats() const {
  std::vector<GroupStats> out;
  auto add = [&out](const char* group, const Comm* comm) {
    if (const auto* counting = dynamic_cast<const CountingComm*>(comm)) {
      out.push_back({group, comm->size(), counting->stats()});
    }
  };
  add("tensor", tensor_.get());
  add("data", data_.get());
  add("pipeline", pipeline_.get());
  add("embedding", embedding_.get());
  add("model", model_.get());
  return out;
}

void ParallelContext::stage_device_buffers(DeviceMemory& memory) {
  const auto stage = [&memory](std::unique_ptr<Comm> inner) -> std::unique_ptr<Comm> {
    return std::make_unique<HostStagedComm>(std::move(inner), memory);
  };
  for (Comm* comm : {tensor_.get(), data_.get(), pipeline_.get(), embedding_.get(), model_.get()}) {
    if (auto* counting = dynamic_cast<CountingComm*>(comm)) counting->wrap_inner(stage);
  }
  world_ = stage(std::move(world_));
}

void ParallelContext::use_nccl(DeviceMemory& memory, void* compute_stream) {
#ifdef TRIDENT_HAVE_NCCL
  const auto nccl = [&memory, compute_stream](std::unique_ptr<Comm> inner) -> std::unique_ptr<Comm> {
    auto* mpi = dynamic_cast<MpiComm*>(inner.get());
    if (mpi == nullptr) throw std::logic_error("ParallelContext::use_nccl: a group is not an MPI communicator");
    const MPI_Comm handle = mpi->handle();
    return std::make_unique<NcclComm>(std::move(inner), handle, compute_stream, memory);
  };
  // Every rank creates its groups' NCCL communicators in the same order (each creation is
  // collective over its group): tensor, data, pipeline, model, then embedding on the ranks that
  // have it. The world stays MPI: it carries host flags only.
  for (Comm* comm : {tensor_.get(), data_.get(), pipeline_.get(), model_.get(), embedding_.get()}) {
    if (auto* counting = dynamic_cast<CountingComm*>(comm)) counting->wrap_inner(nccl);
  }
  world_ = std::make_unique<HostStagedComm>(std::move(world_), memory);  // should a device buffer come by
#else
  (void)memory;
  (void)compute_stream;
  throw std::runtime_error(
      "parallel.comm = nccl: this build has no NCCL (configure with CUDA and NCCL, NCCL_ROOT pointing at it), "
      "or set parallel.comm = mpi");
#endif
}

}  // namespace trident::parallel
