#include "kernels/cpu/fixed_tile_gemm.h"

#include <cblas.h>

#include <algorithm>
#include <cstddef>

namespace trident::kernels::cpu {

void fixed_tile_sgemm(bool transpose_a, bool transpose_b, int M, int N, int K, float alpha, const float* A, int lda,
                      const float* B, int ldb, float beta, float* C, int ldc) {
  // Small outputs get smaller tiles, so that the threads have several each: the tile size is a
  // function of the shape alone, never of the thread count.
  int tile_rows = kGemmTileRows, tile_cols = kGemmTileCols;
  auto tiles = [&] { return ((M + tile_rows - 1) / tile_rows) * ((N + tile_cols - 1) / tile_cols); };
  while (tiles() < kGemmMinTiles && (tile_rows > kGemmMinTileSide || tile_cols > kGemmMinTileSide)) {
    if (tile_rows >= tile_cols && tile_rows > kGemmMinTileSide) {
      tile_rows /= 2;
    } else {
      tile_cols /= 2;
    }
  }
  const int row_tiles = (M + tile_rows - 1) / tile_rows;
  const int col_tiles = (N + tile_cols - 1) / tile_cols;
  const CBLAS_TRANSPOSE op_a = transpose_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE op_b = transpose_b ? CblasTrans : CblasNoTrans;
  // Tiles of unequal cost (the last row and column may be short): dynamic, which changes only
  // which thread computes a tile, never its bits.
#pragma omp parallel for schedule(dynamic)
  for (int tile = 0; tile < row_tiles * col_tiles; ++tile) {
    const int i0 = (tile / col_tiles) * tile_rows;
    const int j0 = (tile % col_tiles) * tile_cols;
    const int rows = std::min(tile_rows, M - i0);
    const int cols = std::min(tile_cols, N - j0);
    // op(A)'s rows i0..: A's rows (NoTrans) or columns (Trans); op(B)'s columns j0.. likewise.
    const float* a = transpose_a ? A + i0 : A + static_cast<std::size_t>(i0) * lda;
    const float* b = transpose_b ? B + static_cast<std::size_t>(j0) * ldb : B + j0;
    cblas_sgemm(CblasRowMajor, op_a, op_b, rows, cols, K, alpha, a, lda, b, ldb, beta,
                C + static_cast<std::size_t>(i0) * ldc + j0, ldc);
  }
}

}  // namespace trident::kernels::cpu
