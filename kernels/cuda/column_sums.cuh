// Sums over rows on the device, deterministic (kernels/cuda/column_sums_math.h: the scheme, a
// two-stage reduction over 32-column tiles and row chunks, no atomics). Launchers queue on
// `stream`; `scratch` is device memory of columns::sum_scratch_floats(columns) floats for a sum,
// pair_scratch_floats(columns) for LayerNorm's pair (with max_chunks passed on for the
// _in_chunks forms), its contents undefined on entry and on exit (one call at a time on the
// stream may use it).
#pragma once

#include <cuda_runtime.h>  // cudaStream_t

#include "kernels/act_ptr.h"  // ConstActPtr

namespace trident::kernels::cuda {

// sums[c] += sum_n x[n, c] over x[N, columns] (fp32, or 16-bit read as it is).
void add_column_sums(float* sums, ConstActPtr x, int N, int columns, float* scratch, cudaStream_t stream);

// LayerNorm's parameter gradients: dweight[c] += sum_n dout[n,c] * (inp[n,c] - mean[n]) * rstd[n],
// dbias[c] += sum_n dout[n,c]; dout and inp [N, C] in one storage.
void add_layernorm_parameter_gradients(float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                                       const float* mean, const float* rstd, int N, int C, float* scratch,
                                       cudaStream_t stream);

// out_a[c] += sum_r partial_a[r, c] and out_b[c] += sum_r partial_b[r, c] over `rows` rows of
// [rows, width] fp32 partials (a kernel's per-chunk sums, LayerNorm's fused backward), in one
// launch, each column's rows in a fixed order: 8 lanes striding over the rows, then the lanes in
// order. No scratch.
void add_partial_sums_pair(float* out_a, float* out_b, const float* partial_a, const float* partial_b, int rows,
                           int width, cudaStream_t stream);

// As above with another chunk count than columns::kChunks (the results depend on it): for the
// kernel playground only, which times other counts.
void add_column_sums_in_chunks(float* sums, ConstActPtr x, int N, int columns, float* scratch, int max_chunks,
                               cudaStream_t stream);
void add_layernorm_parameter_gradients_in_chunks(float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                                                 const float* mean, const float* rstd, int N, int C, float* scratch,
                                                 int max_chunks, cudaStream_t stream);

}  // namespace trident::kernels::cuda
