// run.device resolution (src/app/device_choice.h): one GPU per rank, told apart by PCI bus id
// so that ranks bound to one GPU each (Slurm) pass and ranks crowding one GPU are refused under
// nccl; clear refusals for cuda, and auto falling back to the CPU with its reason.
#include "src/app/device_choice.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/user_error.h"

namespace trident::app {
namespace {

std::string bus_id(int gpu) { return "0000:" + std::to_string(10 + gpu) + ":00.0"; }

// A node whose `size` ranks all see its `gpus` GPUs (mpirun without binding).
NodeGpus all_visible(int gpus, int rank, int size) {
  NodeGpus node;
  node.visible = gpus;
  node.local_rank = rank;
  for (int r = 0; r < size; ++r) node.taken.push_back(gpus > 0 ? bus_id(gpu_for_rank(r, gpus)) : "");
  return node;
}

// A node whose ranks each see only the GPUs listed for them (one each under srun
// --gpus-per-task=1; "" for none); every rank takes the first it sees.
NodeGpus bound(int rank, const std::vector<std::string>& seen) {
  NodeGpus node;
  node.visible = seen[rank].empty() ? 0 : 1;
  node.local_rank = rank;
  node.taken = seen;
  return node;
}

DeviceChoice choose(const std::string& requested, bool compiled, int gpus, int rank, int size, bool share = false) {
  return choose_device(requested, compiled, all_visible(gpus, rank, size), share);
}

std::string refusal(const std::string& requested, bool compiled, const NodeGpus& node) {
  try {
    choose_device(requested, compiled, node);
  } catch (const io::UserError& e) {
    return e.what();
  }
  return "";
}

std::string refusal(const std::string& requested, bool compiled, int gpus, int rank, int size) {
  return refusal(requested, compiled, all_visible(gpus, rank, size));
}

TEST(DeviceChoice, CpuIsAlwaysCpu) {
  const DeviceChoice c = choose("cpu", true, 8, 3, 8);
  EXPECT_EQ(c.device, kernels::Device::kCpu);
  EXPECT_EQ(c.gpu, -1);
}

TEST(DeviceChoice, CudaTakesTheGpuOfTheNodeLocalRank) {
  const DeviceChoice c = choose("cuda", true, 4, 2, 4);
  EXPECT_EQ(c.device, kernels::Device::kCuda);
  EXPECT_EQ(c.gpu, 2);
  EXPECT_EQ(choose("auto", true, 8, 5, 6).gpu, 5);  // fewer ranks than GPUs is fine
}

TEST(DeviceChoice, CudaIsRefusedNamingWhatIsMissing) {
  EXPECT_NE(refusal("cuda", false, 0, 0, 1).find("no CUDA backend"), std::string::npos);
  // Every refusal names the way to go on without a GPU.
  EXPECT_NE(refusal("cuda", false, 0, 0, 1).find("; run.device = auto would train on the CPU instead"), std::string::npos);
  const std::string none = refusal("cuda", true, 0, 0, 2);
  EXPECT_NE(none.find("run.device = cuda: no CUDA device is visible on this node (2 rank(s) on this node, 0 GPU(s)"),
            std::string::npos)
      << none;
  const std::string crowded = refusal("cuda", true, 4, 5, 8);
  EXPECT_NE(crowded.find("parallel.comm = nccl uses one GPU per rank, but there are 8 rank(s) on this node, 4 GPU(s) "
                         "visible and node-local ranks 0 and 4 would both take GPU 0000:10:00.0; start at most 4 "
                         "rank(s) per node, bind one GPU to each rank (srun --gpus-per-task=1), or set "
                         "parallel.comm = mpi to share GPUs"),
            std::string::npos)
      << crowded;
  // Every rank of the node refuses, not only those that collide: the choice is the node's.
  EXPECT_NE(refusal("cuda", true, 4, 1, 8), "");
}

TEST(DeviceChoice, StagedMpiLetsRanksShareGpusRoundRobin) {
  const DeviceChoice shared = choose("cuda", true, 1, 1, 2, true);
  EXPECT_EQ(shared.device, kernels::Device::kCuda);
  EXPECT_EQ(shared.gpu, 0);
  EXPECT_EQ(shared.reason, "run.device = cuda: GPU 0 (0000:10:00.0), 2 rank(s) on this node share 1 GPU(s): "
                           "parallel.comm = mpi");
  EXPECT_EQ(choose("cuda", true, 2, 3, 4, true).gpu, 1);
  EXPECT_EQ(choose("auto", true, 2, 2, 4, true).device, kernels::Device::kCuda);
  // Enough GPUs: no sharing.
  EXPECT_EQ(choose("cuda", true, 4, 2, 4, true).reason, "run.device = cuda: GPU 2 (0000:12:00.0)");
  // Still refused without any GPU.
  EXPECT_NE(refusal("cuda", true, 0, 0, 2).find("no CUDA device"), std::string::npos);
}

TEST(DeviceChoice, AutoFallsBackToTheCpuAndSaysWhy) {
  const DeviceChoice none = choose("auto", true, 0, 0, 1);
  EXPECT_EQ(none.device, kernels::Device::kCpu);
  EXPECT_NE(none.reason.find("run.device = auto: cpu, because no CUDA device is visible"), std::string::npos)
      << none.reason;
  EXPECT_EQ(choose("auto", false, 8, 0, 1).device, kernels::Device::kCpu);
  EXPECT_EQ(choose("auto", true, 2, 0, 4).device, kernels::Device::kCpu);  // too many ranks
  EXPECT_EQ(choose("auto", true, 2, 1, 2).device, kernels::Device::kCuda);
}

// A driver that cannot serve this build (kernels::cuda_device_problem) is named, for cuda and auto.
TEST(DeviceChoice, NamesWhatTheDriverReportsWhenNoGpuIsUsable) {
  const std::string problem = "cudaErrorInsufficientDriver (CUDA driver version is insufficient for CUDA runtime version)";
  try {
    choose_device("cuda", true, all_visible(0, 0, 1), false, problem);
    ADD_FAILURE() << "cuda without a usable GPU was not refused";
  } catch (const io::UserError& e) {
    std::string expected = "no CUDA device is visible on this node (1 rank(s) on this node, 0 GPU(s) visible): ";
    expected += "the CUDA driver reports ";
    expected += problem;
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
  const DeviceChoice fallback = choose_device("auto", true, all_visible(0, 0, 1), false, problem);
  EXPECT_EQ(fallback.device, kernels::Device::kCpu);
  EXPECT_NE(fallback.reason.find(problem), std::string::npos) << fallback.reason;
  // No GPU and nothing wrong (a build machine): the message is as before.
  EXPECT_EQ(choose("auto", true, 0, 0, 1).reason.find("driver"), std::string::npos);
}

// A GPU whose libraries do not load here (kernels::cuda_library_problem: cuBLAS is opened at
// start-up of a CUDA run, not linked) is not taken: cuda is refused naming what is missing, auto
// runs on the CPU and says why.
TEST(DeviceChoice, GpuWhoseLibrariesDoNotLoadIsNotTaken) {
  NodeGpus node = all_visible(1, 0, 1);
  node.library_problem = "cuBLAS cannot be loaded: libcublasLt.so.13: cannot open shared object file";
  EXPECT_NE(refusal("cuda", true, node).find("run.device = cuda: " + node.library_problem), std::string::npos)
      << refusal("cuda", true, node);
  const DeviceChoice fallback = choose_device("auto", true, node);
  EXPECT_EQ(fallback.device, kernels::Device::kCpu);
  EXPECT_EQ(fallback.reason, "run.device = auto: cpu, because " + node.library_problem);
  node.library_problem.clear();
  EXPECT_EQ(choose_device("auto", true, node).device, kernels::Device::kCuda);
}

// Slurm's --gpus-per-task=1 (or CUDA_VISIBLE_DEVICES set per rank) shows each rank one GPU,
// which it sees as GPU 0. Distinct bus ids make that one GPU per rank, as nccl needs.
TEST(DeviceChoice, RanksBoundToOneGpuEachAreOneGpuPerRank) {
  const std::vector<std::string> four = {bus_id(0), bus_id(1), bus_id(2), bus_id(3)};
  for (int rank = 0; rank < 4; ++rank) {
    const DeviceChoice c = choose_device("cuda", true, bound(rank, four));
    EXPECT_EQ(c.device, kernels::Device::kCuda);
    EXPECT_EQ(c.gpu, 0);
    EXPECT_EQ(c.reason, "run.device = cuda: GPU 0 (" + bus_id(rank) + ")");
  }
  EXPECT_EQ(choose_device("auto", true, bound(3, four)).device, kernels::Device::kCuda);
}

// The same GPU bound to two ranks (CUDA_VISIBLE_DEVICES=0 exported to every task) is one GPU
// shared, whatever each rank's count says: refused under nccl, named, allowed under mpi.
TEST(DeviceChoice, RanksBoundToTheSameGpuAreRefusedUnderNccl) {
  const std::vector<std::string> same = {bus_id(0), bus_id(1), bus_id(0)};
  const std::string crowded = refusal("cuda", true, bound(1, same));
  EXPECT_NE(crowded.find("there are 3 rank(s) on this node, 1 GPU(s) visible and node-local ranks 0 and 2 would both "
                         "take GPU 0000:10:00.0; start at most 2 rank(s) per node"),
            std::string::npos)
      << crowded;
  EXPECT_EQ(choose_device("auto", true, bound(2, same)).device, kernels::Device::kCpu);
  const DeviceChoice shared = choose_device("cuda", true, bound(2, same), true);
  EXPECT_EQ(shared.device, kernels::Device::kCuda);
  EXPECT_NE(shared.reason.find("3 rank(s) on this node share 2 GPU(s)"), std::string::npos) << shared.reason;
}

// A rank left without a GPU while its neighbours have one is a binding mistake, not a CPU node.
TEST(DeviceChoice, ARankWithoutAGpuOnANodeWithGpusNamesTheBinding) {
  const std::vector<std::string> gap = {bus_id(0), "", bus_id(1)};
  const std::string refused = refusal("cuda", true, bound(1, gap));
  EXPECT_NE(refused.find("no CUDA device is visible to node-local rank 1"), std::string::npos) << refused;
  EXPECT_NE(refused.find("check CUDA_VISIBLE_DEVICES or the job's GPU binding"), std::string::npos) << refused;
  EXPECT_EQ(choose_device("auto", true, bound(1, gap)).device, kernels::Device::kCpu);
  // The ranks that have a GPU accept it; the start-up agreement then moves every rank to the CPU.
  EXPECT_EQ(choose_device("auto", true, bound(0, gap)).device, kernels::Device::kCuda);
}

TEST(DeviceChoice, UnknownDeviceNamesTheChoices) {
  EXPECT_NE(refusal("gpu", true, 1, 0, 1).find("run.device = 'gpu' is not one of: cpu, cuda, auto"),
            std::string::npos);
}

}  // namespace
}  // namespace trident::app
