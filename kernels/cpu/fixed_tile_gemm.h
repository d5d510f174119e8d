// A row-major sgemm whose bits do not depend on the thread count.
//
// OpenBLAS splits a product among its threads and runs other kernel paths for the pieces (at the
// GPT-2 shapes, 6 to 9% of the outputs of a threaded sgemm differ in their last bits from the
// single-threaded one's), so a run with 2 threads per rank drifted from the same run with 1.
// Here the output is cut into tiles of a fixed size, whatever the thread count, and each tile is
// one single-threaded sgemm (OpenBLAS runs single-threaded inside an OpenMP parallel region):
// every output element comes from the same call on the same operands with any number of threads.
#pragma once

namespace trident::kernels::cpu {

// Tile of the output, in rows and columns. At GPT-2 124M's shapes the tiled step is about 5%
// slower than OpenBLAS's own threading (docs/performance.md, "Matmuls in fixed tiles"): the
// price of the same bits with any thread count.
inline constexpr int kGemmTileRows = 256;
inline constexpr int kGemmTileCols = 256;
// An output of fewer tiles than this is cut finer, halving the longer side down to this side.
inline constexpr int kGemmMinTiles = 8;
inline constexpr int kGemmMinTileSide = 64;

// C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, row-major, as cblas_sgemm with
// CblasRowMajor; op transposes when the flag is set. Parallel over the tiles of C.
void fixed_tile_sgemm(bool transpose_a, bool transpose_b, int M, int N, int K, float alpha, const float* A, int lda,
                      const float* B, int ldb, float beta, float* C, int ldc);

}  // namespace trident::kernels::cpu
