// Embedding: out[b,t] = wte[token] + wpe[t]. Forward is a gather, parallel over positions.
// Backward is a scatter-add: the same token may appear many times in a batch, so parallelising
// over positions would race on dwte rows. Instead each task owns a block of channels and walks
// every position: all writes of a task are to its own columns (no races, no atomics), the
// order of additions is fixed (deterministic), and the inner loop over the block vectorises.
//
// Vocabulary-parallel: a rank owns the rows [vocab_begin, vocab_end) and sees only those; a
// token it does not own contributes 0 to its forward and nothing to its dwte. The forward
// writes exactly wte, exactly wpe, or their one float sum, so summing the ranks' forwards
// (wpe on one rank) gives the unsharded result bit for bit. The backward adds to each owned
// row in the same position order as the unsharded kernel, so the shards' dwte are its rows
// bit for bit.
#include "kernels/cpu/embedding.h"

#include <algorithm>
#include <cstddef>

namespace trident::kernels::cpu {

namespace {
constexpr int kChannelBlock = 64;  // 4 cache lines: two tasks never share a line of a row
}  // namespace

void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                       int B, int T, int C, int vocab_begin, int vocab_end) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      const std::size_t bt = static_cast<std::size_t>(b) * T + t;
      float* o = out + bt * C;
      const int32_t token = tokens[bt];
      const bool owned = token >= vocab_begin && token < vocab_end;
      const float* tok =
          owned ? wte + static_cast<std::size_t>(token - vocab_begin) * C : nullptr;
      const float* pos = wpe != nullptr ? wpe + static_cast<std::size_t>(t) * C : nullptr;
      if (tok != nullptr && pos != nullptr) {
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = tok[c] + pos[c];
      } else if (tok != nullptr) {
        std::copy(tok, tok + C, o);
      } else if (pos != nullptr) {
        std::copy(pos, pos + C, o);
      } else {
        std::fill(o, o + C, 0.0f);
      }
    }
  }
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                        int B, int T, int C, int vocab_begin, int vocab_end) {
  const int blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < blocks; blk++) {
    const int c0 = blk * kChannelBlock;
    const int width = std::min(kChannelBlock, C - c0);
    for (int b = 0; b < B; b++) {
      for (int t = 0; t < T; t++) {
        const std::size_t bt = static_cast<std::size_t>(b) * T + t;
        const float* d = dout + bt * C + c0;
        const int32_t token = tokens[bt];
        const bool owned = token >= vocab_begin && token < vocab_end;
        float* tok =
            owned ? dwte + static_cast<std::size_t>(token - vocab_begin) * C + c0 : nullptr;
        float* pos = dwpe != nullptr ? dwpe + static_cast<std::size_t>(t) * C + c0 : nullptr;
        if (tok != nullptr && pos != nullptr) {
#pragma omp simd
          for (int j = 0; j < width; j++) {
            tok[j] += d[j];
            pos[j] += d[j];
          }
        } else if (tok != nullptr) {
#pragma omp simd
          for (int j = 0; j < width; j++) tok[j] += d[j];
        } else if (pos != nullptr) {
#pragma omp simd
          for (int j = 0; j < width; j++) pos[j] += d[j];
        }
      }
    }
  }
}

}  // namespace trident::kernels::cpu
