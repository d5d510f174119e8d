// Causal self-attention, per (batch b, head h), with hs = C/NH and scale = 1/sqrt(hs):
//   S = scale * Q K^T,  P = softmax_row(S) with S[t,t2] = -inf for t2 > t,  O = P V
// Backward (dO given):
//   dV += P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(P * dP)) * scale,
//   dQ += dS K,    dK += dS^T Q
//
// Design: the (b,h) pairs are independent, so one OpenMP task per pair (collapse(2)); each task
// writes only its own head's channels of out/dqkv and its own T x T slot of att/scratch, so
// nothing races and no atomics are needed. Inside a task the products are cblas_sgemm calls on
// strided views (ld = 3C for q/k/v, C for out/dout): OpenBLAS runs them single-threaded inside
// the parallel region, and its runtime-dispatched SIMD kernels beat hand loops at -O2.
// Causality is exploited by blocks of kBlock rows: row block [r0,r1) only needs key columns
// [0,r1), so about half the T x T work is skipped; the few entries above the diagonal inside a
// block are computed, then zeroed by the softmax (forward) or by P = 0 (backward). The softmax
// exponentials are exp_approx (vectorised, 2 ulp).
#include "kernels/cpu/attention.h"

#include <cblas.h>  // cblas_sgemm

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "kernels/cpu/vector_math.h"  // exp_approx, max_of

namespace trident::kernels::cpu {

namespace {
constexpr int kBlock = 64;  // rows per causal block: small waste above the diagonal, big GEMMs
}  // namespace

std::size_t attention_scratch_size(int B, int T, int NH) {
  return static_cast<std::size_t>(B) * NH * T * T;
}

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const int ld_qkv = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < NH; h++) {
      const float* q = qkv + static_cast<std::size_t>(b) * T * ld_qkv + h * hs;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* p = att + (static_cast<std::size_t>(b) * NH + h) * T * T;
      float* o = out + static_cast<std::size_t>(b) * T * C + h * hs;
      for (int r0 = 0; r0 < T; r0 += kBlock) {
        const int r1 = std::min(r0 + kBlock, T);
        const int rows = r1 - r0;
        float* p_blk = p + static_cast<std::size_t>(r0) * T;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, r1, hs, scale,
                    q + static_cast<std::size_t>(r0) * ld_qkv, ld_qkv, k, ld_qkv, 0.0f, p_blk, T);
        for (int t = r0; t < r1; t++) {
          float* row = p + static_cast<std::size_t>(t) * T;
          const float row_max = max_of(row, t + 1);
          float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
          for (int t2 = 0; t2 <= t; t2++) {
            const float e = exp_approx(row[t2] - row_max);
            row[t2] = e;
            sum += e;
          }
          const float inv_sum = 1.0f / sum;
#pragma omp simd
          for (int t2 = 0; t2 <= t; t2++) row[t2] *= inv_sum;
          std::fill(row + t + 1, row + T, 0.0f);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hs, r1, 1.0f, p_blk, T, v,
                    ld_qkv, 0.0f, o + static_cast<std::size_t>(r0) * C, C);
      }
    }
  }
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const int ld_qkv = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < NH; h++) {
      const std::size_t qkv_offset = static_cast<std::size_t>(b) * T * ld_qkv + h * hs;
      const float* q = qkv + qkv_offset;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* dq = dqkv + qkv_offset;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      const std::size_t slot = (static_cast<std::size_t>(b) * NH + h) * T * T;
      const float* p = att + slot;
      float* ds = scratch + slot;  // holds dP, then dS, in place
      const float* dout_bh = dout + static_cast<std::size_t>(b) * T * C + h * hs;

      // Row blocks: dP = dO V^T, then dS, then dQ += dS K.
      for (int r0 = 0; r0 < T; r0 += kBlock) {
        const int r1 = std::min(r0 + kBlock, T);
        const int rows = r1 - r0;
        float* ds_blk = ds + static_cast<std::size_t>(r0) * T;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, r1, hs, 1.0f,
                    dout_bh + static_cast<std::size_t>(r0) * C, C, v, ld_qkv, 0.0f, ds_blk, T);
        for (int t = r0; t < r1; t++) {
          const float* p_row = p + static_cast<std::size_t>(t) * T;
          float* ds_row = ds + static_cast<std::size_t>(t) * T;
          float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
          for (int t2 = 0; t2 <= t; t2++) dot += p_row[t2] * ds_row[t2];
#pragma omp simd
          for (int t2 = 0; t2 <= t; t2++) ds_row[t2] = scale * p_row[t2] * (ds_row[t2] - dot);
          std::fill(ds_row + t + 1, ds_row + r1, 0.0f);  // above the diagonal in this block
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hs, r1, 1.0f, ds_blk, T, k,
                    ld_qkv, 1.0f, dq + static_cast<std::size_t>(r0) * ld_qkv, ld_qkv);
      }
      // Column blocks [c0,c1): only rows t >= c0 have non-zero P/dS there.
      //   dV[c0:c1] += P[c0:T, c0:c1]^T dO[c0:T];  dK[c0:c1] += dS[c0:T, c0:c1]^T Q[c0:T].
      for (int c0 = 0; c0 < T; c0 += kBlock) {
        const int cols = std::min(c0 + kBlock, T) - c0;
        const std::size_t corner = static_cast<std::size_t>(c0) * T + c0;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, hs, T - c0, 1.0f, p + corner,
                    T, dout_bh + static_cast<std::size_t>(c0) * C, C, 1.0f,
                    dv + static_cast<std::size_t>(c0) * ld_qkv, ld_qkv);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, hs, T - c0, 1.0f, ds + corner,
                    T, q + static_cast<std::size_t>(c0) * ld_qkv, ld_qkv, 1.0f,
                    dk + static_cast<std::size_t>(c0) * ld_qkv, ld_qkv);
      }
    }
  }
}

}  // namespace trident::kernels::cpu
