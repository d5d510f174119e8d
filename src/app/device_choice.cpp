#include "src/app/device_choice.h"

#include "io/user_error.h"

namespace trident::app {

DeviceChoice choose_device(const std::string& requested, bool cuda_compiled, int gpus_on_node, int node_local_rank,
                           int node_local_size, bool ranks_may_share_gpus, const std::string& cuda_problem) {
  const std::string counts = std::to_string(node_local_size) + " rank(s) on this node, " +
                             std::to_string(gpus_on_node) + " GPU(s) visible";
  if (requested == "cpu") return {kernels::Device::kCpu, -1, "run.device = cpu"};
  std::string unavailable;
  if (!cuda_compiled) {
    unavailable = "this build has no CUDA backend (configure with -DTRIDENT_CUDA=ON)";
  } else if (gpus_on_node == 0) {
    unavailable = "no CUDA device is visible on this node (" + counts + ")";
    if (!cuda_problem.empty()) unavailable += ": the CUDA driver reports " + cuda_problem;
  } else if (node_local_size > gpus_on_node && !ranks_may_share_gpus) {
    unavailable = "parallel.comm = nccl uses one GPU per rank, but there are " + counts + "; start at most " +
                  std::to_string(gpus_on_node) + " rank(s) per node (or set parallel.comm = mpi to share GPUs)";
  }
  const int gpu = gpus_on_node > 0 ? node_local_rank % gpus_on_node : -1;
  std::string which = "GPU " + std::to_string(gpu);
  if (node_local_size > gpus_on_node) {
    which += " (" + counts + ": ranks share GPUs, parallel.comm = mpi)";
  }
  if (requested == "cuda") {
    if (!unavailable.empty()) throw io::UserError("run.device = cuda: " + unavailable);
    return {kernels::Device::kCuda, gpu, "run.device = cuda: " + which};
  }
  if (requested != "auto") throw io::UserError("run.device = '" + requested + "' is not one of: cpu, cuda, auto");
  if (!unavailable.empty()) return {kernels::Device::kCpu, -1, "run.device = auto: cpu, because " + unavailable};
  return {kernels::Device::kCuda, gpu, "run.device = auto: cuda, " + which};
}

}  // namespace trident::app
