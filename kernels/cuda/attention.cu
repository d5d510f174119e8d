// Causal self-attention on cuBLAS products and row kernels: the schedule of
// attention_schedule.h (what runs when, on which views and scratch regions; the math; the
// 16-bit rounding of P and dS) with Ops that queue cuBLAS calls and the kernels below.
//
// The products are batched GEMMs over the B x NH grid of (batch element, head) matrices, on
// views of qkv (ld 3C), out/dout (ld C) and the scratch slots. Head h + 1 starts hs elements
// after head h in qkv and batch element b + 1 T rows after b: two strides, so one strided
// batched call cannot cover the grid. Without pointer arrays a product is min(B, NH) strided
// calls (the shorter axis looped, the longer batched: attention_schedule::strided_calls); given
// room for them, one pointer-array call after a small kernel writes them. The pointer arrays
// (run.attention_batching = pointers, the default since 2026-11-22) were the faster on one
// H100, most with causal row blocks (docs/performance.md). The calls: fp32 storage,
// cublasSgemmStridedBatched or cublasSgemmBatched (TF32 tensor cores once Backend::set_gemm_input_precision has promised rounded inputs);
// 16-bit storage, cublasGemmStridedBatchedEx or cublasGemmBatchedEx on the 16-bit operands
// with fp32 accumulation, the result stored as fp32 (S, dP) or rounded once (P V into out, the
// dqkv products).
//
// The row kernels use one block per row (b, h, t) of a [B*NH*T, T] stack, kRowThreads threads
// striding over its columns, block reductions for the max and the sums. Each reads columns
// t2 <= t and writes the columns below its causal block's end (attention_schedule::row_end: all
// T with one block), zeros past t.
//
// Forward and backward probabilities: backward recomputes S with the very GEMM calls forward
// made (same operands, shapes and destination: cuBLAS gives the same bits run to run on one
// GPU), then P = expf(S - lse), where forward normalised expf(S - max) / sum. The two agree to a
// few ulps (expf's 2 ulp each, the reciprocal and product, and the float rounding of
// lse = max + logf(sum), which moves P by |lse| * 2^-24 relative), as on the CPU; under 16-bit
// storage both are then rounded, so now and then one lands on the other side of a rounding
// midpoint. The softmax backward sums rowsum(P * dP) over the row, as the CPU twin does; it does
// not read out (kernels/cpu/attention.cpp says why the twins keep that sum).
#include <cmath>
#include <cstddef>
#include <type_traits>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/attention_schedule.h"  // attention_schedule::forward, backward, View, Op
#include "kernels/cuda/block_reduce.cuh"       // block_max, block_sum
#include "kernels/cuda/cuda_check.h"           // CUDA_CHECK_LAUNCH
#include "kernels/cuda/gemm.cuh"               // *_row_major_batched*, *_row_major_pointer_batched*
#include "kernels/cuda/launch_shape.cuh"       // kRowThreads
#include "kernels/stored_element.h"            // stored::with_policy, elements, common_storage

namespace trident::kernels::cuda {

namespace {

namespace as = attention_schedule;

// Row r of the stack is query position t = r % T; r is also its index in lse [B, NH, T].

// P[r, t2] = exp(S - max) / sum for t2 <= t, 0 beyond (up to row_end), stored in S's element; lse[r] =
// max + log(sum).
template <class S>
__global__ void causal_softmax_kernel(const float* scores, typename S::Element* probabilities, float* lse, int T,
                                      int blocks) {
  const std::size_t r = blockIdx.x;
  const int t = static_cast<int>(r % T);
  const int end = as::row_end(t, T, blocks);
  const float* row = scores + r * T;
  typename S::Element* p_row = probabilities + r * T;

  float local_max = -INFINITY;
  for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) local_max = fmaxf(local_max, row[t2]);
  const float row_max = block_max(local_max);

  float local_sum = 0.0f;
  for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) local_sum += expf(row[t2] - row_max);
  const float sum = block_sum(local_sum);  // >= 1: the max term is exp(0)
  const float inv_sum = 1.0f / sum;
  if (threadIdx.x == 0) lse[r] = row_max + logf(sum);

  for (int t2 = threadIdx.x; t2 < end; t2 += blockDim.x) {
    p_row[t2] = S::store(t2 <= t ? as::softmax_probability(row[t2], row_max, inv_sum) : 0.0f);
  }
}

