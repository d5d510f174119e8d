// Which device a rank trains on (run.device, docs/running.md).
//
//   cpu   the CPU backend;
//   cuda  one GPU per rank: node-local rank r takes GPU r of its node. Refused, naming the
//         node's counts, when the build has no CUDA backend, when the node has no GPU, or when
//         it starts more ranks than it has GPUs;
//   auto  cuda when the build has it and the node has a GPU for every rank on it, else cpu
//         (the reason is printed, so a CPU run on a GPU machine is never a surprise).
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
DeviceChoice choose_device(const std::string& requested, bool cuda_compiled, int gpus_on_node, int node_local_rank,
                           int node_local_size);

}  // namespace trident::app
