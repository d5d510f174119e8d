// Flash attention on the tensor cores, for 16-bit buffers (bf16 or fp16, hs = 64): the kernels
// that kernels/cuda/flash_attention.cu hands 16-bit runs to. Same contract, same scratch (D),
// same lse convention (natural log-sum-exp of the scaled scores) as the scalar fp32 kernels.
#pragma once

#include <cuda_runtime.h>  // cudaStream_t

#include <initializer_list>

#include "kernels/act_ptr.h"  // ActPtr, ConstActPtr
#include "kernels/backend.h"  // FlashDq, FlashBlockOrder, FlashProducts, WarpgroupSchedule

namespace trident::kernels::cuda {

// How the kernels bring each next tile into shared memory while their warps compute on the
// current one (two buffers, one barrier per tile either way):
//   kAsynchronous: cp.async (kernels/cuda/async_copy.cuh), the copies in flight during the
//                  products, as FlashAttention-2 does; the default.
//   kSynchronous:  through registers, each thread waiting for its loads before the products.
// Same arithmetic, so the same bits (tests/gpu checks it); perf/kernels' attention programs time
// both, and the default follows the faster.
enum class TileCopy { kAsynchronous, kSynchronous };


// The kernels' choices that change their speed and not their results (the same bits either way:
// tests/gpu/flash_mma_options_test.cpp). The defaults are production's.
struct FlashMmaOptions {
  TileCopy copy = TileCopy::kAsynchronous;
  // The forward's query rows per warp: 32 (a block of 128 queries, as FlashAttention-2; the
  // default) or 16 (64 queries). With 32, each K and V fragment loaded from shared memory feeds
  // two products instead of one, for more registers per thread and half the blocks: 4% faster
  // at GPT-2 124M's shapes, micro-batch 8, and 10% at 32 on one H100 (perf/kernels'
  // attention_forward 3 against 11; docs/performance.md, 2026-11-23).
  int forward_rows_per_warp = 32;
  // How the backward makes dQ (kernels/backend_options.h): a second walk (the default) or in the dK/dV
  // walk, the key tiles taking turns to add into fp32 sums. This one changes dQ's bits (its sums
  // run in another order), not dK's or dV's.
  FlashDq dq = FlashDq::kSeparateWalk;
  // Which blocks take which tiles (kernels/backend_options.h): head by head (the default) or every head's
  // longest walk first. The same tiles computed the same way, so the same bits.
  FlashBlockOrder block_order = FlashBlockOrder::kHeadByHead;
  FlashProducts forward_products = FlashProducts::kWarp;
  // The wgmma forward's warpgroups a block (kWarpgroup only; 1 or 2, others throw
  // std::invalid_argument): 64 or 128 queries sharing the block's K and V tiles. 1, the default,
  // until a GPU times 2 (perf/kernels' attention_forward 15 and 16; run.flash_warpgroups).
  int forward_warpgroups = 1;
  FlashProducts backward_products = FlashProducts::kWarp;
  // The wgmma backward's warpgroups a block (kWarpgroup only; 1, or 2 with dq = kSeparateWalk:
  // others throw std::invalid_argument): the dK/dV walk's 64 or 128 keys sharing each Q, dO, L and
  // D tile, the dQ walk's 64 or 128 queries each K and V tile. 1 until a GPU times 2
  // (perf/kernels' attention_backward 16 and 17; run.flash_warpgroups).
  int backward_warpgroups = 1;
  WarpgroupSchedule forward_schedule = WarpgroupSchedule::kInTurn;
  WarpgroupSchedule backward_schedule = WarpgroupSchedule::kInTurn;
};

// Whether the tensor-core kernels take these operands: all 16-bit of one format (not fp32), and
// every buffer 16-byte aligned (the kernels move 16 bytes at a time; C is a multiple of 64).
bool flash_attention_mma_applies(std::initializer_list<ConstActPtr> operands);

// out[B,T,C] and lse[B,NH,T] from qkv[B,T,3C]; C / NH = 64. scale: the scores' factor, 1/sqrt(hs).
// std::invalid_argument when options.forward_rows_per_warp is neither 16 nor 32, or when
// options.forward_products = kWarpgroup where this build or this GPU cannot run it, or (kWarpgroup)
// with forward_warpgroups neither 1 nor 2.
void flash_attention_mma_forward(ActPtr out, float* lse, ConstActPtr qkv, int B, int T, int C, int NH, float scale,
                                 cudaStream_t stream, const FlashMmaOptions& options = {});

// flash_attention_mma_forward's kWarpgroup kernel (flash_attention_wgmma.cu), its checks made.
void flash_attention_wgmma_forward(ActPtr out, float* lse, ConstActPtr qkv, int B, int T, int C, int NH, float scale,
                                   cudaStream_t stream, const FlashMmaOptions& options);

// flash_attention_mma_backward's kWarpgroup kernels (flash_attention_wgmma_backward.cu), its
// checks made.
void flash_attention_wgmma_backward(ActPtr dqkv, ConstActPtr dout, ConstActPtr qkv, const float* lse,
                                    const float* delta, float* dq_sums, int B, int T, int C, int NH, float scale,
                                    cudaStream_t stream, const FlashMmaOptions& options);

// Whether the launchers can run FlashProducts::kWarpgroup here: built for
// sm_90a (or the emulation), and the current device of compute capability 9.0.
bool flash_attention_wgmma_available();

// dqkv (overwritten) from dout, qkv, the forward's lse and delta = rowsum(dout * out) [B,NH,T].
// dq_sums: with options.dq = kInKeyWalk, flash_attention_mma_dq_sums_floats(B, T, NH) floats of
// device memory, 16-byte aligned, contents undefined on entry and exit (the counters in it are
// zeroed on the stream first); unused (may be null) otherwise.
// std::invalid_argument when options.backward_products = kWarpgroup where this build or this GPU
// cannot run it, or options.dq = kInKeyWalk without dq_sums, or backward_schedule = kOverlapped
// with dq = kInKeyWalk or synchronous tile copies, or (kWarpgroup) backward_warpgroups other than
// 1, or 2 with dq = kSeparateWalk.
void flash_attention_mma_backward(ActPtr dqkv, ConstActPtr dout, ConstActPtr qkv, const float* lse,
                                  const float* delta, float* dq_sums, int B, int T, int C, int NH, float scale,
                                  cudaStream_t stream, const FlashMmaOptions& options = {});

// Floats of dq_sums for FlashDq::kInKeyWalk: flash_attention_scratch_floats's part after the row
// statistics.
std::size_t flash_attention_mma_dq_sums_floats(int B, int T, int NH);

}  // namespace trident::kernels::cuda
