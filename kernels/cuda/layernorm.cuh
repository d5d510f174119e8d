// LayerNorm over the channel axis on the device (eps = 1e-5), forward and accumulating
// backward. Launchers queue on `stream`.
#pragma once

#include <cuda_runtime.h>  // cudaStream_t

#include <cstddef>

#include "kernels/act_ptr.h"  // ActPtr, ConstActPtr
#include "kernels/backend.h"  // LayerNormParameterSums

namespace trident::kernels::cuda {

inline constexpr float kLayerNormEps = 1e-5f;  // as the CPU twin (kernels/cpu/layernorm.h)

// How the rows are spread over the GPU's threads (layernorm.cu). kWarpPerRow, the default: a
// warp per row, the row held in the lanes' registers between the reductions (one read of it
// from memory), warp shuffles only; rows longer than kWarpRowMaxC fall back to kBlockPerRow: a
// block per row, the row read once per pass, block reductions through shared memory. The two
// sum in different orders, so their results differ in the last bits; each is the same run to
// run. A choice for tests and the playground (perf/kernels): the model always takes the default.
enum class LayerNormRows { kWarpPerRow, kBlockPerRow };
inline constexpr int kWarpRowMaxC = 2048;  // 64 fp32 values a lane: registers, not spills

// The values of a row each lane holds under kWarpPerRow: C rounded up to 16-byte packs of
// element_bytes each, spread over 32 lanes, then up to the nearest kernel instantiation (16,
// 24, 32, 40, 48 or 64: GPT-2's 768, 1024 and 1280 fit exactly; at 1280, 40 against 48 takes
// the fused residual forward from 125 to 95 registers, 4 to 5 blocks an SM, ptxas sm_90 bf16;
// at 1600, 56 against 64 would change no kernel's blocks an SM, so it is not built). 0 where
// the row does not fit: C = 0 or C > kWarpRowMaxC.
constexpr int warp_row_values_per_lane(int C, int element_bytes) {
  if (C <= 0 || C > kWarpRowMaxC) return 0;
  const int pack = 16 / element_bytes;
  const int packs_per_lane = ((C + pack - 1) / pack + 31) / 32;
  const int values = packs_per_lane * pack;
  return values <= 16 ? 16 : values <= 24 ? 24 : values <= 32 ? 32 : values <= 40 ? 40 : values <= 48 ? 48 : 64;
}

// Where LayerNorm's backward sums dweight and dbias (layernorm.cu):
// - kSeparatePass, the default: the row-local dinp kernel, then the column sums of
//   column_sums.cuh, which read dout and inp a second time;
// - kInRowWalk: blocks of kWalkWarps warps each walk a chunk of rows (kWalkChunks chunks at most),
//   a warp per row as kWarpPerRow, and add dout * xhat and dout into their own shared sums as they
//   compute dinp; a block's warps are then summed in order into one partial per chunk, and the
//   chunks in order into dweight and dbias (add_partial_sums_pair). One read of dout and inp.
//   Only for rows a warp holds (kWarpPerRow and C up to kWarpRowMaxC); others take
//   kSeparatePass.
// Both are deterministic; they add in different orders, so they differ in the last bits. The
// enum is kernels::LayerNormParameterSums (kernels/backend_options.h: run.layernorm_sums chooses); the
// playground (perf/kernels/layernorm_backward.cu) times both.
inline constexpr int kWalkWarps = 4;     // warps per block of kInRowWalk
inline constexpr int kWalkChunks = 256;  // its most chunks: 2 blocks per SM on an H100, 32 rows each at N = 8192

// Floats of device scratch layernorm_backward needs for C channels, either way, with at most
// walk_chunks chunks for kInRowWalk.
std::size_t layernorm_backward_scratch_floats(int C, int walk_chunks = kWalkChunks);

// The activations and weights (ActPtr, ConstActPtr) are fp32, or all 16-bit of one format
// (read as they are, fp32 math, each stored value rounded once); std::logic_error if they mix.
// mean, rstd and the parameter gradients are fp32 in every storage.

// out[N,C] = (inp - mean) * rstd * weight + bias per row; writes mean[N] and rstd[N].
void layernorm_forward(ActPtr out, float* mean, float* rstd, ConstActPtr inp, ConstActPtr weight, ConstActPtr bias,
                       int N, int C, cudaStream_t stream, LayerNormRows rows = LayerNormRows::kWarpPerRow);

// residual[N,C] = a + b (may alias a or b), then layernorm_forward of residual into out, in one
// kernel: each row's sum stays in the threads between the add and the normalisation. Under
// 16-bit storage the normalisation reads the rounded residual it stored, so the result has the
// bits of add then layernorm_forward with the same `rows`.
void residual_layernorm_forward(ActPtr residual, ActPtr out, float* mean, float* rstd, ConstActPtr a, ConstActPtr b,
                                ConstActPtr weight, ConstActPtr bias, int N, int C, cudaStream_t stream,
                                LayerNormRows rows = LayerNormRows::kWarpPerRow);

// dinp[N,C] += d/dinp;  dweight[C] += sum_n dout * xhat;  dbias[C] += sum_n dout. column_scratch:
// layernorm_backward_scratch_floats(C, walk_chunks) floats of device workspace for the parameter
// sums. walk_chunks: kInRowWalk's most chunks (its sums' order depends on it), a choice for the
// playground (perf/kernels/layernorm_backward.cu times others); the model takes kWalkChunks.
void layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                        ConstActPtr weight, const float* mean, const float* rstd, int N, int C, float* column_scratch,
                        cudaStream_t stream, LayerNormRows rows = LayerNormRows::kWarpPerRow,
                        LayerNormParameterSums sums = LayerNormParameterSums::kSeparatePass,
                        int walk_chunks = kWalkChunks);

}  // namespace trident::kernels::cuda
