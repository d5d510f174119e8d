// Causal self-attention, per (batch b, head h), with hs = C/NH and scale = 1/sqrt(hs), the CPU
// twin's math (kernels/cpu/attention.cpp):
//   S = scale * Q K^T,  P = softmax_row(S) with S[t,t2] = -inf for t2 > t,  O = P V,
//   lse[t] = log sum_{t2<=t} exp(S[t,t2])   (kept instead of P: P = exp(S - lse))
// Backward (dO given), P recomputed from Q, K and lse:
//   dV = P^T dO,   dP = dO V^T,  dS = P * (dP - rowsum(P * dP)) * scale,
//   dQ = dS K,     dK = dS^T Q   (dqkv overwritten)
//
// This is the GEMM path: the T x T matrices go through global memory, but only in the shared
// workspace `scratch` of one layer at a time, no longer in a per-layer activation. A fused
// flash kernel (perf/kernels/attention_forward.cu and attention_backward.cu, variant 2, hs = 64:
// online softmax in forward, P rebuilt tile by tile from lse in backward, nothing T x T in
// global memory) will replace it once it is measured on a GPU; the Backend contract (out and
// lse kept, scratch sized by the backend, out passed to backward for D = rowsum(dO * O)) now
// allows that without touching the model.
//
// Design: the products are cuBLAS GEMMs on strided views of qkv, exactly the CPU twin's
// cblas_sgemm calls through sgemm_row_major_batched (gemm.cu): Q, K, V of head h at batch b
// start at qkv + b*T*3C + h*hs (+ C for K, + 2C for V) with leading dimension 3C; out and dout
// have leading dimension C. scratch holds two regions of B*NH*T*T floats, P (the scores, then
// the probabilities) and dS (dP, then dS in place); each (b, h) owns the T x T slot
// (b*NH + h)*T*T of each region. One batched GEMM covers the NH heads of one batch element (head
// h+1 starts hs floats after head h in qkv and T*T floats after it in a region), so each product
// is B calls of NH GEMMs.
// The GEMMs compute the full T x T square (no causal blocking yet: simple first); the row
// kernels then only read columns t2 <= t and write exact zeros above the diagonal, so P = 0
// and dS = 0 there and the full-square products P V, P^T dO, dS K, dS^T Q are the causal ones.
// The row kernels use one block per row (b, h, t) of a T x T slot, kRowThreads threads striding
// over its columns, block reductions for the max and the sums; each thread reads and writes
// only its own columns, so rewriting the row in place is race-free.
//
// Forward and backward probabilities: backward recomputes S with the very GEMM calls forward
// made (same operands, shapes and destination: cuBLAS GEMMs give the same bits run to run on
// one GPU, and would otherwise differ by their own rounding only), then P = expf(S - lse), where
// forward normalised expf(S - max) / sum. The two agree to a few ulps (expf's 2 ulp each, the
// reciprocal and product, and the float rounding of lse = max + logf(sum), which moves P by
// |lse| * 2^-24 relative), as on the CPU.
// The softmax backward sums rowsum(P * dP) over the row, as the CPU twin does; it does not read
// out (kernels/cpu/attention.cpp says why the twins keep that sum).
#include <cmath>
#include <cstddef>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/block_reduce.cuh"  // block_max, block_sum
#include "kernels/cuda/cuda_check.h"      // CUDA_CHECK_LAUNCH
#include "kernels/cuda/gemm.cuh"          // sgemm_row_major_batched
#include "kernels/cuda/launch_shape.cuh"  // kRowThreads

namespace trident::kernels::cuda {

namespace {

// In place on one row of scores S (already scaled): P[t2] = exp(S[t2] - max) / sum for
// t2 <= t, 0 beyond; lse[r] = max + log(sum). Row r of the [B*NH*T, T] stack is query position
// t = r % T, and r is also its index in lse [B, NH, T].
__global__ void causal_softmax_kernel(float* probabilities, float* lse, int T) {
  const std::size_t r = blockIdx.x;
  const int t = static_cast<int>(r % T);
  float* row = probabilities + r * T;

  float local_max = -INFINITY;
  for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) local_max = fmaxf(local_max, row[t2]);
  const float row_max = block_max(local_max);

