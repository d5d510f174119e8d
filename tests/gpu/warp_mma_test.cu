// The PTX tensor-core instructions of kernels/cuda/warp_mma.cuh on the GPU: one warp's products
// through flash attention's loading recipes (tests/support/warp_products.h) on small integers,
// compared exactly with plain products. The CUDA emulation runs the same body on its host model
// of the instructions (tests/emulation/emulation_test.cpp); this is where the two meet the
// hardware. If the flash attention twins fail by O(1) on a GPU, this test says whether the
// instructions' layouts were read wrongly (and in which product: A M^T without .trans, A N with
// it, on bf16 or fp16), or the kernels use them wrongly. Built only with real CUDA
// (TRIDENT_CUDA); needs sm_80 or later.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/stored_element.h"  // stored::Bf16, stored::Fp16
#include "tests/support/warp_products.h"

namespace trident::kernels::gpu_test {
namespace {

template <class S>
__global__ void warp_products_kernel(const uint16_t* operands, float* c) {
  __shared__ alignas(16) uint16_t shared[test_support::kWarpProductElements];
  test_support::warp_products<S>(shared, operands, c, static_cast<int>(threadIdx.x));
}

template <class S>
std::vector<float> run_warp_products() {
  return test_support::warp_products_on_device<S>(
      [](const uint16_t* operands, float* c) { warp_products_kernel<S><<<1, 32>>>(operands, c); });
}

TEST(WarpMatrixProducts, ThePtxComputesTheProductsTheLayoutsName) {
  int device = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  if (major < 8) GTEST_SKIP() << "mma.sync m16n8k16 and ldmatrix need sm_80 or later";
  using test_support::warp_product_mismatches;
  for (const auto& line : warp_product_mismatches(run_warp_products<stored::Bf16>())) ADD_FAILURE() << "bf16: " << line;
  for (const auto& line : warp_product_mismatches(run_warp_products<stored::Fp16>())) ADD_FAILURE() << "fp16: " << line;
}

}  // namespace
}  // namespace trident::kernels::gpu_test
