// One warpgroup's wgmma products (kernels/cuda/warpgroup_mma.cuh) in the three forms a flash
// attention on them needs, on small integers (exact in 16 bits, their products and sums exact in
// fp32 whatever order the tensor cores add in), compared exactly with plain products:
//   0. A M^T, A and M in shared memory, both K-major (S = Q K^T);
//   1. A N, A in registers (ldmatrix from A's swizzled tile), N MN-major (O += P V);
//   2. A N, A from a tile of A^T (MN-major: dQ = dS K with dS^T stored, as the backward keeps it).
// Each runs 4 k-steps (64 x 64 x 64), the first without accumulating into accumulators that hold
// a poison value, so a product that adds to them shows. Run on the GPU (tests/gpu/
// warpgroup_mma_test.cu: the PTX, built for sm_90a) and on the CUDA emulation
// (tests/emulation/emulation_test.cpp: the host model); the first is the one that checks the
// layouts as read against the hardware.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cuda/warpgroup_mma.cuh"

namespace trident::test_support {

constexpr int kWarpgroupProductThreads = 128;
// The operands, one buffer of four 64 x 64 row-major matrices: A, M, N, then A^T.
constexpr int kWarpgroupOperandElements = 4 * kernels::cuda::wgmma::kTileElements;
// Shared memory: the four tiles and 1024 bytes to align them.
constexpr int kWarpgroupSharedElements =
    kWarpgroupOperandElements + kernels::cuda::wgmma::kTileAlignment / static_cast<int>(sizeof(uint16_t));
// The outputs: product p's 64 x 64 row-major at 4096 p; then one flag, 1 if the kernel ran the
// products (built for sm_90a, or the emulation), 0 if it was built without them.
constexpr int kWarpgroupProductOutputs = 3 * 4096 + 1;
constexpr float kPoison = 12345.0f;

inline float warpgroup_operand(int matrix, int row, int col) {
  switch (matrix) {
    case 0: return static_cast<float>((row * 7 + col * 3) % 9 - 4);  // A
    case 1: return static_cast<float>((row * 5 + col) % 7 - 3);      // M
    default: return static_cast<float>((row * 3 + col * 5) % 11 - 5);  // N
  }
}

// Product p's exact value at (row, col).
inline float expected_warpgroup_product(int product, int row, int col) {
  double sum = 0.0;
  for (int k = 0; k < 64; k++) {
    const float b = product == 0 ? warpgroup_operand(1, col, k) : warpgroup_operand(2, k, col);
    sum += static_cast<double>(warpgroup_operand(0, row, k)) * b;
  }
  return static_cast<float>(sum);
}

// The mismatches of `got` against the plain products, one line each, at most 8 a product with a
// count of the rest (empty: none).
inline std::vector<std::string> warpgroup_product_mismatches(const std::vector<float>& got) {
  static const char* const kNames[3] = {"A M^T (both K-major, shared)", "A N (A in registers, N MN-major)",
                                        "A N (A from A^T: MN-major, shared)"};
  std::vector<std::string> bad;
  for (int product = 0; product < 3; product++) {
    int wrong = 0;
    for (int row = 0; row < 64; row++) {
      for (int col = 0; col < 64; col++) {
        const float want = expected_warpgroup_product(product, row, col);
        const float have = got[static_cast<std::size_t>(4096 * product + 64 * row + col)];
        if (have != want && wrong++ < 8) {
          bad.push_back(std::string(kNames[product]) + " (" + std::to_string(row) + ", " + std::to_string(col) +
                        "): " + std::to_string(have) + ", not " + std::to_string(want));
        }
      }
    }
    if (wrong > 8) bad.push_back(std::string(kNames[product]) + ": " + std::to_string(wrong - 8) + " more wrong");
  }
  return bad;
}

// Device buffers of the operands (stored as S) and the outputs, `launch(operands, c)` run on them
// (one block of kWarpgroupProductThreads running warpgroup_products<S>), the outputs read back.
template <class S, class Launch>
std::vector<float> warpgroup_products_on_device(Launch&& launch) {
  const auto check = [](cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
  };
  std::vector<uint16_t> host(kWarpgroupOperandElements);
  for (int m = 0; m < 4; m++) {
    for (int row = 0; row < 64; row++) {
      for (int col = 0; col < 64; col++) {
        const float x = m < 3 ? warpgroup_operand(m, row, col) : warpgroup_operand(0, col, row);
        host[static_cast<std::size_t>(4096 * m + 64 * row + col)] = S::store(x);
      }
    }
  }
  uint16_t* operands = nullptr;
  float* c = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&operands), host.size() * sizeof(uint16_t)), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&c), kWarpgroupProductOutputs * sizeof(float)), "cudaMalloc");
  check(cudaMemcpy(operands, host.data(), host.size() * sizeof(uint16_t), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemset(c, 0, kWarpgroupProductOutputs * sizeof(float)), "cudaMemset");
  launch(static_cast<const uint16_t*>(operands), c);
  check(cudaGetLastError(), "the launch");
  std::vector<float> got(kWarpgroupProductOutputs);
  check(cudaMemcpy(got.data(), c, got.size() * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  check(cudaFree(operands), "cudaFree");
  check(cudaFree(c), "cudaFree");
  return got;
}

// The warpgroup's part: `shared` holds kWarpgroupSharedElements 16-bit values, `operands` the
// buffer above stored as S, `c` the outputs; tid in [0, 128).
template <class S>
TRIDENT_MMA_DEVICE void warpgroup_products(uint16_t* shared, const uint16_t* operands, float* c, int tid) {
  namespace wgmma = kernels::cuda::wgmma;
  using wgmma::Major;
  if constexpr (!wgmma::kAvailable) {
    if (tid == 0) c[3 * 4096] = 0.0f;
    return;
  } else {
    uint16_t* tiles = wgmma::align_tiles(shared);
    for (int i = tid; i < kWarpgroupOperandElements; i += kWarpgroupProductThreads) {
      const int m = i / 4096, row = (i % 4096) / 64, col = i % 64;
      tiles[4096 * m + wgmma::swizzled_offset(row, col)] = operands[i];
    }
    wgmma::fence_shared_for_async();
    __syncthreads();
    const uint16_t* a = tiles;
    const uint16_t* m_tile = tiles + 4096;
    const uint16_t* n_tile = tiles + 2 * 4096;
    const uint16_t* at = tiles + 3 * 4096;
    const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;

    // This warp's A fragments, k-step by k-step, by ldmatrix from the swizzled tile: lane L gives
    // row 16 warp + L % 16, columns 16 ks + 8 (L / 16) (one 16-byte chunk).
    uint32_t a_regs[4][4];
    for (int ks = 0; ks < 4; ks++) {
      const int row = 16 * warp + lane % 16;
      kernels::cuda::mma::load_matrix_x4<false>(a_regs[ks], a + wgmma::swizzled_offset(row, 16 * ks + 8 * (lane / 16)));
    }

    // Each product in code of its own (a constant `product`), so that its wgmma instructions follow
    // one another with no branch between them: ptxas then waits for the warpgroup only where the
    // code says (a branch between two makes it insert waits of its own, its info C7519).
    auto run = [&](auto product_constant) {
      constexpr int product = decltype(product_constant)::value;
      float d[8][4];
      for (auto& block : d) {
        for (float& x : block) x = kPoison;
      }
      wgmma::fence_operands(d);
      wgmma::fence();
      for (int ks = 0; ks < 4; ks++) {
        if constexpr (product == 0) {
          wgmma::multiply_shared<S, Major::kK, Major::kK>(d, wgmma::descriptor<Major::kK>(a, ks),
                                                          wgmma::descriptor<Major::kK>(m_tile, ks), ks > 0);
        } else if constexpr (product == 1) {
          wgmma::multiply_registers<S, Major::kMN>(d, a_regs[ks], wgmma::descriptor<Major::kMN>(n_tile, ks), ks > 0);
        } else {
          wgmma::multiply_shared<S, Major::kMN, Major::kMN>(d, wgmma::descriptor<Major::kMN>(at, ks),
                                                            wgmma::descriptor<Major::kMN>(n_tile, ks), ks > 0);
        }
      }
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operands(d);
      for (int j = 0; j < 8; j++) {
        for (int i = 0; i < 4; i++) {
          c[4096 * product + 64 * (16 * warp + g + 8 * (i / 2)) + 8 * j + 2 * t + i % 2] = d[j][i];
        }
      }
    };
    run(std::integral_constant<int, 0>{});
    run(std::integral_constant<int, 1>{});
    run(std::integral_constant<int, 2>{});
    if (tid == 0) c[3 * 4096] = 1.0f;
  }
}

}  // namespace trident::test_support
