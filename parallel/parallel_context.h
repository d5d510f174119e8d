// ParallelContext: this rank's place on the grid and one communicator per group kind.
// Built once at start-up and passed explicitly to whoever communicates (no global state).
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "parallel/comm.h"
#include "parallel/counting_comm.h"
#include "parallel/host_staged_comm.h"
#include "parallel/rank_grid.h"

namespace trident::parallel {

class ParallelContext {
 public:
  // Collective over `world`. Requires size(world) == tp * dp * pp (callers check this first
  // and report a user error otherwise). One MPI_Comm_split per group kind.
  ParallelContext(MPI_Comm world, int tp, int dp, int pp);

  // Makes every group stage device buffers through host memory (parallel/host_staged_comm.h):
  // for a backend whose buffers the host cannot read, with MPI as the transport. `memory` must
  // outlive the context's use.
  void stage_device_buffers(DeviceMemory& memory);
  // Gives every group (tensor, data, pipeline, model, embedding) an NCCL communicator on
  // device memory, ordered after the backend's stream `compute_stream`
  // (parallel/nccl/nccl_comm.h); host buffers still go through MPI. Collective over the world.
  // Throws std::runtime_error when the build has no NCCL. `memory` and the stream's backend must
  // outlive the context: the NCCL communicators release their wire buffer through `memory` when
  // the context is destroyed.
  void use_nccl(DeviceMemory& memory, void* compute_stream);

  const RankGrid& grid() const { return grid_; }
  int world_rank() const { return world_rank_; }
  GridCoord coord() const { return grid_.coord(world_rank_); }
  // Ranks sharing this node (MPI_COMM_TYPE_SHARED), and this rank's index among them.
  int node_local_rank() const { return node_local_rank_; }
  int node_local_size() const { return node_local_size_; }
  // Those ranks as a group, always MPI on host memory: for start-up facts such as which GPU
  // each rank takes (src/app/device_choice.h), never staged or moved to NCCL.
  Comm& node() { return *node_; }

  Comm& world() { return *world_; }
  // The MPI handle of world(), for libraries that take one (parallel HDF5).
  MPI_Comm world_handle() const { return world_handle_; }
  Comm& tensor() { return *tensor_; }     // same stage, same data rank
  Comm& data() { return *data_; }         // same stage, same tensor rank: gradient averaging
  Comm& pipeline() { return *pipeline_; } // same data and tensor rank: activations between stages
  Comm& model() { return *model_; }       // tp x pp: one model replica (gradient norm)
  // The first and the last stage of this rank's pipeline (same data and tensor rank): they
  // both hold the tied token embedding and sum its gradient. Null on the stages in between;
  // a group of one when pp = 1.
  Comm* embedding() { return embedding_.get(); }
  // Payload bytes and seconds spent in each group's calls since the groups were made (world
  // excluded; the trainer takes differences between two calls), with the group's size: a group
  // of one rank (pp = 1's pipeline) exchanges nothing.
  struct GroupStats {
    const char* group;
    int ranks;
    CommStats stats;
  };
  std::vector<GroupStats> comm_stats() const;

 private:
  RankGrid grid_;
  int world_rank_ = 0;
  MPI_Comm world_handle_ = MPI_COMM_NULL;
  int node_local_rank_ = 0;
  int node_local_size_ = 1;
  std::unique_ptr<Comm> world_, tensor_, data_, pipeline_, model_, embedding_, node_;
};

}  // namespace trident::parallel
