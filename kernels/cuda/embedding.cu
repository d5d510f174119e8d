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
// The tables, out and dout are templated on their storage (kernels/stored_element.h): fp32, or
// bf16/fp16 read as they are (the forward's sum rounded once when stored); dwte and dwpe are fp32.
#include <cstddef>

#include "kernels/cuda/cuda_check.h"  // CUDA_CHECK_LAUNCH
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/launch_shape.cuh"  // elementwise_blocks, blocks_for, grid-stride helpers
#include "kernels/stored_element.h"        // stored::with_policy, elements, common_storage

namespace trident::kernels::cuda {

namespace {

template <class S, class E = typename S::Element>
__global__ void embedding_forward_kernel(E* out, const int32_t* tokens, const E* wte, const E* wpe, int T, int C,
                                         int vocab_begin, int vocab_end, std::size_t count) {
  for (std::size_t i = grid_first_index(); i < count; i += grid_stride()) {
    const std::size_t bt = i / C;  // position b*T + t
    const int c = static_cast<int>(i % C);
    const int t = static_cast<int>(bt % T);
    const int32_t token = tokens[bt];
    const bool owned = token >= vocab_begin && token < vocab_end;
    const E* tok = owned ? wte + static_cast<std::size_t>(token - vocab_begin) * C : nullptr;
    const E* pos = wpe != nullptr ? wpe + static_cast<std::size_t>(t) * C : nullptr;
    float value = 0.0f;
    if (tok != nullptr && pos != nullptr) {
      value = S::load(tok[c]) + S::load(pos[c]);
    } else if (tok != nullptr) {
      value = S::load(tok[c]);
    } else if (pos != nullptr) {
      value = S::load(pos[c]);
    }
    out[i] = S::store(value);
  }
}

// One thread per channel; positions in order (see the file comment).
template <class S, class E = typename S::Element>
__global__ void embedding_backward_wte_kernel(float* dwte, const E* dout, const int32_t* tokens, int positions,
                                              int C, int vocab_begin, int vocab_end) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  for (int bt = 0; bt < positions; bt++) {
    const int32_t token = tokens[bt];
    if (token >= vocab_begin && token < vocab_end) {
      dwte[static_cast<std::size_t>(token - vocab_begin) * C + c] +=
          S::load(dout[static_cast<std::size_t>(bt) * C + c]);
    }
  }
}

// One thread per (t, c); the batch in order.
template <class S, class E = typename S::Element>
__global__ void embedding_backward_wpe_kernel(float* dwpe, const E* dout, int B, int T, int C) {
  const std::size_t i = grid_first_index();  // t*C + c
  const std::size_t count = static_cast<std::size_t>(T) * C;
  if (i >= count) return;
  float sum = dwpe[i];
  for (int b = 0; b < B; b++) sum += S::load(dout[static_cast<std::size_t>(b) * count + i]);
  dwpe[i] = sum;
}

}  // namespace

void embedding_forward(ActPtr out, const int32_t* tokens, ConstActPtr wte, ConstActPtr wpe, int B, int T, int C,
                       int vocab_begin, int vocab_end, cudaStream_t stream) {
  const std::size_t count = static_cast<std::size_t>(B) * T * C;
  if (count == 0) return;
  stored::with_policy(stored::common_storage({out, wte, wpe}, "embedding_forward"), [&](auto policy) {
    using S = decltype(policy);
    embedding_forward_kernel<S><<<elementwise_blocks(count), kElementwiseThreads, 0, stream>>>(
        stored::elements<S>(out), tokens, stored::elements<S>(wte), stored::elements<S>(wpe), T, C, vocab_begin,
        vocab_end, count);
  });
  CUDA_CHECK_LAUNCH();
}

void embedding_backward(float* dwte, float* dwpe, ConstActPtr dout, const int32_t* tokens, int B, int T, int C,
                        int vocab_begin, int vocab_end, cudaStream_t stream) {
  if (static_cast<std::size_t>(B) * T * C == 0) return;
  stored::with_policy(dout.storage(), [&](auto policy) {
    using S = decltype(policy);
    embedding_backward_wte_kernel<S><<<blocks_for(C, kColumnThreads), kColumnThreads, 0, stream>>>(
        dwte, stored::elements<S>(dout), tokens, B * T, C, vocab_begin, vocab_end);
    CUDA_CHECK_LAUNCH();
    if (dwpe != nullptr) {
      const std::size_t count = static_cast<std::size_t>(T) * C;
      embedding_backward_wpe_kernel<S><<<blocks_for(count, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
          dwpe, stored::elements<S>(dout), B, T, C);
      CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace trident::kernels::cuda