// P[r, t2] = exp(S - lse[r]) for t2 <= t, 0 beyond (up to row_end), stored in S's element.
template <class S>
__global__ void causal_probabilities_kernel(const float* scores, typename S::Element* probabilities,
                                            const float* lse, int T, int blocks) {
  const std::size_t r = blockIdx.x;
  const int t = static_cast<int>(r % T);
  const int end = as::row_end(t, T, blocks);
  const float* row = scores + r * T;
  typename S::Element* p_row = probabilities + r * T;
  const float row_lse = lse[r];
  for (int t2 = threadIdx.x; t2 < end; t2 += blockDim.x) {
    p_row[t2] = S::store(t2 <= t ? as::probability(row[t2], row_lse) : 0.0f);
  }
}

// dS[r, t2] = scale * P * (dP - rowsum(P * dP)) for t2 <= t, 0 beyond (up to row_end), P recomputed from S and
// lse, stored in S's element over the row's own scores (attention_schedule.h: gradient_row says
// why a chunk's stores never touch a score a later chunk reads); within a chunk the barrier puts
// every read before any store. (For fp32 the element is the float itself.)
template <class S>
__global__ void causal_score_gradient_kernel(float* scores, const float* dprobabilities, const float* lse, int T,
                                             int blocks, float scale) {
  const std::size_t r = blockIdx.x;
  const int t = static_cast<int>(r % T);
  const int end = as::row_end(t, T, blocks);
  const float* s_row = scores + r * T;
  const float* dp_row = dprobabilities + r * T;
  const float row_lse = lse[r];

  float local_dot = 0.0f;
  for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) local_dot += as::probability(s_row[t2], row_lse) * dp_row[t2];
  const float dot = block_sum(local_dot);  // its barriers also end every read of the loop above

  typename S::Element* ds_row = as::gradient_row<typename S::Element>(scores, r, T);
  for (int base = 0; base < end; base += blockDim.x) {  // the same trip count in every thread
    const int t2 = base + static_cast<int>(threadIdx.x);
    const float ds = t2 <= t ? as::score_gradient(as::probability(s_row[t2], row_lse), dp_row[t2], dot, scale) : 0.0f;
    __syncthreads();
    if (t2 < end) ds_row[t2] = S::store(ds);
  }
}

cublasOperation_t cublas_op(as::Op op) { return op == as::Op::kN ? CUBLAS_OP_N : CUBLAS_OP_T; }

// The three pointer arrays of one pointer-array product: matrix i of A, B and C at pointers[i],
// pointers[count + i] and pointers[2 count + i] (attention_schedule::matrix_at, as the host
// replay computes them).
template <class E, class Out>
__global__ void matrix_pointers_kernel(void** pointers, as::View<const E> a, as::View<const E> b, as::View<Out> c,
                                       int heads, int count) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= count) return;
  pointers[i] = const_cast<E*>(as::matrix_at(a, i, heads));
  pointers[count + i] = const_cast<E*>(as::matrix_at(b, i, heads));
  pointers[2 * count + i] = as::matrix_at(c, i, heads);
}

// The schedule's Ops on the device. A product over the B x NH grid is min(B, NH) strided
// batched calls (strided_calls), or, given room for the pointer arrays (matrix_pointers) and
// matrices that all start on 16 bytes (aligned_matrices: not the fp32 T x T slots of an odd T,
// which take the strided calls), a small kernel that writes them and one pointer-array call. Each product's calls are
// queued after the previous product's on the one stream, so one set of arrays serves them all.
template <class S>
struct DeviceOps {
  using E = typename S::Element;
  cublasHandle_t cublas;
  cudaStream_t stream;
  void** matrix_pointers;  // 3 B NH device pointers, or null: strided calls

  template <class Out>
  void gemm(as::Op a, as::Op b, int M, int N, int K, float alpha, as::View<const E> A, as::View<const E> Bm,
            as::View<Out> Cm, as::Grid grid) {
    if (matrix_pointers != nullptr && as::aligned_matrices(A) && as::aligned_matrices(Bm) &&
        as::aligned_matrices(Cm)) {
      pointer_array_gemm(a, b, M, N, K, alpha, A, Bm, Cm, grid);
      return;
    }
    as::strided_calls(grid, A, Bm, Cm,
                      [&](as::Strided<const E> sa, as::Strided<const E> sb, as::Strided<Out> sc, int batch) {
                        if constexpr (std::is_same_v<E, float>) {
                          sgemm_row_major_batched(cublas, cublas_op(a), cublas_op(b), M, N, K, alpha, sa.data, sa.ld,
                                                  sa.stride, sb.data, sb.ld, sb.stride, 0.0f, sc.data, sc.ld,
                                                  sc.stride, batch);
                        } else {
                          const cudaDataType_t type = cuda_data_type(S::kPrecision);
                          gemm_row_major_batched_ex(cublas, cublas_op(a), cublas_op(b), M, N, K, alpha, sa.data,
                                                    type, sa.ld, sa.stride, sb.data, sb.ld, sb.stride, 0.0f,
                                                    sc.data, std::is_same_v<Out, float> ? CUDA_R_32F : type, sc.ld,
                                                    sc.stride, batch);
                        }
                      });
  }

