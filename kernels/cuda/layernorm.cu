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
//   dw += sum_rows dy * xhat,   db += sum_rows dy            column_sums.cuh: a two-stage
//                                                            reduction over row chunks (no
//                                                            atomics, deterministic)
// Splitting the row-local dx from the column sums dw/db keeps each kernel free of races.
// Every kernel is templated on the storage of its activations and weights
// (kernels/stored_element.h): fp32, or bf16/fp16 buffers read as they are and stored rounded
// once; mean, rstd, dweight and dbias are fp32 in every storage. The fused residual variant
// stores the rounded sum and normalises what it stored, as the two separate calls would.
#include <cstddef>

#include "kernels/cuda/block_reduce.cuh"  // block_sum
#include "kernels/cuda/column_sums.cuh"   // add_layernorm_parameter_gradients
#include "kernels/cuda/cuda_check.h"      // CUDA_CHECK_LAUNCH
#include "kernels/cuda/launch_shape.cuh"  // kRowThreads
#include "kernels/cuda/layernorm.cuh"
#include "kernels/stored_element.h"  // stored::with_policy, elements, common_storage

namespace trident::kernels::cuda {

namespace {

// Row n of the forward, by the whole block. Each thread reads x only at its own columns c =
// threadIdx.x + k * blockDim.x, so a row the same thread has just written needs no barrier.
template <class S, class E = typename S::Element>
__device__ void layernorm_forward_row(E* out, float* mean, float* rstd, const E* inp, const E* weight, const E* bias,
                                      int n, int C) {
  const E* x = inp + static_cast<std::size_t>(n) * C;
  E* y = out + static_cast<std::size_t>(n) * C;

  float sum = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) sum += S::load(x[c]);
  const float mu = block_sum(sum) / static_cast<float>(C);

  float sq = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const float d = S::load(x[c]) - mu;
    sq += d * d;
  }
  const float s = 1.0f / sqrtf(block_sum(sq) / static_cast<float>(C) + kLayerNormEps);

  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    y[c] = S::store((S::load(x[c]) - mu) * s * S::load(weight[c]) + S::load(bias[c]));
  }
  if (threadIdx.x == 0) {
    mean[n] = mu;
    rstd[n] = s;
  }
}

template <class S, class E = typename S::Element>
__global__ void layernorm_forward_kernel(E* out, float* mean, float* rstd, const E* inp, const E* weight,
                                         const E* bias, int C) {
  layernorm_forward_row<S>(out, mean, rstd, inp, weight, bias, blockIdx.x, C);
}

// residual = a + b on the row's columns (the same threads' columns as the normalisation), then
// the row's LayerNorm reading the residual just written.
template <class S, class E = typename S::Element>
__global__ void residual_layernorm_forward_kernel(E* residual, E* out, float* mean, float* rstd, const E* a,
                                                  const E* b, const E* weight, const E* bias, int C) {
  const std::size_t row = static_cast<std::size_t>(blockIdx.x) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    residual[row + c] = S::store(S::load(a[row + c]) + S::load(b[row + c]));
  }
  layernorm_forward_row<S>(out, mean, rstd, residual, weight, bias, blockIdx.x, C);
}

// dinp for one row per block.
template <class S, class E = typename S::Element>
__global__ void layernorm_backward_input_kernel(E* dinp, const E* dout, const E* inp, const E* weight,
                                                const float* mean, const float* rstd, int C) {
  const int n = blockIdx.x;
  const E* x = inp + static_cast<std::size_t>(n) * C;
  const E* dy = dout + static_cast<std::size_t>(n) * C;
  E* dx = dinp + static_cast<std::size_t>(n) * C;
  const float mu = mean[n];
  const float s = rstd[n];
  const float inv_c = 1.0f / static_cast<float>(C);

  float g_sum = 0.0f;
  float g_xhat_sum = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const float g = S::load(weight[c]) * S::load(dy[c]);
    g_sum += g;
    g_xhat_sum += g * (S::load(x[c]) - mu) * s;
  }
  const float g_mean = block_sum(g_sum) * inv_c;
  const float g_xhat_mean = block_sum(g_xhat_sum) * inv_c;

  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const float xhat = (S::load(x[c]) - mu) * s;
    dx[c] = S::store(S::load(dx[c]) + s * (S::load(weight[c]) * S::load(dy[c]) - g_mean - xhat * g_xhat_mean));
  }
}

}  // namespace

void layernorm_forward(ActPtr out, float* mean, float* rstd, ConstActPtr inp, ConstActPtr weight, ConstActPtr bias,
                       int N, int C, cudaStream_t stream) {
  if (N == 0 || C == 0) return;
  stored::with_policy(stored::common_storage({out, inp, weight, bias}, "layernorm_forward"), [&](auto policy) {
    using S = decltype(policy);
    layernorm_forward_kernel<S><<<N, kRowThreads, 0, stream>>>(stored::elements<S>(out), mean, rstd,
                                                               stored::elements<S>(inp), stored::elements<S>(weight),
                                                               stored::elements<S>(bias), C);
  });
  CUDA_CHECK_LAUNCH();
}

void residual_layernorm_forward(ActPtr residual, ActPtr out, float* mean, float* rstd, ConstActPtr a, ConstActPtr b,
                                ConstActPtr weight, ConstActPtr bias, int N, int C, cudaStream_t stream) {
  if (N == 0 || C == 0) return;
  const Precision storage =
      stored::common_storage({residual, out, a, b, weight, bias}, "residual_layernorm_forward");
  stored::with_policy(storage, [&](auto policy) {
    using S = decltype(policy);
    residual_layernorm_forward_kernel<S><<<N, kRowThreads, 0, stream>>>(
        stored::elements<S>(residual), stored::elements<S>(out), mean, rstd, stored::elements<S>(a),
        stored::elements<S>(b), stored::elements<S>(weight), stored::elements<S>(bias), C);
  });
  CUDA_CHECK_LAUNCH();
}

void layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                        ConstActPtr weight, const float* mean, const float* rstd, int N, int C, float* column_scratch,
                        cudaStream_t stream) {
  if (N == 0 || C == 0) return;
  stored::with_policy(stored::common_storage({dinp, dout, inp, weight}, "layernorm_backward"), [&](auto policy) {
    using S = decltype(policy);
    layernorm_backward_input_kernel<S><<<N, kRowThreads, 0, stream>>>(
        stored::elements<S>(dinp), stored::elements<S>(dout), stored::elements<S>(inp), stored::elements<S>(weight),
        mean, rstd, C);
  });
  CUDA_CHECK_LAUNCH();
  add_layernorm_parameter_gradients(dweight, dbias, dout, inp, mean, rstd, N, C, column_scratch, stream);
}

}  // namespace trident::kernels::cuda
