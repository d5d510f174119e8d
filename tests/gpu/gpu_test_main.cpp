// GoogleTest main for the GPU tests (label gpu). Without a visible CUDA device it prints why and
// exits with 77, which CTest reports as "Skipped" (SKIP_RETURN_CODE in tests/CMakeLists.txt):
// a machine without a GPU has not passed these tests, it has not run them. The check comes
// before any test runs, so no test half-starts a backend it cannot have. MPI is not needed:
// the tests use only kernels::Backend.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "kernels/cuda_devices.h"  // cuda_device_count, cuda_device_problem

namespace {
constexpr int kSkipExitCode = 77;  // the automake/CTest convention for "skipped"
}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Listing needs no device: --gtest_list_tests shows what a GPU machine would run.
  if (GTEST_FLAG_GET(list_tests)) return RUN_ALL_TESTS();
  if (trident::kernels::cuda_device_count() == 0) {
    // A driver that cannot serve this build (too old, a broken install) is a failure here, not
    // a skip: on a GPU machine "skipped" would hide that nothing was tested.
    const std::string problem = trident::kernels::cuda_device_problem();
    if (!problem.empty()) {
      std::printf("FAILED: a CUDA driver is installed but no device can be used: %s\n", problem.c_str());
      return 1;
    }
    std::printf("SKIPPED: no CUDA device visible\n");
    return kSkipExitCode;
  }
  return RUN_ALL_TESTS();
}
