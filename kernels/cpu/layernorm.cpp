// LayerNorm: y = (x - mu) * rstd * w + b with mu = mean(x), rstd = 1/sqrt(var(x) + eps) per row.
//
// Forward: one row per task, two passes (mean, then centred variance), which is accurate
// without a compensated sum. Backward, with xhat = (x - mu) * rstd and g = w * dy:
//   dx += rstd * (g - mean(g) - xhat * mean(g * xhat))
//   dw += sum_rows dy * xhat,   db += sum_rows dy
// dx is row-local, so it runs parallel over rows. dw/db sum over rows, so they run in a second
// loop parallel over channel blocks: every thread owns its outputs (no races, no atomics, and
// a deterministic summation order), and the inner loop over a contiguous block vectorises.
// Both are compiled per ISA (simd_dispatch.h).
#include "kernels/cpu/layernorm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "kernels/cpu/simd_dispatch.h"  // TRIDENT_SIMD_CLONES

namespace trident::kernels::cpu {

namespace {
constexpr int kChannelBlock = 64;  // 4 cache lines per task: no false sharing on dw/db

// One row: y = layernorm(x), and the row's mean and rstd. Inlined into both entry points (and
// their per-ISA clones), so the fused one computes exactly what the plain one does.
[[gnu::always_inline]] inline void layernorm_row(float* y, float& mean, float& rstd, const float* x,
                                                 const float* weight, const float* bias, int C) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int c = 0; c < C; c++) sum += x[c];
  const float mu = sum / static_cast<float>(C);
  float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
  for (int c = 0; c < C; c++) {
    const float d = x[c] - mu;
    sq += d * d;
  }
  const float s = 1.0f / std::sqrt(sq / static_cast<float>(C) + kLayerNormEps);
#pragma omp simd
  for (int c = 0; c < C; c++) y[c] = (x[c] - mu) * s * weight[c] + bias[c];
  mean = mu;
  rstd = s;
}

}  // namespace

TRIDENT_SIMD_CLONES
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const std::size_t row = static_cast<std::size_t>(n) * C;
    layernorm_row(out + row, mean[n], rstd[n], inp + row, weight, bias, C);
  }
}

TRIDENT_SIMD_CLONES
void residual_layernorm_forward(float* residual, float* out, float* mean, float* rstd, const float* a,
                                const float* b, const float* weight, const float* bias, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const std::size_t row = static_cast<std::size_t>(n) * C;
    float* r = residual + row;
#pragma omp simd
    for (int c = 0; c < C; c++) r[c] = a[row + c] + b[row + c];
    layernorm_row(out + row, mean[n], rstd[n], r, weight, bias, C);
  }
}

TRIDENT_SIMD_CLONES
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, int N, int C) {
  const float inv_c = 1.0f / static_cast<float>(C);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float* x = inp + static_cast<std::size_t>(n) * C;
    const float* dy = dout + static_cast<std::size_t>(n) * C;
    float* dx = dinp + static_cast<std::size_t>(n) * C;
    const float mu = mean[n];
    const float s = rstd[n];
    float g_sum = 0.0f;
    float g_xhat_sum = 0.0f;
#pragma omp simd reduction(+ : g_sum, g_xhat_sum)
    for (int c = 0; c < C; c++) {
      const float g = weight[c] * dy[c];
      g_sum += g;
      g_xhat_sum += g * (x[c] - mu) * s;
    }
    const float g_mean = g_sum * inv_c;
    const float g_xhat_mean = g_xhat_sum * inv_c;
#pragma omp simd
    for (int c = 0; c < C; c++) {
      const float xhat = (x[c] - mu) * s;
      dx[c] += s * (weight[c] * dy[c] - g_mean - xhat * g_xhat_mean);
    }
  }

  const int blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < blocks; blk++) {
    const int c0 = blk * kChannelBlock;
    const int width = std::min(kChannelBlock, C - c0);
    float dw[kChannelBlock] = {};
    float db[kChannelBlock] = {};
    for (int n = 0; n < N; n++) {
      const float* x = inp + static_cast<std::size_t>(n) * C + c0;
      const float* dy = dout + static_cast<std::size_t>(n) * C + c0;
      const float mu = mean[n];
      const float s = rstd[n];
#pragma omp simd
      for (int j = 0; j < width; j++) {
        dw[j] += dy[j] * (x[j] - mu) * s;
        db[j] += dy[j];
      }
    }
    for (int j = 0; j < width; j++) {
      dweight[c0 + j] += dw[j];
      dbias[c0 + j] += db[j];
    }
  }
}

}  // namespace trident::kernels::cpu
