// Embedding: out[b,t] = wte[token] + wpe[t], vocabulary-parallel (a rank owns the table rows
// [vocab_begin, vocab_end); tokens it does not own contribute 0 here).
//
// Forward: a gather, one thread per output element (grid-stride over B*T*C), so a warp reads
// 32 consecutive channels of one row: coalesced. It writes exactly wte, exactly wpe, or their
// one float sum, like the CPU twin, so the two agree bit for bit.
//
// Backward: a scatter-add, where the same token may occur at many positions. Instead of atomics
// (whose order, hence rounding, changes from run to run) each thread OWNS its outputs:
// - dwte: one thread per channel c walks every position in order and adds into row
//   (token - vocab_begin) of its own column: no two threads write the same address, and the
//   additions happen in the CPU twin's order, so the result is deterministic and equal to the
//   CPU's bit for bit. The price is little parallelism (C threads, B*T steps each): a known
//   slow spot, to be replaced by a sort-by-token kernel when it shows in a profile.
// - dwpe: one thread per (t, c) sums over the batch in order: T*C threads.
#include <cstddef>

#include "kernels/cuda/cuda_check.h"  // CUDA_CHECK_LAUNCH
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/launch_shape.cuh"  // elementwise_blocks, blocks_for, grid-stride helpers

namespace trident::kernels::cuda {

namespace {

__global__ void embedding_forward_kernel(float* out, const int32_t* tokens, const float* wte,
                                         const float* wpe, int T, int C, int vocab_begin,
                                         int vocab_end, std::size_t count) {
  for (std::size_t i = grid_first_index(); i < count; i += grid_stride()) {
    const std::size_t bt = i / C;  // position b*T + t
    const int c = static_cast<int>(i % C);
    const int t = static_cast<int>(bt % T);
    const int32_t token = tokens[bt];
    const bool owned = token >= vocab_begin && token < vocab_end;
    const float* tok = owned ? wte + static_cast<std::size_t>(token - vocab_begin) * C : nullptr;
    const float* pos = wpe != nullptr ? wpe + static_cast<std::size_t>(t) * C : nullptr;
    float value = 0.0f;
    if (tok != nullptr && pos != nullptr) {
      value = tok[c] + pos[c];
    } else if (tok != nullptr) {
      value = tok[c];
    } else if (pos != nullptr) {
      value = pos[c];
    }
    out[i] = value;
  }
}

// One thread per channel; positions in order (see the file comment).
__global__ void embedding_backward_wte_kernel(float* dwte, const float* dout, const int32_t* tokens,
                                              int positions, int C, int vocab_begin,
                                              int vocab_end) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  for (int bt = 0; bt < positions; bt++) {
    const int32_t token = tokens[bt];
    if (token >= vocab_begin && token < vocab_end) {
      dwte[static_cast<std::size_t>(token - vocab_begin) * C + c] +=
          dout[static_cast<std::size_t>(bt) * C + c];
    }
  }
}

// One thread per (t, c); the batch in order.
__global__ void embedding_backward_wpe_kernel(float* dwpe, const float* dout, int B, int T, int C) {
  const std::size_t i = grid_first_index();  // t*C + c
  const std::size_t count = static_cast<std::size_t>(T) * C;
  if (i >= count) return;
  float sum = dwpe[i];
  for (int b = 0; b < B; b++) sum += dout[static_cast<std::size_t>(b) * count + i];
  dwpe[i] = sum;
}

}  // namespace

void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B,
                       int T, int C, int vocab_begin, int vocab_end, cudaStream_t stream) {
  const std::size_t count = static_cast<std::size_t>(B) * T * C;
  if (count == 0) return;
  embedding_forward_kernel<<<elementwise_blocks(count), kElementwiseThreads, 0, stream>>>(
      out, tokens, wte, wpe, T, C, vocab_begin, vocab_end, count);
  CUDA_CHECK_LAUNCH();
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B,
                        int T, int C, int vocab_begin, int vocab_end, cudaStream_t stream) {
  if (static_cast<std::size_t>(B) * T * C == 0) return;
  embedding_backward_wte_kernel<<<blocks_for(C, kColumnThreads), kColumnThreads, 0, stream>>>(
      dwte, dout, tokens, B * T, C, vocab_begin, vocab_end);
  CUDA_CHECK_LAUNCH();
  if (dwpe != nullptr) {
    const std::size_t count = static_cast<std::size_t>(T) * C;
    embedding_backward_wpe_kernel<<<blocks_for(count, kElementwiseThreads), kElementwiseThreads, 0,
                                    stream>>>(dwpe, dout, B, T, C);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace trident::kernels::cuda
