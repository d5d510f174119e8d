// The token-embedding gradient's per-thread math (kernels/cuda/embedding.cu): plain C++ that
// nvcc compiles for the device and any C++ compiler for the host, so that a host program can
// replay the kernel with these very functions (tests/unit/kernels/embedding_runs_replay_test.cpp).
//
// The scheme: the (token, position) pairs of the micro-batch sorted by token, stably (CUB's radix
// sort), so the positions of one token ascend; one block per (sorted index, 128-channel tile).
// The block at the first index of a token's run adds the run's dout rows, in position order, into
// that token's dwte row, one channel per thread; every other block returns at once. Each dwte
// element is written by one thread, the additions in the CPU twin's order (every position of the
// batch in turn): no atomics, and the same bits as the CPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/stored_element.h"  // stored::Fp32, Bf16, Fp16 (dout in its storage)

#if defined(__CUDACC__)
#define TRIDENT_EMBEDDING_HD __host__ __device__ __forceinline__
#else
#define TRIDENT_EMBEDDING_HD inline
#endif

namespace trident::kernels::cuda::embedding {

constexpr int kChannelTile = 128;  // threads per block of the run kernel, one channel each

// Whether sorted index i (of sorted_tokens) starts a run of equal tokens.
TRIDENT_EMBEDDING_HD bool starts_run(const int32_t* sorted_tokens, int i) {
  return i == 0 || sorted_tokens[i] != sorted_tokens[i - 1];
}

// Channel c of the run that starts at sorted index `first`: dwte[token - vocab_begin, c] +=
// dout[p, c] for the run's positions p in their sorted (ascending) order, when this rank owns
// the token and c < C.
template <class S, class E = typename S::Element>
TRIDENT_EMBEDDING_HD void add_run(float* dwte, const E* dout, const int32_t* sorted_tokens,
                                  const int32_t* sorted_positions, int positions, int first, int C, int c,
                                  int vocab_begin, int vocab_end) {
  const int32_t token = sorted_tokens[first];
  if (token < vocab_begin || token >= vocab_end || c >= C) return;
  float* w = dwte + static_cast<std::size_t>(token - vocab_begin) * C + c;
  float sum = *w;
  for (int j = first; j < positions && sorted_tokens[j] == token; ++j) {
    sum += S::load(dout[static_cast<std::size_t>(sorted_positions[j]) * C + c]);
  }
  *w = sum;
}

}  // namespace trident::kernels::cuda::embedding
