// Playground: the loss and its gradient in one kernel with the row held on chip between the two
// passes, or re-read with a store hint: candidates for kernels/cuda/cross_entropy.cu's
// cross_entropy_forward_backward_kernel.
//
// The production kernel reads its row for the statistics and the loss, then reads it again for
// the gradient, counting on L2 to still hold it (blocks of 1024 threads, two an SM: 264 rows of
// bf16 logits in flight on an H100, 26 MB against its 50 MB of L2). Whether the second read hits
// L2 is for the GPU to say (cross_entropy_backward's variants 6 and 8). These read the row from
// memory once whatever L2 does:
// - kSharedMemory: each thread copies the 16-byte packs it reads into dynamic shared memory (the
//   whole row: Vp x 2 bytes in bf16, 98 KiB at GPT-2's 50,304) and takes them back from there for
//   the gradient. A thread reads back only the packs it wrote, so no barrier is needed between.
//   Two blocks an SM still fit (2 x 98 KiB of the H100's 228 KiB), so one block's loads overlap
//   the other's reductions and stores, as in production.
// - kRegisters: each thread keeps its packs in registers (kMaxHeldPacks of them, 28 registers in
//   16 bits: rows up to 57,344 bf16 values), all its loads issued before the first is used; one
//   block an SM (1024 threads of up to 64 registers), so nothing overlaps its reductions on that
//   SM.
// - kL2: neither, as production: the gradient pass reads the row again, from L2 if it is still
//   there. With StoreHint::kEvictFirst (st.global.cs) the gradient's stores are the first lines
//   L2 lets go, so that they do not push out the rows other blocks have still to read again;
//   with kNormal, the control: production's kernel as this header writes it.
// All add the same values in the same order as production's thread_running (chunk c of the row
// to thread c % 1024, then the tail one value a thread), merge them with the same block_merged
// and compute each gradient with the same BackwardRow: the production kernel's losses, row
// statistics and gradients bit for bit, which the playground checks. Rows must be 16-byte packs
// (Vp a multiple of 8 in 16 bits, buffers aligned), and dlogits may be logits: every read of
// the row for the statistics happens before block_merged's barriers, every write after, and
// kL2's second read of a pack is by the thread that then writes it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>  // std::integral_constant

#include "kernels/act_ptr.h"                  // ActPtr, ConstActPtr
#include "kernels/cuda/cross_entropy_math.h"  // softmax::Running, add, empty_running
#include "kernels/cuda/launch_shape.cuh"      // kLossRowThreads
#include "kernels/cuda/softmax_block.cuh"     // softmax::block_merged, BackwardRow, store_row_statistics
#include "kernels/cuda/vector_pack.h"         // Pack, load_pack, store_pack, starts_aligned
#include "kernels/stored_element.h"           // stored::with_policy, elements, common_storage
#include "perf/kernels/playground.cuh"        // PG_CUDA_CHECK

