// Embedding: out[b,t] = wte[token] + wpe[t]. Forward is a gather, parallel over positions.
// Backward is a scatter-add: the same token may appear many times in a batch, so parallelising
// over positions would race on dwte rows. Instead each task owns a block of channels and walks
// every position: all writes of a task are to its own columns (no races, no atomics), the
// order of additions is fixed (deterministic), and the inner loop over the block vectorises.
#include "kernels/cpu/embedding.h"

#include <algorithm>
#include <cstddef>

namespace trident::kernels::cpu {

namespace {
constexpr int kChannelBlock = 64;  // 4 cache lines: two tasks never share a line of a row
}  // namespace

void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                       int B, int T, int C) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      const std::size_t bt = static_cast<std::size_t>(b) * T + t;
      float* o = out + bt * C;
      const float* tok = wte + static_cast<std::size_t>(tokens[bt]) * C;
      const float* pos = wpe + static_cast<std::size_t>(t) * C;
#pragma omp simd
      for (int c = 0; c < C; c++) o[c] = tok[c] + pos[c];
    }
  }
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                        int B, int T, int C) {
  const int blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < blocks; blk++) {
    const int c0 = blk * kChannelBlock;
    const int width = std::min(kChannelBlock, C - c0);
    for (int b = 0; b < B; b++) {
      for (int t = 0; t < T; t++) {
        const std::size_t bt = static_cast<std::size_t>(b) * T + t;
        const float* d = dout + bt * C + c0;
        float* tok = dwte + static_cast<std::size_t>(tokens[bt]) * C + c0;
        float* pos = dwpe + static_cast<std::size_t>(t) * C + c0;
#pragma omp simd
        for (int j = 0; j < width; j++) {
          tok[j] += d[j];
          pos[j] += d[j];
        }
      }
    }
  }
}

}  // namespace trident::kernels::cpu
