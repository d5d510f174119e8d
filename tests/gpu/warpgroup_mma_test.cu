// The wgmma instructions of kernels/cuda/warpgroup_mma.cuh on the GPU: one warpgroup's products in
// the three forms a flash attention on them needs (tests/support/warpgroup_products.h), on small
// integers, compared exactly with plain products. The CUDA emulation runs the same body on its
// host model (tests/emulation/emulation_test.cpp); this is where the two meet the hardware, before
// any kernel depends on the layouts: a failure names the form (A and B in shared memory, K-major;
// A in registers with B MN-major; A MN-major) whose descriptor or swizzle was read wrongly.
// Built only with real CUDA (TRIDENT_CUDA), for sm_90a (trident_use_hopper_features); runs on a
// compute capability 9.0 GPU (H100, H200) and skips elsewhere.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/stored_element.h"  // stored::Bf16, stored::Fp16
#include "tests/support/warpgroup_products.h"

namespace trident::kernels::gpu_test {
namespace {

template <class S>
__global__ void warpgroup_products_kernel(const uint16_t* operands, float* c) {
  __shared__ alignas(16) uint16_t shared[test_support::kWarpgroupSharedElements];
  test_support::warpgroup_products<S>(shared, operands, c, static_cast<int>(threadIdx.x));
}

template <class S>
std::vector<float> run_warpgroup_products() {
  return test_support::warpgroup_products_on_device<S>([](const uint16_t* operands, float* c) {
    warpgroup_products_kernel<S><<<1, test_support::kWarpgroupProductThreads>>>(operands, c);
  });
}

TEST(WarpgroupMatrixProducts, ThePtxComputesTheProductsTheLayoutsName) {
  int device = 0, major = 0, minor = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), cudaSuccess);
  if (major != 9 || minor != 0) GTEST_SKIP() << "wgmma (sm_90a) runs on compute capability 9.0 only";
  using test_support::warpgroup_product_mismatches;
  for (const auto* name : {"bf16", "fp16"}) {
    const std::vector<float> got = std::string(name) == "bf16" ? run_warpgroup_products<stored::Bf16>()
                                                               : run_warpgroup_products<stored::Fp16>();
    ASSERT_EQ(got.back(), 1.0f) << "the test kernel was built without sm_90a (CMAKE_CUDA_ARCHITECTURES "
                                   "has no 90, or trident_use_hopper_features was not applied)";
    for (const auto& line : warpgroup_product_mismatches(got)) ADD_FAILURE() << name << ": " << line;
  }
}

}  // namespace
}  // namespace trident::kernels::gpu_test