namespace trident::playground::held_row {

namespace kc = trident::kernels::cuda;
namespace softmax = trident::kernels::cuda::softmax;

enum class RowHeldIn { kSharedMemory, kRegisters, kL2 };
enum class StoreHint { kNormal, kEvictFirst };

// kRegisters' packs a thread: 7 x 8 x 1024 = 57,344 16-bit values, GPT-2's padded 50,304 needing
// 6.14 packs a thread.
constexpr int kMaxHeldPacks = 7;
constexpr int kThreads = kc::kLossRowThreads;  // production's block: the same order of additions

// Pack c of the row's gradient from pack c of the row.
template <class S, StoreHint kHint, class E>
__device__ __forceinline__ void write_pack_gradient(E* drow, kc::Pack<E> pack, int c, const softmax::BackwardRow& g,
                                                    float dloss, int V) {
  constexpr int kCount = kc::Pack<E>::kCount;
  const int v0 = c * kCount;
#pragma unroll
  for (int i = 0; i < kCount; i++) {
    const int v = v0 + i;
    pack.values[i] = S::store(v < V ? g.gradient(S::load(pack.values[i]), v, dloss) : 0.0f);  // 0: padding
  }
  if constexpr (kHint == StoreHint::kEvictFirst) {
    uint4 raw;
    memcpy(&raw, &pack, sizeof raw);
    __stcs(reinterpret_cast<uint4*>(drow + v0), raw);
  } else {
    kc::store_pack(drow + v0, pack);
  }
}

// Thread t's packs are c = t + k kThreads; kRegisters unrolls its loops over k, so that its held
// packs stay in registers, and issues every load before the first addition.
template <class S, RowHeldIn kWhere, StoreHint kHint, class E = typename S::Element>
__global__ void __launch_bounds__(kThreads, kWhere == RowHeldIn::kRegisters ? 1 : 2)
    held_row_kernel(float* losses, float* row_max, float* row_sumexp, E* dlogits, const E* logits,
                    const int32_t* targets, float dloss, int V, int Vp) {
  constexpr int kCount = kc::Pack<E>::kCount;
  const int n = blockIdx.x;
  const E* row = logits + static_cast<std::size_t>(n) * Vp;
  E* drow = dlogits + static_cast<std::size_t>(n) * Vp;
  const int packs = Vp / kCount, chunks = V / kCount;
  const int32_t target = targets[n];
  const float target_logit = threadIdx.x == 0 ? S::load(row[target]) : 0.0f;
  softmax::Running r = softmax::empty_running();
  auto add_pack = [&](const kc::Pack<E>& pack) {
    for (int i = 0; i < kCount; i++) softmax::add(r, S::load(pack.values[i]));
  };
  // The tail one value a thread (thread_running's), then the block's statistics and the loss.
  auto finish_statistics = [&] {
    for (int v = chunks * kCount + static_cast<int>(threadIdx.x); v < V; v += kThreads) {
      softmax::add(r, S::load(row[v]));
    }
    return softmax::store_row_statistics(softmax::block_merged(r), n, target_logit, target, dloss, V, losses,
                                         row_max, row_sumexp);
  };
  if constexpr (kWhere == RowHeldIn::kL2) {
    for (int c = threadIdx.x; c < chunks; c += kThreads) {
      add_pack(kc::load_pack(row + static_cast<std::size_t>(c) * kCount));
    }
    const softmax::BackwardRow g = finish_statistics();
    for (int c = threadIdx.x; c < packs; c += kThreads) {
      write_pack_gradient<S, kHint>(drow, kc::load_pack(row + static_cast<std::size_t>(c) * kCount), c, g, dloss, V);
    }
  } else if constexpr (kWhere == RowHeldIn::kSharedMemory) {
    extern __shared__ uint4 shared_packs[];  // the row's Vp / kCount packs
    auto* held = reinterpret_cast<kc::Pack<E>*>(shared_packs);
    for (int c = threadIdx.x; c < packs; c += kThreads) {
      const kc::Pack<E> pack = kc::load_pack(row + static_cast<std::size_t>(c) * kCount);
      held[c] = pack;
      if (c < chunks) add_pack(pack);
    }
    const softmax::BackwardRow g = finish_statistics();
    for (int c = threadIdx.x; c < packs; c += kThreads) write_pack_gradient<S, kHint>(drow, held[c], c, g, dloss, V);
  } else {
    kc::Pack<E> held[kMaxHeldPacks];
#pragma unroll
    for (int k = 0; k < kMaxHeldPacks; k++) {
      const int c = static_cast<int>(threadIdx.x) + k * kThreads;
      if (c < packs) held[k] = kc::load_pack(row + static_cast<std::size_t>(c) * kCount);
    }
#pragma unroll
    for (int k = 0; k < kMaxHeldPacks; k++) {
      if (static_cast<int>(threadIdx.x) + k * kThreads < chunks) add_pack(held[k]);
    }
    const softmax::BackwardRow g = finish_statistics();
#pragma unroll
    for (int k = 0; k < kMaxHeldPacks; k++) {
      const int c = static_cast<int>(threadIdx.x) + k * kThreads;
      if (c < packs) write_pack_gradient<S, kHint>(drow, held[k], c, g, dloss, V);
    }
  }
}

// cuda::cross_entropy_forward_backward's contract on rows held in `where`, the gradient stored
// with `hint`: losses, row_max and row_sumexp [N], dlogits (may be logits). std::invalid_argument
// when the rows are not whole 16-byte packs or do not fit where they are to be held.
inline void forward_backward(RowHeldIn where, StoreHint hint, float* losses, float* row_max, float* row_sumexp,
                             kernels::ActPtr dlogits, kernels::ConstActPtr logits, const int32_t* targets, float dloss,
                             int N, int V, int Vp, cudaStream_t stream) {
  namespace stored = trident::kernels::stored;
  if (N == 0) return;
  const kernels::Precision storage = stored::common_storage({dlogits, logits}, "held_row::forward_backward");
  stored::with_policy(storage, [&](auto policy) {
    using S = decltype(policy);
    using E = typename S::Element;
    constexpr int kCount = kc::Pack<E>::kCount;
    auto* d = stored::elements<S>(dlogits);
    const auto* l = stored::elements<S>(logits);
    const std::string shape = "N = " + std::to_string(N) + ", Vp = " + std::to_string(Vp);
    if (Vp % kCount != 0 || !kc::starts_aligned(d) || !kc::starts_aligned(l)) {
      throw std::invalid_argument("held_row: the rows are not whole 16-byte packs (" + shape + ")");
    }
    const int packs = Vp / kCount;
    auto launch = [&](auto where_constant, auto hint_constant) {
      constexpr RowHeldIn kWhere = decltype(where_constant)::value;
      constexpr StoreHint kHint = decltype(hint_constant)::value;
      std::size_t bytes = 0;  // dynamic shared memory
      if constexpr (kWhere == RowHeldIn::kRegisters) {
        if (packs > kMaxHeldPacks * kThreads) {
          throw std::invalid_argument("held_row: a row of " + shape + " needs more than " +
                                      std::to_string(kMaxHeldPacks) + " packs a thread");
        }
      } else if constexpr (kWhere == RowHeldIn::kSharedMemory) {
        bytes = static_cast<std::size_t>(packs) * sizeof(uint4);
        if (cudaFuncSetAttribute(held_row_kernel<S, kWhere, kHint>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(bytes)) != cudaSuccess) {
          (void)cudaGetLastError();
          throw std::invalid_argument("held_row: a row of " + shape + " (" + std::to_string(bytes) +
                                      " bytes) does not fit in a block's shared memory");
        }
        // As much of the SM's on-chip memory as shared memory as it allows: two rows an SM.
        PG_CUDA_CHECK(cudaFuncSetAttribute(held_row_kernel<S, kWhere, kHint>,
                                           cudaFuncAttributePreferredSharedMemoryCarveout,
                                           cudaSharedmemCarveoutMaxShared));
      }
      held_row_kernel<S, kWhere, kHint>
          <<<N, kThreads, bytes, stream>>>(losses, row_max, row_sumexp, d, l, targets, dloss, V, Vp);
    };
    auto with_hint = [&](auto where_constant) {
      if (hint == StoreHint::kEvictFirst) {
        launch(where_constant, std::integral_constant<StoreHint, StoreHint::kEvictFirst>{});
      } else {
        launch(where_constant, std::integral_constant<StoreHint, StoreHint::kNormal>{});
      }
    };
    switch (where) {
      case RowHeldIn::kSharedMemory:
        with_hint(std::integral_constant<RowHeldIn, RowHeldIn::kSharedMemory>{});
        break;
      case RowHeldIn::kRegisters:
        with_hint(std::integral_constant<RowHeldIn, RowHeldIn::kRegisters>{});
        break;
      case RowHeldIn::kL2:
        with_hint(std::integral_constant<RowHeldIn, RowHeldIn::kL2>{});
        break;
    }
  });
  PG_CUDA_CHECK(cudaGetLastError());
}

}  // namespace trident::playground::held_row
