// Which device a rank trains on (run.device, docs/running.md).
//
//   cpu   the CPU backend;
//   cuda  one GPU per rank: node-local rank r takes GPU r of its node. Refused, naming the
//         node's counts, when the build has no CUDA backend, when the node has no GPU, or when
//         it starts more ranks than it has GPUs;
//   auto  cuda when the build has it and the node has a GPU for every rank on it, else cpu
//         (the reason is printed, so a CPU run on a GPU machine is never a surprise).
//
// With parallel.comm = mpi (device buffers staged through host memory) ranks may share GPUs:
// node-local rank r takes GPU r mod (GPUs on the node). That is for testing layouts on one GPU;
// NCCL refuses two ranks on one GPU, so parallel.comm = nccl keeps one GPU per rank.
#pragma once

#include <string>

#include "kernels/backend.h"

namespace trident::app {

struct DeviceChoice {
  kernels::Device device = kernels::Device::kCpu;
  int gpu = -1;        // the node-local GPU index with cuda
  std::string reason;  // one line for the start-up report
};

// Pure: the same inputs give the same choice on every rank of a node. Throws io::UserError for
// a refused `cuda`.
// ranks_may_share_gpus: parallel.comm = mpi. cuda_problem: kernels::cuda_device_problem(), added
// to the reason when no GPU is visible (a driver too old for this build, say).
DeviceChoice choose_device(const std::string& requested, bool cuda_compiled, int gpus_on_node, int node_local_rank,
                           int node_local_size, bool ranks_may_share_gpus = false,
                           const std::string& cuda_problem = "");

}  // namespace trident::app
