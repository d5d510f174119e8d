// Causal self-attention, per (batch b, head h), with hs = C/NH and scale = 1/sqrt(hs):
//   S = scale * Q K^T,  P = softmax_row(S) with S[t,t2] = -inf for t2 > t,  O = P V,
//   lse[t] = log sum_{t2<=t} exp(S[t,t2])   (kept instead of P: P = exp(S - lse))
// Backward (dO given), P recomputed from Q, K and lse:
//   dV = P^T dO,   dP = dO V^T,  dS = P * (dP - rowsum(P * dP)) * scale,
//   dQ = dS K,     dK = dS^T Q   (dqkv overwritten)
//
// Design: the (b,h) pairs are independent, so one OpenMP task per pair (collapse(2)); each task
// writes only its own head's channels of out/dqkv, its own rows of lse and its own slots of
// scratch (P, then dS, each T x T), so nothing races and no atomics are needed. Inside a task
// the products are cblas_sgemm calls on strided views (ld = 3C for q/k/v, C for out/dout):
// OpenBLAS runs them single-threaded inside the parallel region, and its runtime-dispatched SIMD
// kernels beat hand loops at -O2. Causality is exploited by blocks of kBlock rows: row block
// [r0,r1) only needs key columns [0,r1), so about half the T x T work is skipped; the few
// entries above the diagonal inside a block are computed, then zeroed (P = 0, dS = 0 there).
// The row passes between the GEMMs are compiled per ISA (simd_dispatch.h): at small head sizes
// their exponentials, which backward computes too, cost as much as the GEMMs at SSE2 width (the
// quickstart's shape, B 4, T 64, hs 16, one thread: backward 357 us at SSE2, 294 us per ISA).
//
// Forward and backward probabilities: backward recomputes S with the very call forward made
// (same operands, sizes and destination in the P slot; a single-threaded OpenBLAS sgemm is
// deterministic), so S is bit-identical. Forward normalises P = exp(S - max) / sum; backward
// takes P = exp(S - lse) with lse = max + log(sum) rounded to float. Both use exp_approx
// (vectorised, 2 ulp; both row passes run the clone of the same ISA, picked once per process),
// so the two P agree to a few ulps: 2 + 2 for the exponentials, 1 for the reciprocal and
// product, and the rounding of lse, half an ulp of |lse|, which shifts the exponent's argument
// and so moves P by |lse| * 2^-24 relative (|lse| / 2 ulps: a few for the |lse| of O(1) to
// O(10) that softmax scores give). std::exp in one and exp_approx in the other would add a few
// more; mixing them would gain nothing.
//
// The backward's row sum rowsum(P * dP) is taken from P and dP here, not from the identity
// rowsum(P * dP)[t] = dO[t] . O[t] that Backend::attention_backward allows (its `out`): the sum
// runs over a row this loop already holds in cache, and it keeps the twin's dS free of the
// 16-bit rounding of the stored out under bf16/fp16 storage. The CUDA GEMM path sums the same
// way, so the twins agree; a flash kernel, which never holds a whole row, will use the identity.
#include "kernels/cpu/attention.h"

#include <cblas.h>  // cblas_sgemm

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "kernels/cpu/simd_dispatch.h"  // TRIDENT_SIMD_CLONES
#include "kernels/cpu/vector_math.h"    // exp_approx, max_of

namespace trident::kernels::cpu {

namespace {

constexpr int kBlock = 64;  // rows per causal block: small waste above the diagonal, big GEMMs

// Where head h of batch element b lives in each buffer.
struct HeadOffsets {
  std::size_t qkv;    // its q in qkv and dq in dqkv (k, v: + C, + 2C), leading dimension 3C
  std::size_t out;    // its channels in out and dout, leading dimension C
  std::size_t lse;    // its rows in lse [B, NH, T]
  std::size_t slots;  // its two T x T slots in scratch: P at + 0, dS at + T*T
};

HeadOffsets head_offsets(int b, int h, int T, int C, int NH) {
  const int hs = C / NH;
  const std::size_t head = static_cast<std::size_t>(b) * NH + h;
  const auto tt = static_cast<std::size_t>(T) * T;
  return {static_cast<std::size_t>(b) * T * 3 * C + static_cast<std::size_t>(h) * hs,
          static_cast<std::size_t>(b) * T * C + static_cast<std::size_t>(h) * hs,
          head * T, head * 2 * tt};
}

// Rows [r0, r1) of S = scale Q K^T over key columns [0, r1), into the same rows of the T x T
// matrix s. Forward and backward both call this, so the recomputed S has the same bits.
void block_scores(float* s, const float* q, const float* k, int r0, int r1, int T, int hs,
                  int ld_qkv, float scale) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, hs, scale,
              q + static_cast<std::size_t>(r0) * ld_qkv, ld_qkv, k, ld_qkv, 0.0f,
              s + static_cast<std::size_t>(r0) * T, T);
}

// Row t of scores in place -> probabilities exp(s - max) / sum on columns t2 <= t, exact zeros
// on (t, r1) (the rest of the block's columns, which P V reads). Returns the row's lse.
TRIDENT_SIMD_CLONES
float softmax_row(float* row, int t, int r1) {
  const float row_max = max_of(row, t + 1);
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int t2 = 0; t2 <= t; t2++) {
    const float e = exp_approx(row[t2] - row_max);
    row[t2] = e;
    sum += e;
  }
  const float inv_sum = 1.0f / sum;  // sum >= 1: the max term is exp(0)
