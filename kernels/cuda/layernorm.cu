// LayerNorm: y = (x - mu) * rstd * w + b with mu = mean(x), rstd = 1/sqrt(var(x) + eps) per row,
// the CPU twin's math (kernels/cpu/layernorm.cpp).
//
// Forward: one block per row (kRowThreads threads striding over the C channels). Two passes,
// mean then centred variance, each finished by block_sum: accurate without a compensated sum.
// Thread 0 saves mean and rstd for backward. The fused residual variant first writes the row's
// residual sum, then normalises it in the same block: one launch and one pass over the rows
// instead of the elementwise add's and the LayerNorm's.
// Backward, with xhat = (x - mu) * rstd and g = w * dy:
//   dx += rstd * (g - mean(g) - xhat * mean(g * xhat))     one block per row, two block sums
//   dw += sum_rows dy * xhat,   db += sum_rows dy            one thread per channel, rows in
//                                                            order (no atomics, deterministic)
// Splitting the row-local dx from the column sums dw/db keeps each kernel free of races.
#include <cstddef>

#include "kernels/cuda/block_reduce.cuh"  // block_sum
#include "kernels/cuda/cuda_check.h"      // CUDA_CHECK_LAUNCH
#include "kernels/cuda/launch_shape.cuh"  // kRowThreads, kColumnThreads, blocks_for
#include "kernels/cuda/layernorm.cuh"

namespace trident::kernels::cuda {

namespace {

// Row n of the forward, by the whole block. Each thread reads x only at its own columns c =
// threadIdx.x + k * blockDim.x, so a row the same thread has just written needs no barrier.
__device__ void layernorm_forward_row(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                                      const float* bias, int n, int C) {
  const float* x = inp + static_cast<std::size_t>(n) * C;
  float* y = out + static_cast<std::size_t>(n) * C;

  float sum = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) sum += x[c];
  const float mu = block_sum(sum) / static_cast<float>(C);

  float sq = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const float d = x[c] - mu;
    sq += d * d;
  }
  const float s = 1.0f / sqrtf(block_sum(sq) / static_cast<float>(C) + kLayerNormEps);

  for (int c = threadIdx.x; c < C; c += blockDim.x) y[c] = (x[c] - mu) * s * weight[c] + bias[c];
  if (threadIdx.x == 0) {
    mean[n] = mu;
    rstd[n] = s;
  }
}

__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp,
                                         const float* weight, const float* bias, int C) {
  layernorm_forward_row(out, mean, rstd, inp, weight, bias, blockIdx.x, C);
}

// residual = a + b on the row's columns (the same threads' columns as the normalisation), then
// the row's LayerNorm reading the residual just written.
__global__ void residual_layernorm_forward_kernel(float* residual, float* out, float* mean, float* rstd,
                                                  const float* a, const float* b, const float* weight,
                                                  const float* bias, int C) {
  const std::size_t row = static_cast<std::size_t>(blockIdx.x) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) residual[row + c] = a[row + c] + b[row + c];
  layernorm_forward_row(out, mean, rstd, residual, weight, bias, blockIdx.x, C);
}

// dinp for one row per block.
__global__ void layernorm_backward_input_kernel(float* dinp, const float* dout, const float* inp,
                                                const float* weight, const float* mean,
                                                const float* rstd, int C) {
  const int n = blockIdx.x;
  const float* x = inp + static_cast<std::size_t>(n) * C;
  const float* dy = dout + static_cast<std::size_t>(n) * C;
  float* dx = dinp + static_cast<std::size_t>(n) * C;
  const float mu = mean[n];
  const float s = rstd[n];
  const float inv_c = 1.0f / static_cast<float>(C);

  float g_sum = 0.0f;
  float g_xhat_sum = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const float g = weight[c] * dy[c];
    g_sum += g;
    g_xhat_sum += g * (x[c] - mu) * s;
  }
  const float g_mean = block_sum(g_sum) * inv_c;
  const float g_xhat_mean = block_sum(g_xhat_sum) * inv_c;

  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const float xhat = (x[c] - mu) * s;
    dx[c] += s * (weight[c] * dy[c] - g_mean - xhat * g_xhat_mean);
  }
}

// dweight, dbias: one thread per channel c, rows in order.
__global__ void layernorm_backward_params_kernel(float* dweight, float* dbias, const float* dout,
                                                 const float* inp, const float* mean,
                                                 const float* rstd, int N, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float dw = 0.0f;
  float db = 0.0f;
  for (int n = 0; n < N; n++) {
    const std::size_t i = static_cast<std::size_t>(n) * C + c;
    dw += dout[i] * (inp[i] - mean[n]) * rstd[n];
    db += dout[i];
  }
  dweight[c] += dw;
  dbias[c] += db;
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C, cudaStream_t stream) {
  if (N == 0 || C == 0) return;
  layernorm_forward_kernel<<<N, kRowThreads, 0, stream>>>(out, mean, rstd, inp, weight, bias, C);
  CUDA_CHECK_LAUNCH();
}

void residual_layernorm_forward(float* residual, float* out, float* mean, float* rstd, const float* a,
                                const float* b, const float* weight, const float* bias, int N, int C,
                                cudaStream_t stream) {
  if (N == 0 || C == 0) return;
  residual_layernorm_forward_kernel<<<N, kRowThreads, 0, stream>>>(residual, out, mean, rstd, a, b, weight, bias, C);
  CUDA_CHECK_LAUNCH();
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C, cudaStream_t stream) {
  if (N == 0 || C == 0) return;
  layernorm_backward_input_kernel<<<N, kRowThreads, 0, stream>>>(dinp, dout, inp, weight, mean,
                                                                 rstd, C);
  CUDA_CHECK_LAUNCH();
  layernorm_backward_params_kernel<<<blocks_for(C, kColumnThreads), kColumnThreads, 0, stream>>>(
      dweight, dbias, dout, inp, mean, rstd, N, C);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trident::kernels::cuda
