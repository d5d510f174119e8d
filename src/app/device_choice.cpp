#include "src/app/device_choice.h"

#include <set>
#include <stdexcept>
#include <utility>

#include "io/user_error.h"

namespace trident::app {

namespace {

// The first two node-local ranks that would take one physical GPU, or {-1, -1}.
std::pair<int, int> first_shared_gpu(const std::vector<std::string>& taken) {
  for (std::size_t j = 1; j < taken.size(); ++j) {
    if (taken[j].empty()) continue;
    for (std::size_t i = 0; i < j; ++i) {
      if (taken[i] == taken[j]) return {static_cast<int>(i), static_cast<int>(j)};
    }
  }
  return {-1, -1};
}

}  // namespace

int gpu_for_rank(int node_local_rank, int visible) { return visible > 0 ? node_local_rank % visible : -1; }

DeviceChoice choose_device(const std::string& requested, bool cuda_compiled, const NodeGpus& node,
                           bool ranks_may_share_gpus, const std::string& cuda_problem) {
  if (requested == "cpu") return {kernels::Device::kCpu, -1, "run.device = cpu"};
  if (requested != "cuda" && requested != "auto") {
    throw io::UserError("run.device = '" + requested + "' is not one of: cpu, cuda, auto");
  }
  const int ranks = static_cast<int>(node.taken.size());
  if (node.local_rank < 0 || node.local_rank >= ranks) {
    throw std::logic_error("choose_device: local rank " + std::to_string(node.local_rank) + " outside the node's " +
                           std::to_string(ranks) + " rank(s)");
  }
  std::set<std::string> distinct;
  for (const std::string& id : node.taken) {
    if (!id.empty()) distinct.insert(id);
  }
  const std::string counts = std::to_string(ranks) + " rank(s) on this node, " + std::to_string(node.visible) +
                             " GPU(s) visible";
  const auto [first, second] = first_shared_gpu(node.taken);
  std::string unavailable;
  if (!cuda_compiled) {
    unavailable = "this build has no CUDA backend (configure with -DTRIDENT_CUDA=ON)";
  } else if (node.visible == 0 && distinct.empty()) {
    unavailable = "no CUDA device is visible on this node (" + counts + ")";
    if (!cuda_problem.empty()) unavailable += ": the CUDA driver reports " + cuda_problem;
  } else if (node.visible == 0) {
    unavailable = "no CUDA device is visible to node-local rank " + std::to_string(node.local_rank) + " (" +
                  counts + " to it, other ranks of the node see some): check CUDA_VISIBLE_DEVICES or the job's "
                  "GPU binding";
  } else if (!node.library_problem.empty()) {
    unavailable = node.library_problem;
  } else if (first >= 0 && !ranks_may_share_gpus) {
    unavailable = "parallel.comm = nccl uses one GPU per rank, but there are " + counts + " and node-local ranks " +
                  std::to_string(first) + " and " + std::to_string(second) + " would both take GPU " +
                  node.taken[first] + "; start at most " + std::to_string(distinct.size()) +
                  " rank(s) per node, bind one GPU to each rank (srun --gpus-per-task=1), or set parallel.comm = "
                  "mpi to share GPUs";
  }
  if (!unavailable.empty()) {
    if (requested == "cuda") {
      throw io::UserError("run.device = cuda: " + unavailable +
                          "; run.device = auto would train on the CPU instead, with a note saying why");
    }
    return {kernels::Device::kCpu, -1, "run.device = auto: cpu, because " + unavailable};
  }
  const int gpu = gpu_for_rank(node.local_rank, node.visible);
  std::string which = "GPU " + std::to_string(gpu);
  const std::string& id = node.taken[node.local_rank];
  if (!id.empty()) which += " (" + id + ")";
  if (first >= 0) {
    which += ", " + std::to_string(ranks) + " rank(s) on this node share " + std::to_string(distinct.size()) +
             " GPU(s): parallel.comm = mpi";
  }
  return {kernels::Device::kCuda, gpu, "run.device = " + requested + ": " + (requested == "auto" ? "cuda, " : "") +
                                           which};
}

}  // namespace trident::app
