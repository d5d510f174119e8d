#include "parallel/parallel_context.h"

#include "parallel/mpi_comm.h"

namespace trident::parallel {

namespace {

std::unique_ptr<Comm> split(MPI_Comm world, const RankGrid& grid, GroupKind kind, int rank) {
  MPI_Comm comm;
  // key = world rank keeps group ranks in world order, as the layout table shows them.
  TRIDENT_MPI_CHECK(MPI_Comm_split(world, grid.group_color(kind, rank), rank, &comm));
  return std::make_unique<MpiComm>(comm, group_name(kind));
}

}  // namespace

ParallelContext::ParallelContext(MPI_Comm world, int tp, int dp, int pp) : grid_(tp, dp, pp) {
  TRIDENT_MPI_CHECK(MPI_Comm_rank(world, &world_rank_));
  MPI_Comm world_copy;
  TRIDENT_MPI_CHECK(MPI_Comm_dup(world, &world_copy));
  world_ = std::make_unique<MpiComm>(world_copy, "world");
  tensor_ = split(world, grid_, GroupKind::kTensor, world_rank_);
  data_ = split(world, grid_, GroupKind::kData, world_rank_);
  pipeline_ = split(world, grid_, GroupKind::kPipeline, world_rank_);
  model_ = split(world, grid_, GroupKind::kModel, world_rank_);

  MPI_Comm node;
  TRIDENT_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, world_rank_, MPI_INFO_NULL, &node));
  TRIDENT_MPI_CHECK(MPI_Comm_rank(node, &node_local_rank_));
  TRIDENT_MPI_CHECK(MPI_Comm_size(node, &node_local_size_));
  TRIDENT_MPI_CHECK(MPI_Comm_free(&node));
}

}  // namespace trident::parallel