  float local_sum = 0.0f;
  for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) {
    const float e = expf(row[t2] - row_max);
    row[t2] = e;
    local_sum += e;
  }
  const float sum = block_sum(local_sum);  // >= 1: the max term is exp(0)
  const float inv_sum = 1.0f / sum;
  if (threadIdx.x == 0) lse[r] = row_max + logf(sum);

  for (int t2 = threadIdx.x; t2 < T; t2 += blockDim.x) {
    row[t2] = t2 <= t ? row[t2] * inv_sum : 0.0f;
  }
}

// In place on one row of recomputed scores S: P[t2] = exp(S[t2] - lse[r]) for t2 <= t, 0
// beyond (the full-square products that follow rely on the zeros). Rows as above.
__global__ void causal_probabilities_kernel(float* probabilities, const float* lse, int T) {
  const std::size_t r = blockIdx.x;
  const int t = static_cast<int>(r % T);
  float* row = probabilities + r * T;
  const float row_lse = lse[r];
  for (int t2 = threadIdx.x; t2 < T; t2 += blockDim.x) {
    row[t2] = t2 <= t ? expf(row[t2] - row_lse) : 0.0f;
  }
}

// In place on one row of dP: dS[t2] = scale * P[t2] * (dP[t2] - sum_t2' P dP) for t2 <= t,
// 0 beyond (the scale folds in the derivative of S = scale * Q K^T).
__global__ void causal_softmax_backward_kernel(float* dscores, const float* probabilities, int T,
                                               float scale) {
  const std::size_t r = blockIdx.x;
  const int t = static_cast<int>(r % T);
  const float* p_row = probabilities + r * T;
  float* ds_row = dscores + r * T;

  float local_dot = 0.0f;
  for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) local_dot += p_row[t2] * ds_row[t2];
  const float dot = block_sum(local_dot);

  for (int t2 = threadIdx.x; t2 < T; t2 += blockDim.x) {
    ds_row[t2] = t2 <= t ? scale * p_row[t2] * (ds_row[t2] - dot) : 0.0f;
  }
}

// The strided views of one batch element b.
struct HeadViews {
  std::size_t qkv_offset;   // Q of head 0 at b; K, V are + C, + 2C; head h is + h*hs
  std::size_t out_offset;   // out/dout of head 0 at b; head h is + h*hs
  std::size_t slot_offset;  // slot of head 0 at b in a scratch region; head h is + h*T*T
};

HeadViews views_of(int b, int T, int C, int NH) {
  const auto tt = static_cast<std::size_t>(T) * T;
  return {static_cast<std::size_t>(b) * T * 3 * C, static_cast<std::size_t>(b) * T * C,
          static_cast<std::size_t>(b) * NH * tt};
}

// Floats of one scratch region (P, or dS): a T x T slot per (batch, head).
std::size_t region_floats(int B, int T, int NH) {
  return static_cast<std::size_t>(B) * NH * T * T;
}

// Rows of the [B*NH*T, T] stack of a region: one row kernel block each.
unsigned stacked_rows(int B, int T, int NH) {
  return static_cast<unsigned>(static_cast<std::size_t>(B) * NH * T);
}

// S = scale Q K^T, the full T x T square per head, into the P region. Forward and backward
// both call this, so the recomputed S has the same bits.
void scores(float* p_region, const float* qkv, int B, int T, int C, int NH, float scale,
            cublasHandle_t cublas) {
  const int hs = C / NH;
  const int ld_qkv = 3 * C;
  const long long tt = static_cast<long long>(T) * T;
  for (int b = 0; b < B; b++) {
    const HeadViews w = views_of(b, T, C, NH);
    const float* q = qkv + w.qkv_offset;
    const float* k = q + C;
    sgemm_row_major_batched(cublas, CUBLAS_OP_N, CUBLAS_OP_T, T, T, hs, scale, q, ld_qkv, hs, k,
                            ld_qkv, hs, 0.0f, p_region + w.slot_offset, T, tt, NH);
  }
}

}  // namespace

std::size_t attention_scratch_size(int B, int T, int NH) { return 2 * region_floats(B, T, NH); }

