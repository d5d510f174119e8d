// One warp's tensor-core products through the loading recipes of
// kernels/cuda/flash_mma_tiles.cuh, on small integers (exact in 16 bits, and their products
// and sums exact in fp32), so that the lanes' accumulators can be compared exactly with plain
// products. A M^T takes B = M^T from a row-major M by ldmatrix without .trans (Q K^T's recipe);
// A N takes B = N by ldmatrix.trans (P V's recipe). Run on the GPU (tests/gpu/warp_mma_test.cu:
// the PTX against the layouts of kernels/cuda/warp_mma.cuh) and on the CUDA emulation
// (tests/emulation/emulation_test.cpp: the host model against the same layouts).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/warp_mma.cuh"

namespace trident::test_support {

// The operands, one buffer: A (16 x 16) at 0, M (8 x 16) at 256, N (16 x 8) at 384, row-major.
constexpr int kWarpProductElements = 512;
// The accumulators: lane l's 4 of A M^T at 4 l, of A N at 128 + 4 l.
constexpr int kWarpProductOutputs = 256;

inline float warp_product_operand(int i) {
  if (i < 256) return static_cast<float>((i * 7) % 9 - 4);
  if (i < 384) return static_cast<float>(((i - 256) * 5) % 7 - 3);
  return static_cast<float>(((i - 384) * 3) % 11 - 5);
}

// The exact accumulator `element` (0-3) of `lane` in product 0 (A M^T) or 1 (A N): row
// lane / 4 (+ 8 for elements 2 and 3), column 2 (lane % 4) (+ 1 for odd elements).
inline float expected_warp_product(int product, int lane, int element) {
  const int row = lane / 4 + 8 * (element / 2);
  const int col = 2 * (lane % 4) + element % 2;
  double sum = 0.0;
  for (int k = 0; k < 16; k++) {
    const float b = product == 0 ? warp_product_operand(256 + 16 * col + k)  // B[k][col] = M[col][k]
                                 : warp_product_operand(384 + 8 * k + col);  // B[k][col] = N[k][col]
    sum += static_cast<double>(warp_product_operand(16 * row + k)) * b;
  }
  return static_cast<float>(sum);
}

// The mismatches of `got` (kWarpProductOutputs values) against the plain products, one line each
// (empty: none).
inline std::vector<std::string> warp_product_mismatches(const std::vector<float>& got) {
  std::vector<std::string> bad;
  for (int product = 0; product < 2; product++) {
    for (int lane = 0; lane < 32; lane++) {
      for (int i = 0; i < 4; i++) {
        const float want = expected_warp_product(product, lane, i);
        const float have = got[static_cast<std::size_t>(128 * product + 4 * lane + i)];
        if (have != want) {
          bad.push_back(std::string(product == 0 ? "A M^T (ldmatrix)" : "A N (ldmatrix.trans)") + ", lane " +
                        std::to_string(lane) + ", accumulator " + std::to_string(i) + ": " + std::to_string(have) +
                        ", not " + std::to_string(want));
        }
      }
    }
  }
  return bad;
}

// Device buffers of the operands (stored as S) and the outputs, `launch(operands, c)` run on them
// (a one-warp launch of warp_products<S>), the outputs read back. Throws on a CUDA error.
template <class S, class Launch>
std::vector<float> warp_products_on_device(Launch&& launch) {
  const auto check = [](cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
  };
  std::vector<uint16_t> host(kWarpProductElements);
  for (int i = 0; i < kWarpProductElements; i++) host[static_cast<std::size_t>(i)] = S::store(warp_product_operand(i));
  uint16_t* operands = nullptr;
  float* c = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&operands), host.size() * sizeof(uint16_t)), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&c), kWarpProductOutputs * sizeof(float)), "cudaMalloc");
  check(cudaMemcpy(operands, host.data(), host.size() * sizeof(uint16_t), cudaMemcpyHostToDevice), "cudaMemcpy");
  launch(static_cast<const uint16_t*>(operands), c);
  check(cudaGetLastError(), "the launch");
  std::vector<float> got(kWarpProductOutputs);
  check(cudaMemcpy(got.data(), c, got.size() * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  check(cudaFree(operands), "cudaFree");
  check(cudaFree(c), "cudaFree");
  return got;
}

// The warp's part: one block of 32 threads, `shared` holding kWarpProductElements 16-bit values
// (16-byte aligned), `operands` the buffer above stored as S, `c` the outputs.
template <class S>
TRIDENT_MMA_DEVICE void warp_products(uint16_t* shared, const uint16_t* operands, float* c, int lane) {
  namespace mma = kernels::cuda::mma;
  for (int i = lane; i < kWarpProductElements; i += 32) shared[i] = operands[i];
  __syncthreads();
  uint32_t fa[4], fm[4], fn[4];
  mma::load_matrix_x4<false>(fa, shared + (lane % 16) * 16 + 8 * (lane / 16));
  mma::load_matrix_x4<false>(fm, shared + 256 + (lane % 8) * 16 + 8 * ((lane / 8) % 2));
  mma::load_matrix_x4<true>(fn, shared + 384 + (lane % 16) * 8);
  float by_m[4] = {}, by_n[4] = {};
  const uint32_t bm[2] = {fm[0], fm[1]}, bn[2] = {fn[0], fn[1]};
  mma::mma_16x8x16<S>(by_m, fa, bm);
  mma::mma_16x8x16<S>(by_n, fa, bn);
  for (int i = 0; i < 4; i++) {
    c[4 * lane + i] = by_m[i];
    c[128 + 4 * lane + i] = by_n[i];
  }
}

}  // namespace trident::test_support
