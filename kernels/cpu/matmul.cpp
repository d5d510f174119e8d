// Matmul: out[N,OC] = inp[N,C] @ W[OC,C]^T + b.
//
// Every product is cblas_sgemm in fixed tiles of the output (fixed_tile_gemm.h, so that the bits
// do not depend on the thread count): the BLAS owns blocking and vector width (runtime-dispatched
// AVX2/AVX-512 kernels), which no hand loop at -O2 without -march matches.
//   forward : out  = inp @ W^T        (NoTrans, Trans),  bias pre-filled into out, beta = 1
//   backward: dinp  = dout @ W        (NoTrans, NoTrans), beta = 0 (overwrite)
//             dW   += dout^T @ inp    (Trans, NoTrans),   beta = 1 (accumulate)
//             db   += column sums of dout: our own loop, parallel over column blocks so that
//                     each thread owns its outputs (no races, deterministic order over rows).
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cstddef>

#include "kernels/cpu/fixed_tile_gemm.h"

namespace trident::kernels::cpu {

namespace {
// Columns of dbias per task: 64 floats = 4 cache lines, so two threads never share a line.
constexpr int kBiasBlock = 64;
}  // namespace

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC) {
  float beta = 0.0f;
  if (bias != nullptr) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
      float* row = out + static_cast<std::size_t>(n) * OC;
#pragma omp simd
      for (int o = 0; o < OC; o++) row[o] = bias[o];
    }
    beta = 1.0f;
  }
  fixed_tile_sgemm(false, true, N, OC, C, 1.0f, inp, C, weight, C, beta, out, OC);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int N, int C, int OC) {
  if (dinp != nullptr) {
    fixed_tile_sgemm(false, false, N, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C);
  }
  fixed_tile_sgemm(true, false, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
  if (dbias != nullptr) {
    const int blocks = (OC + kBiasBlock - 1) / kBiasBlock;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < blocks; blk++) {
      const int o0 = blk * kBiasBlock;
      const int width = std::min(kBiasBlock, OC - o0);
      float sums[kBiasBlock] = {};
      for (int n = 0; n < N; n++) {
        const float* row = dout + static_cast<std::size_t>(n) * OC + o0;
#pragma omp simd
        for (int j = 0; j < width; j++) sums[j] += row[j];
      }
      for (int j = 0; j < width; j++) dbias[o0 + j] += sums[j];
    }
  }
}

}  // namespace trident::kernels::cpu
