// Which device a rank trains on (run.device, docs/running.md).
//
//   cpu   the CPU backend;
//   cuda  one GPU per rank: a rank takes visible GPU (node-local rank mod GPUs it sees). With
//         every GPU of the node visible to every rank, rank r takes GPU r; with one GPU bound to
//         each rank (Slurm's --gpus-per-task=1, or CUDA_VISIBLE_DEVICES per rank) each takes the
//         one it sees. Refused, naming the counts, when the build has no CUDA backend, when the
//         rank sees no GPU, or when two ranks of a node would take one physical GPU (told apart
//         by PCI bus id) under parallel.comm = nccl;
//   auto  cuda when it would be accepted, else cpu (the reason is printed, so a CPU run on a GPU
//         machine is never a surprise).
//
// With parallel.comm = mpi (device buffers staged through host memory) ranks may share GPUs.
// That is for testing layouts on one GPU; NCCL refuses two ranks on one GPU, so
// parallel.comm = nccl keeps one GPU per rank.
#pragma once

#include <string>
#include <vector>

#include "kernels/backend.h"

namespace trident::app {

struct DeviceChoice {
  kernels::Device device = kernels::Device::kCpu;
  int gpu = -1;        // the index among the rank's visible CUDA devices with cuda
  std::string reason;  // one line for the start-up report
};

// What the ranks of one node see, gathered at start-up (src/app/train_command.cpp).
struct NodeGpus {
  int visible = 0;     // CUDA devices visible to this rank
  int local_rank = 0;  // this rank's index among the node's ranks
  // For each rank of the node, in node-local order, the identity of the GPU it would take
  // (gpu_for_rank; its PCI bus id): "" where the rank sees no GPU.
  std::vector<std::string> taken;
  // Why this rank cannot load the CUDA libraries (kernels::cuda_library_problem), asked only
  // where it sees a GPU: "" when they load, or when it sees none.
  std::string library_problem;
};

// The visible-device index a rank takes: node_local_rank mod visible (-1 when it sees none).
int gpu_for_rank(int node_local_rank, int visible);

// Pure. Throws io::UserError for a refused `cuda`; `auto` gives the CPU with the same reason.
// ranks_may_share_gpus: parallel.comm = mpi. cuda_problem: kernels::cuda_device_problem(), added
// to the reason when no GPU is visible (a driver too old for this build, say).
DeviceChoice choose_device(const std::string& requested, bool cuda_compiled, const NodeGpus& node,
                           bool ranks_may_share_gpus = false, const std::string& cuda_problem = "");

}  // namespace trident::app
