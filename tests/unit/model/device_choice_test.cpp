// run.device resolution (src/app/device_choice.h): one GPU per rank by node-local rank, clear
// refusals for cuda, and auto falling back to the CPU with its reason.
#include "src/app/device_choice.h"

#include <gtest/gtest.h>

#include <string>

#include "io/user_error.h"

namespace trident::app {
namespace {

std::string refusal(const std::string& requested, bool compiled, int gpus, int rank, int size) {
  try {
    choose_device(requested, compiled, gpus, rank, size);
  } catch (const io::UserError& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceChoice, CpuIsAlwaysCpu) {
  const DeviceChoice c = choose_device("cpu", true, 8, 3, 8);
  EXPECT_EQ(c.device, kernels::Device::kCpu);
  EXPECT_EQ(c.gpu, -1);
}

TEST(DeviceChoice, CudaTakesTheGpuOfTheNodeLocalRank) {
  const DeviceChoice c = choose_device("cuda", true, 4, 2, 4);
  EXPECT_EQ(c.device, kernels::Device::kCuda);
  EXPECT_EQ(c.gpu, 2);
  EXPECT_EQ(choose_device("auto", true, 8, 5, 6).gpu, 5);  // fewer ranks than GPUs is fine
}

TEST(DeviceChoice, CudaIsRefusedNamingWhatIsMissing) {
  EXPECT_NE(refusal("cuda", false, 0, 0, 1).find("no CUDA backend"), std::string::npos);
  const std::string none = refusal("cuda", true, 0, 0, 2);
  EXPECT_NE(none.find("run.device = cuda: no CUDA device is visible on this node (2 rank(s) on this node, 0 GPU(s)"),
            std::string::npos)
      << none;
  const std::string crowded = refusal("cuda", true, 4, 5, 8);
  EXPECT_NE(crowded.find("parallel.comm = nccl uses one GPU per rank, but there are 8 rank(s) on this node, 4 GPU(s) "
                         "visible; start at most 4 rank(s) per node (or set parallel.comm = mpi to share GPUs)"),
            std::string::npos)
      << crowded;
}

TEST(DeviceChoice, StagedMpiLetsRanksShareGpusRoundRobin) {
  const DeviceChoice shared = choose_device("cuda", true, 1, 1, 2, true);
  EXPECT_EQ(shared.device, kernels::Device::kCuda);
  EXPECT_EQ(shared.gpu, 0);
  EXPECT_NE(shared.reason.find("GPU 0 (2 rank(s) on this node, 1 GPU(s) visible: ranks share GPUs"), std::string::npos)
      << shared.reason;
  EXPECT_EQ(choose_device("cuda", true, 2, 3, 4, true).gpu, 1);
  EXPECT_EQ(choose_device("auto", true, 2, 2, 4, true).device, kernels::Device::kCuda);
  EXPECT_EQ(choose_device("cuda", true, 4, 2, 4, true).reason, "run.device = cuda: GPU 2");  // enough GPUs: no sharing
  // Still refused without any GPU.
  EXPECT_NE(refusal("cuda", true, 0, 0, 2).find("no CUDA device"), std::string::npos);
}

TEST(DeviceChoice, AutoFallsBackToTheCpuAndSaysWhy) {
  const DeviceChoice none = choose_device("auto", true, 0, 0, 1);
  EXPECT_EQ(none.device, kernels::Device::kCpu);
  EXPECT_NE(none.reason.find("run.device = auto: cpu, because no CUDA device is visible"), std::string::npos)
      << none.reason;
  EXPECT_EQ(choose_device("auto", false, 8, 0, 1).device, kernels::Device::kCpu);
  EXPECT_EQ(choose_device("auto", true, 2, 0, 4).device, kernels::Device::kCpu);  // too many ranks
  EXPECT_EQ(choose_device("auto", true, 2, 1, 2).device, kernels::Device::kCuda);
}

// A driver that cannot serve this build (kernels::cuda_device_problem) is named, for cuda and auto.
TEST(DeviceChoice, NamesWhatTheDriverReportsWhenNoGpuIsUsable) {
  const std::string problem = "cudaErrorInsufficientDriver (CUDA driver version is insufficient for CUDA runtime version)";
  try {
    choose_device("cuda", true, 0, 0, 1, false, problem);
    ADD_FAILURE() << "cuda without a usable GPU was not refused";
  } catch (const io::UserError& e) {
    std::string expected = "no CUDA device is visible on this node (1 rank(s) on this node, 0 GPU(s) visible): ";
    expected += "the CUDA driver reports ";
    expected += problem;
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
  const DeviceChoice fallback = choose_device("auto", true, 0, 0, 1, false, problem);
  EXPECT_EQ(fallback.device, kernels::Device::kCpu);
  EXPECT_NE(fallback.reason.find(problem), std::string::npos) << fallback.reason;
  // No GPU and nothing wrong (a build machine): the message is as before.
  EXPECT_EQ(choose_device("auto", true, 0, 0, 1).reason.find("driver"), std::string::npos);
}

}  // namespace
}  // namespace trident::app