#pragma omp simd
  for (int t2 = 0; t2 <= t; t2++) row[t2] *= inv_sum;
  std::fill(row + t + 1, row + r1, 0.0f);
  return row_max + std::log(sum);
}

// Row t of scores in place -> P = exp(s - lse) on columns t2 <= t, exact zeros on (t, r1).
TRIDENT_SIMD_CLONES
void probabilities_row(float* row, int t, int r1, float lse) {
#pragma omp simd
  for (int t2 = 0; t2 <= t; t2++) row[t2] = exp_approx(row[t2] - lse);
  std::fill(row + t + 1, row + r1, 0.0f);
}

// Row t of dP in place -> dS = scale * P * (dP - rowsum(P * dP)) on t2 <= t, zeros on (t, r1).
TRIDENT_SIMD_CLONES
void score_gradient_row(float* ds_row, const float* p_row, int t, int r1, float scale) {
  float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
  for (int t2 = 0; t2 <= t; t2++) dot += p_row[t2] * ds_row[t2];
#pragma omp simd
  for (int t2 = 0; t2 <= t; t2++) ds_row[t2] = scale * p_row[t2] * (ds_row[t2] - dot);
  std::fill(ds_row + t + 1, ds_row + r1, 0.0f);
}

}  // namespace

std::size_t attention_scratch_size(int B, int T, int NH) {
  return 2 * static_cast<std::size_t>(B) * NH * T * T;
}

void attention_forward(float* out, float* lse, float* scratch, const float* qkv, int B, int T,
                       int C, int NH) {
  const int hs = C / NH;
  const int ld_qkv = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < NH; h++) {
      const HeadOffsets at = head_offsets(b, h, T, C, NH);
      const float* q = qkv + at.qkv;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* p = scratch + at.slots;  // the P slot, as in backward
      float* lse_bh = lse + at.lse;
      float* o = out + at.out;
      for (int r0 = 0; r0 < T; r0 += kBlock) {
        const int r1 = std::min(r0 + kBlock, T);
        block_scores(p, q, k, r0, r1, T, hs, ld_qkv, scale);
        for (int t = r0; t < r1; t++) {
          lse_bh[t] = softmax_row(p + static_cast<std::size_t>(t) * T, t, r1);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, hs, r1, 1.0f,
                    p + static_cast<std::size_t>(r0) * T, T, v, ld_qkv, 0.0f,
                    o + static_cast<std::size_t>(r0) * C, C);
      }
    }
  }
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* lse, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const int ld_qkv = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < NH; h++) {
      const HeadOffsets at = head_offsets(b, h, T, C, NH);
      const float* q = qkv + at.qkv;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* dq = dqkv + at.qkv;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      float* p = scratch + at.slots;
      float* ds = p + static_cast<std::size_t>(T) * T;  // holds dP, then dS, in place
      const float* lse_bh = lse + at.lse;
      const float* dout_bh = dout + at.out;

      // Row blocks: P recomputed, dP = dO V^T, then dS, then dQ = dS K. Each row block of dQ,
      // and below each column block of dK and dV, is one GEMM's whole output: written with
      // beta = 0, never read (Backend::attention_backward overwrites dqkv).
      for (int r0 = 0; r0 < T; r0 += kBlock) {
        const int r1 = std::min(r0 + kBlock, T);
        const int rows = r1 - r0;
        block_scores(p, q, k, r0, r1, T, hs, ld_qkv, scale);
        for (int t = r0; t < r1; t++) {
          probabilities_row(p + static_cast<std::size_t>(t) * T, t, r1, lse_bh[t]);
        }
        float* ds_blk = ds + static_cast<std::size_t>(r0) * T;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, r1, hs, 1.0f,
                    dout_bh + static_cast<std::size_t>(r0) * C, C, v, ld_qkv, 0.0f, ds_blk, T);
        for (int t = r0; t < r1; t++) {
          score_gradient_row(ds + static_cast<std::size_t>(t) * T,
                             p + static_cast<std::size_t>(t) * T, t, r1, scale);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hs, r1, 1.0f, ds_blk, T, k,
                    ld_qkv, 0.0f, dq + static_cast<std::size_t>(r0) * ld_qkv, ld_qkv);
      }
      // Column blocks [c0,c1): only rows t >= c0 have non-zero P/dS there, and every such
      // entry was written above (row t's block ends at or after c1).
      //   dV[c0:c1] = P[c0:T, c0:c1]^T dO[c0:T];  dK[c0:c1] = dS[c0:T, c0:c1]^T Q[c0:T].
      for (int c0 = 0; c0 < T; c0 += kBlock) {
        const int cols = std::min(c0 + kBlock, T) - c0;
        const std::size_t corner = static_cast<std::size_t>(c0) * T + c0;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, hs, T - c0, 1.0f, p + corner,
                    T, dout_bh + static_cast<std::size_t>(c0) * C, C, 0.0f,
                    dv + static_cast<std::size_t>(c0) * ld_qkv, ld_qkv);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, hs, T - c0, 1.0f, ds + corner,
                    T, q + static_cast<std::size_t>(c0) * ld_qkv, ld_qkv, 0.0f,
                    dk + static_cast<std::size_t>(c0) * ld_qkv, ld_qkv);
      }
    }
  }
}

}  // namespace trident::kernels::cpu