void attention_forward(float* out, float* lse, float* scratch, const float* qkv, int B, int T,
                       int C, int NH, cublasHandle_t cublas, cudaStream_t stream) {
  if (B == 0 || T == 0 || NH == 0) return;
  const int hs = C / NH;
  const int ld_qkv = 3 * C;
  const long long tt = static_cast<long long>(T) * T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  float* p = scratch;  // the P region; forward needs no other
  // S = scale * Q K^T   [T, T] per head, then P and lse in place
  scores(p, qkv, B, T, C, NH, scale, cublas);
  causal_softmax_kernel<<<stacked_rows(B, T, NH), kRowThreads, 0, stream>>>(p, lse, T);
  CUDA_CHECK_LAUNCH();
  for (int b = 0; b < B; b++) {
    const HeadViews w = views_of(b, T, C, NH);
    const float* v = qkv + w.qkv_offset + 2 * C;
    // O = P V   [T, hs] per head, into the head's channels of out
    sgemm_row_major_batched(cublas, CUBLAS_OP_N, CUBLAS_OP_N, T, hs, T, 1.0f, p + w.slot_offset, T,
                            tt, v, ld_qkv, hs, 0.0f, out + w.out_offset, C, hs, NH);
  }
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* lse, int B, int T, int C, int NH, cublasHandle_t cublas,
                        cudaStream_t stream) {
  if (B == 0 || T == 0 || NH == 0) return;
  const int hs = C / NH;
  const int ld_qkv = 3 * C;
  const long long tt = static_cast<long long>(T) * T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  float* p_region = scratch;
  float* ds_region = scratch + region_floats(B, T, NH);
  // P = exp(S - lse), recomputed   [T, T] per head
  scores(p_region, qkv, B, T, C, NH, scale, cublas);
  causal_probabilities_kernel<<<stacked_rows(B, T, NH), kRowThreads, 0, stream>>>(p_region, lse,
                                                                                 T);
  CUDA_CHECK_LAUNCH();
  for (int b = 0; b < B; b++) {
    const HeadViews w = views_of(b, T, C, NH);
    const float* v = qkv + w.qkv_offset + 2 * C;
    // dP = dO V^T   [T, T] per head, into the dS region
    sgemm_row_major_batched(cublas, CUBLAS_OP_N, CUBLAS_OP_T, T, T, hs, 1.0f, dout + w.out_offset,
                            C, hs, v, ld_qkv, hs, 0.0f, ds_region + w.slot_offset, T, tt, NH);
  }
  causal_softmax_backward_kernel<<<stacked_rows(B, T, NH), kRowThreads, 0, stream>>>(
      ds_region, p_region, T, scale);
  CUDA_CHECK_LAUNCH();
  for (int b = 0; b < B; b++) {
    const HeadViews w = views_of(b, T, C, NH);
    const float* q = qkv + w.qkv_offset;
    const float* k = q + C;
    float* dq = dqkv + w.qkv_offset;
    float* dk = dq + C;
    float* dv = dq + 2 * C;
    const float* ds = ds_region + w.slot_offset;
    const float* p = p_region + w.slot_offset;
    const float* dout_b = dout + w.out_offset;
    // Written with beta = 0, never read (Backend::attention_backward overwrites dqkv).
    // dQ = dS K   [T, hs]
    sgemm_row_major_batched(cublas, CUBLAS_OP_N, CUBLAS_OP_N, T, hs, T, 1.0f, ds, T, tt, k, ld_qkv,
                            hs, 0.0f, dq, ld_qkv, hs, NH);
    // dK = dS^T Q   [T, hs]
    sgemm_row_major_batched(cublas, CUBLAS_OP_T, CUBLAS_OP_N, T, hs, T, 1.0f, ds, T, tt, q, ld_qkv,
                            hs, 0.0f, dk, ld_qkv, hs, NH);
    // dV = P^T dO   [T, hs]
    sgemm_row_major_batched(cublas, CUBLAS_OP_T, CUBLAS_OP_N, T, hs, T, 1.0f, p, T, tt, dout_b, C,
                            hs, 0.0f, dv, ld_qkv, hs, NH);
  }
}

}  // namespace trident::kernels::cuda