  template <class Out>
  void pointer_array_gemm(as::Op a, as::Op b, int M, int N, int K, float alpha, as::View<const E> A,
                          as::View<const E> Bm, as::View<Out> Cm, as::Grid grid) {
    const int count = grid.count();
    constexpr int kThreads = 256;
    matrix_pointers_kernel<E, Out><<<static_cast<unsigned>((count + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        matrix_pointers, A, Bm, Cm, grid.heads, count);
    CUDA_CHECK_LAUNCH();
    void** const a_array = matrix_pointers;
    void** const b_array = matrix_pointers + count;
    void** const c_array = matrix_pointers + 2 * static_cast<std::size_t>(count);
    if constexpr (std::is_same_v<E, float>) {
      sgemm_row_major_pointer_batched(cublas, cublas_op(a), cublas_op(b), M, N, K, alpha,
                                      reinterpret_cast<const float* const*>(a_array), A.ld,
                                      reinterpret_cast<const float* const*>(b_array), Bm.ld, 0.0f,
                                      reinterpret_cast<float* const*>(c_array), Cm.ld, count);
    } else {
      const cudaDataType_t type = cuda_data_type(S::kPrecision);
      gemm_row_major_pointer_batched_ex(cublas, cublas_op(a), cublas_op(b), M, N, K, alpha, a_array, type, A.ld,
                                        b_array, Bm.ld, 0.0f, c_array,
                                        std::is_same_v<Out, float> ? CUDA_R_32F : type, Cm.ld, count);
    }
  }
  void softmax_rows(const float* scores, E* probabilities, float* lse, std::size_t rows, int T, int blocks) {
    causal_softmax_kernel<S><<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(scores, probabilities, lse, T,
                                                                                      blocks);
    CUDA_CHECK_LAUNCH();
  }
  void probability_rows(const float* scores, E* probabilities, const float* lse, std::size_t rows, int T,
                        int blocks) {
    causal_probabilities_kernel<S><<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(scores, probabilities,
                                                                                            lse, T, blocks);
    CUDA_CHECK_LAUNCH();
  }
  void score_gradient_rows(float* scores, const float* dprobabilities, const float* lse, std::size_t rows, int T,
                           int blocks, float scale) {
    causal_score_gradient_kernel<S><<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
        scores, dprobabilities, lse, T, blocks, scale);
    CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

std::size_t attention_scratch_size(int B, int T, int NH) { return 2 * as::region_floats(B, T, NH); }

std::size_t attention_matrix_pointers(int B, int NH) {
  return 3 * static_cast<std::size_t>(B) * static_cast<std::size_t>(NH);
}

void attention_forward(ActPtr out, float* lse, float* scratch, ConstActPtr qkv, int B, int T, int C, int NH,
                       cublasHandle_t cublas, cudaStream_t stream, const GemmAttentionOptions& options) {
  if (B == 0 || T == 0 || NH == 0) return;
  stored::with_policy(stored::common_storage({out, qkv}, "attention_forward"), [&](auto policy) {
    using S = decltype(policy);
    DeviceOps<S> ops{cublas, stream, options.matrix_pointers};
    as::forward<S>(ops, stored::elements<S>(out), lse, scratch, stored::elements<S>(qkv), B, T, C, NH,
                   options.causal_blocks);
  });
}

void attention_backward(ActPtr dqkv, float* scratch, ConstActPtr dout, ConstActPtr qkv, const float* lse, int B,
                        int T, int C, int NH, cublasHandle_t cublas, cudaStream_t stream,
                        const GemmAttentionOptions& options) {
  if (B == 0 || T == 0 || NH == 0) return;
  stored::with_policy(stored::common_storage({dqkv, dout, qkv}, "attention_backward"), [&](auto policy) {
    using S = decltype(policy);
    DeviceOps<S> ops{cublas, stream, options.matrix_pointers};
    as::backward<S>(ops, stored::elements<S>(dqkv), scratch, stored::elements<S>(dout), stored::elements<S>(qkv), lse,
                    B, T, C, NH, options.causal_blocks);
  });
}

}  // namespace trident::kernels::cuda
