// Embedding: out[b,t] = wte[token] + wpe[t], vocabulary-parallel (a rank owns the table rows
// [vocab_begin, vocab_end); tokens it does not own contribute 0 here).
//
// Forward: a gather, one thread per output element (grid-stride over B*T*C), so a warp reads
// 32 consecutive channels of one row: coalesced. It writes exactly wte, exactly wpe, or their
// one float sum, like the CPU twin, so the two agree bit for bit.
//
// Backward: a scatter-add, where the same token may occur at many positions. Instead of atomics
// (whose order, hence rounding, changes from run to run) each thread OWNS its outputs:
// - dwte: the positions sorted by token on the device (CUB's stable radix sort of (token,
//   position) pairs), then one block per run of a token and 128-channel tile adds the run's dout
//   rows in position order into the token's row (embedding_math.h). No two threads write the
//   same address, and the additions happen in the CPU twin's order, so the result is
//   deterministic and equal to the CPU's bit for bit. It replaced one thread per channel walking
//   every position (C threads in all, B*T dependent read-modify-writes each).
// - dwpe: one thread per (t, c) sums over the batch in order: T*C threads.
// The tables, out and dout are templated on their storage (kernels/stored_element.h): fp32, or
// bf16/fp16 read as they are (the forward's sum rounded once when stored); dwte and dwpe are fp32.
#include <cub/device/device_radix_sort.cuh>  // cub::DeviceRadixSort::SortPairs

#include <cstddef>

#include "kernels/cuda/cuda_check.h"  // CUDA_CHECK, CUDA_CHECK_LAUNCH
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/embedding_math.h"  // embedding::starts_run, add_run
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

// values[i] = i: the positions, before the sort carries them along with their tokens.
__global__ void positions_kernel(int32_t* values, int n) {
  for (std::size_t i = grid_first_index(); i < static_cast<std::size_t>(n); i += grid_stride()) {
    values[i] = static_cast<int32_t>(i);
  }
}

// Block (sorted index, channel tile): the run's sums when the index starts a run (see the file
// comment); every other block returns at once.
template <class S, class E = typename S::Element>
__global__ void __launch_bounds__(embedding::kChannelTile)
    embedding_backward_wte_kernel(float* dwte, const E* dout, const int32_t* sorted_tokens,
                                  const int32_t* sorted_positions, int positions, int C, int vocab_begin,
                                  int vocab_end) {
  const int first = static_cast<int>(blockIdx.x);
  if (!embedding::starts_run(sorted_tokens, first)) return;
  const int c = static_cast<int>(blockIdx.y) * embedding::kChannelTile + static_cast<int>(threadIdx.x);
  embedding::add_run<S>(dwte, dout, sorted_tokens, sorted_positions, positions, first, C, c, vocab_begin, vocab_end);
}

// The scratch's parts, each 256-byte aligned: sorted tokens, positions before and after the sort,
// then CUB's temporary storage.
struct SortScratch {
  int32_t* sorted_tokens;
  int32_t* positions;
  int32_t* sorted_positions;
  void* temp;
  std::size_t temp_bytes;
};

std::size_t aligned(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

std::size_t sort_temp_bytes(int positions) {
  std::size_t bytes = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int32_t*>(nullptr),
                                             static_cast<int32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                             static_cast<int32_t*>(nullptr), positions));
  return bytes;
}

SortScratch carve(void* scratch, int positions) {
  auto* base = static_cast<unsigned char*>(scratch);
  const std::size_t ids = aligned(static_cast<std::size_t>(positions) * sizeof(int32_t));
  return {reinterpret_cast<int32_t*>(base), reinterpret_cast<int32_t*>(base + ids),
          reinterpret_cast<int32_t*>(base + 2 * ids), base + 3 * ids, sort_temp_bytes(positions)};
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

std::size_t embedding_backward_scratch_bytes(int positions) {
  if (positions <= 0) return 0;
  return 3 * aligned(static_cast<std::size_t>(positions) * sizeof(int32_t)) + sort_temp_bytes(positions);
}

void embedding_backward(float* dwte, float* dwpe, ConstActPtr dout, const int32_t* tokens, int B, int T, int C,
                        int vocab_begin, int vocab_end, void* scratch, cudaStream_t stream) {
  if (static_cast<std::size_t>(B) * T * C == 0) return;
  const int positions = B * T;
  SortScratch s = carve(scratch, positions);
  positions_kernel<<<elementwise_blocks(static_cast<std::size_t>(positions)), kElementwiseThreads, 0, stream>>>(
      s.positions, positions);
  CUDA_CHECK_LAUNCH();
  // Stable: equal tokens keep their positions' ascending order.
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(s.temp, s.temp_bytes, tokens, s.sorted_tokens, s.positions,
                                             s.sorted_positions, positions, 0, static_cast<int>(8 * sizeof(int32_t)),
                                             stream));
  const dim3 grid(static_cast<unsigned>(positions),
                  static_cast<unsigned>(blocks_for(static_cast<std::size_t>(C), embedding::kChannelTile)));
  stored::with_policy(dout.storage(), [&](auto policy) {
    using S = decltype(policy);
    embedding_backward_wte_kernel<S><<<grid, embedding::kChannelTile, 0, stream>>>(
        dwte, stored::elements<S>(dout), s.sorted_tokens, s.sorted_positions, positions, C, vocab_begin, vocab_end);
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
