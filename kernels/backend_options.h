// The deck's choices about a backend's kernels (run.attention, run.matmul_epilogues and the
// choices waiting for a GPU's timing), as BackendOptions; and the flash kernels' workspace size,
// which depends on one of them. src/app/backend_options.h makes these from a deck.
#pragma once

#include <cstddef>

namespace trident::kernels {

// Which attention kernels a backend runs (run.attention; docs/model.md, "Attention kernels"):
//   kGemm:  the scores through a T x T workspace per (batch, head), GEMMs and row kernels
//           (every backend; attention_scratch_size is 2 B NH T^2 floats);
//   kFlash: tiled, online softmax, nothing T x T anywhere (the CUDA backend, head size 64;
//           attention_scratch_size is B NH T floats).
enum class AttentionKernel { kGemm, kFlash };

// How the CUDA flash attention's backward on 16-bit buffers makes dQ
// (kernels/cuda/flash_attention_mma_backward.cu; both deterministic, no atomics on values):
//   kSeparateWalk: a second kernel walks each query tile's key tiles and recomputes S and dP
//                  there: 7 tile products per (query tile, key tile) pair; the default;
//   kInKeyWalk:    the dK/dV kernel also computes each pair's share dS K and adds it into fp32
//                  sums of dQ, the key tiles taking turns in a fixed order: 5 products, as
//                  FlashAttention-2, for B T C floats more scratch. Not yet the default: it
//                  waits for a GPU measurement (perf/kernels' attention_backward, variant 11).
// run.flash_dq = separate | key_walk.
enum class FlashDq { kSeparateWalk, kInKeyWalk };

// In which order the CUDA flash attention's 16-bit kernels hand their tiles to the blocks
// (kernels/cuda/flash_mma_tiles.cuh: tile_grid and place). The GPU starts blocks in the order of their
// index, and under the causal mask a tile's work grows with the tiles it walks: from 1 to T / 64.
//   kHeadByHead:   each (batch, head) in turn, its longest walks first; the default;
//   kLongestFirst: every (batch, head)'s longest walk first, then every one's next longest, and
//                  so on (longest processing time first, the LPT order of FlashAttention-3's
//                  tile schedulers): the grid ends on its shortest blocks, so fewer SMs wait idle
//                  at the end. A model of the schedule (perf/kernels/block_order_model.py:
//                  greedy, a block's time in proportion to the tiles it walks; not a
//                  measurement) puts the saving at 10 to 18% of each kernel at GPT-2 774M,
//                  micro-batch 8 (15 to 22% at 124M, 3 to 9% at micro-batch 32). Every tile is
//                  computed as before, so the same bits. Not yet the default: it waits for a GPU
//                  measurement.
// dQ in the key walk keeps its own order (its key tiles must start diagonal first, by ticket).
// run.flash_block_order = head_by_head | longest_first.
enum class FlashBlockOrder { kHeadByHead, kLongestFirst };

// Which tensor-core instructions the CUDA flash attention's 16-bit kernels make their products
// with, the forward's and the backward's each (run.flash_forward and run.flash_backward: mma_sync,
// wgmma or wgmma_overlapped):
//   kWarp:      mma.sync, each warp its own products (kernels/cuda/warp_mma.cuh); the default.
//   kWarpgroup: Hopper's wgmma, a warpgroup's products with B read from shared memory once
//               (kernels/cuda/flash_attention_wgmma.cu, flash_attention_wgmma_backward.cu);
//               64 queries a block in the forward (128 with FlashMmaOptions::forward_warpgroups
//               = 2), whatever its rows a warp. Needs a build for
//               sm_90a (CMAKE_CUDA_ARCHITECTURES with 90) and a compute capability 9.0 GPU: the
//               CUDA backend and the launchers refuse it otherwise. Not yet timed; its results
//               differ from kWarp's only by the tensor cores' order of addition inside a 16-wide
//               step (the same bits on the emulation).
enum class FlashProducts { kWarp, kWarpgroup };

// The wgmma kernels' schedule (with kWarpgroup products only): each product group waited for at
// once (kInTurn, the default; run.flash_forward = wgmma), or FlashAttention-3's overlap within the
// warpgroup (kOverlapped; wgmma_overlapped): a walked tile's scores issued with the previous
// tile's accumulating products behind them, and this tile's softmax run while those are in
// flight; the forward's P V (flash_attention_wgmma.cu), the backward's dV and dK, and dQ in its
// own walk (flash_attention_wgmma_backward.cu; not with dQ in the key walk, nor with synchronous
// tile copies: the deck and the launcher refuse those). The same arithmetic in the same order, so
// the same bits; three buffers of the walked tiles instead of two. Not yet timed.
enum class WarpgroupSchedule { kInTurn, kOverlapped };

// How the CUDA LayerNorm backward makes dweight and dbias (run.layernorm_sums = separate |
// row_walk; kernels/cuda/layernorm.cuh says how each works): kSeparatePass, the default, sums the
// columns of dout and dout * xhat in a pass of their own (a second read of dout and the input);
// kInRowWalk sums them as the rows' dinp is made (one read). Both deterministic; they add in
// different orders, so they differ in the last bits. Not yet the default: it waits for a GPU
// measurement (perf/kernels' layernorm_backward, variants 5 and 6).
enum class LayerNormParameterSums { kSeparatePass, kInRowWalk };

// How the CUDA cross-entropy backward walks a row of logits (run.cross_entropy_loads = values |
// packs; kernels/cuda/cross_entropy.cuh): kValues, the default, one value a thread at a time;
// kPacks 16 bytes a thread at a time where the rows allow it. The same arithmetic on each value,
// so the same bits; not yet the default, as it waits for a GPU measurement (perf/kernels'
// cross_entropy_backward).
enum class CrossEntropyLoads { kValues, kPacks };

// How the CUDA AdamW update walks the optimizer's arrays (run.adamw_loads = values | packs;
// kernels/cuda/adamw.cuh): kValues, the default, one element a thread at a time; kPacks four
// consecutive elements a thread, on 16-byte loads and stores of the fp32 arrays, where every
// array starts on a whole pack. The same arithmetic on each element, so the same bits; not yet
// the default, as it waits for a GPU measurement (perf/kernels' adamw).
enum class AdamWLoads { kValues, kPacks };

// Where the CUDA matmul backward makes the parameter gradients (run.matmul_backward_streams =
// one | two; kernels/cuda/side_stream.cuh): kOne, the default, queues the input gradient's GEMM,
// then the weight gradient's and the bias sums, on the one stream; kTwo queues the weight and
// bias gradients on a second stream with a cuBLAS handle of its own, forked from the compute
// stream before and joined into it after, so that the two GEMMs share the SMs (each fills what
// the other's last wave leaves idle). The same kernels on the same operands, so the same bits;
// not yet the default, as it waits for a GPU measurement (perf/kernels' matmul_backward).
enum class MatmulBackwardStreams { kOne, kTwo };

// Where the CUDA matmul backward sums a 16-bit layer's bias gradient over the tokens
// (run.matmul_bias_gradients = column_sums | epilogue; kernels/cuda/lt_matmul.cuh): kColumnSums,
// the default, in a pass of its own over dout (add_column_sums); kEpilogue in the weight
// gradient's GEMM, which reads dout anyway (cuBLASLt's BGRADB epilogue, into a scratch then added
// to dbias), where cuBLASLt offers it (where it refuses, the column sums run); under
// run.matmul_backward_streams = two the side stream has a cuBLASLt workspace of its own (32 MiB)
// for it. The same sums in another order, so results agree to rounding; not yet the default, as
// it waits for a GPU measurement. fp32 runs (no cuBLASLt there) and the CPU ignore it.
enum class MatmulBiasGradients { kColumnSums, kEpilogue };

// How the CUDA backend picks the kernel of a 16-bit linear layer's cuBLASLt products
// (run.matmul_algorithms = heuristic | timed; kernels/cuda/lt_matmul.cuh): kHeuristic, the
// default, takes cuBLASLt's heuristic's first answer, and the backward's input and weight
// gradients stay with cublasGemmEx; kTimed asks the heuristic for several answers at each
// product shape's first call, times each on that call's operands (the weight gradient's
// accumulation into a scratch, so that nothing is added twice) and keeps the fastest, with the
// backward's two gradients moved to cuBLASLt too. A shape's answers differ in tiles, split-K and
// stream-K (their last wave's idle SMs), so in the order of their sums: results agree to
// rounding, and, as the timing may choose otherwise in another run, a restart is equal to
// rounding rather than bit for bit. fp32 runs (no cuBLASLt there), run.matmul_epilogues =
// separate and the CPU ignore it. Not the default: it waits for a GPU's timing.
enum class MatmulAlgorithms { kHeuristic, kTimed };

// Floats of attention workspace of the flash kernels: one row statistic per (batch, head,
// query); with dQ in the key walk, after them (from flash_attention_dq_sums_offset, a multiple
// of 4 floats) fp32 sums of dQ, one
// per (batch, head, query, channel of the head size 64), then a turn counter per (batch, head,
// 16 queries: a warp's rows) and a ticket counter. For memory estimates made without the backend
// (trident check) as well as for the backend.
inline std::size_t flash_attention_dq_sums_offset(int B, int T, int NH) {
  const std::size_t rows = static_cast<std::size_t>(B) * static_cast<std::size_t>(NH) * static_cast<std::size_t>(T);
  return (rows + 3) / 4 * 4;  // 16 bytes: the sums are read two floats at a time
}
inline std::size_t flash_attention_scratch_floats(int B, int T, int NH, FlashDq dq = FlashDq::kSeparateWalk) {
  const std::size_t heads = static_cast<std::size_t>(B) * static_cast<std::size_t>(NH);
  const std::size_t rows = heads * static_cast<std::size_t>(T);
  if (dq == FlashDq::kSeparateWalk) return rows;
  const std::size_t warp_row_sets = heads * ((static_cast<std::size_t>(T) + 63) / 64) * 4;
  return flash_attention_dq_sums_offset(B, T, NH) + rows * 64 + warp_row_sets + 1;
}

// Whether the CUDA backend's 16-bit matmuls do their bias, GELU and GELU-gradient work in
// cuBLASLt's epilogues (run.matmul_epilogues; kernels/cuda/lt_matmul.cuh) or in cuBLAS GEMMs
// followed by separate kernels. fp32 runs and the CPU always run the separate kernels.
enum class MatmulEpilogues { kFused, kSeparate };

// How the CUDA GEMM attention batches each product over the B x NH (batch, head) matrices
// (run.attention_batching; kernels/cuda/attention.cuh, GemmAttentionOptions):
//   kStrided:  min(B, NH) strided batched cuBLAS calls, the shorter axis looped over;
//   kPointers: one pointer-array batched call, after a kernel writes the matrices' addresses
//              (products whose matrices do not all start on 16 bytes keep the strided calls).
// The same matrices' products either way; only the number of calls differs.
enum class AttentionBatching { kStrided, kPointers };

// Choices a deck makes about a backend's kernels.
struct BackendOptions {
  AttentionKernel attention = AttentionKernel::kGemm;
  MatmulEpilogues matmul_epilogues = MatmulEpilogues::kFused;
  // The CUDA GEMM attention's schedule (run.attention_blocks, run.attention_batching): causal
  // row blocks (1: every product over the full T x T square; k: per block of about T / k queries,
  // whole groups of 8 rows, against the keys below the block's end, about (k - 1) / 2k of the
  // square's work left out for k times the calls) and the batching. The CPU and flash
  // attention ignore both.
  int attention_blocks = 4;
  AttentionBatching attention_batching = AttentionBatching::kPointers;
  // Kernel choices waiting for a GPU's timing (CUDA only; the CPU and the GEMM attention ignore
  // them): deck keys, so that one GPU sitting can time whole steps each way without a rebuild.
  FlashDq flash_dq = FlashDq::kSeparateWalk;
  FlashBlockOrder flash_block_order = FlashBlockOrder::kHeadByHead;
  FlashProducts flash_forward_products = FlashProducts::kWarp;  // run.flash_forward
  WarpgroupSchedule flash_forward_schedule = WarpgroupSchedule::kInTurn;
  FlashProducts flash_backward_products = FlashProducts::kWarp;  // run.flash_backward
  WarpgroupSchedule flash_backward_schedule = WarpgroupSchedule::kInTurn;
  // The wgmma kernels' warpgroups a block (run.flash_warpgroups: 1 or 2; kWarpgroup only, and 2
  // with the backward's dQ in its own walk): FlashMmaOptions::forward_warpgroups and
  // backward_warpgroups (kernels/cuda/flash_attention_mma.cuh).
  int flash_warpgroups = 1;
  LayerNormParameterSums layernorm_sums = LayerNormParameterSums::kSeparatePass;
  CrossEntropyLoads cross_entropy_loads = CrossEntropyLoads::kValues;
  AdamWLoads adamw_loads = AdamWLoads::kValues;
  MatmulBackwardStreams matmul_backward_streams = MatmulBackwardStreams::kOne;
  MatmulBiasGradients matmul_bias_gradients = MatmulBiasGradients::kColumnSums;
  MatmulAlgorithms matmul_algorithms = MatmulAlgorithms::kHeuristic;
};

}  // namespace trident::kernels
