// CudaBackend's operations other than the linear layers: each call forwarded to its launcher
// (kernels/cuda/<operation>.cu) on the backend's stream, with the workspace it needs.
// Ordering and ownership: cuda_backend.cu.
#include <cuda_runtime.h>  // cudaMemcpyAsync

#include <cstddef>

#include "kernels/cuda/adamw.cuh"            // adamw_update
#include "kernels/cuda/attention.cuh"        // attention_forward/backward, attention_scratch_size
#include "kernels/cuda/cross_entropy.cuh"    // cross_entropy_forward/backward, sharded pieces
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"         // CUDA_CHECK, CUBLAS_CHECK
#include "kernels/cuda/elementwise.cuh"      // add, accumulate, scale, sum_squares
#include "kernels/cuda/embedding.cuh"        // embedding_forward, embedding_backward
#include "kernels/cuda/flash_attention.cuh"  // flash_attention_forward/backward, its scratch size
#include "kernels/cuda/flash_attention_mma.cuh"  // FlashMmaOptions
#include "kernels/cuda/gelu.cuh"             // gelu_forward, gelu_backward
#include "kernels/cuda/layernorm.cuh"        // layernorm_forward, layernorm_backward
#include "kernels/cuda/wire_cast.cuh"        // encode_16bit, decode_16bit (16-bit activation storage)

namespace trident::kernels::cuda {

void CudaBackend::embedding_forward(ActPtr out, const int32_t* tokens, ConstActPtr wte,
                                    ConstActPtr wpe, int B, int T, int C, int vocab_begin,
                                    int vocab_end) {
  cuda::embedding_forward(out, tokens, wte, wpe, B, T, C, vocab_begin, vocab_end, stream_);
}

void CudaBackend::embedding_backward(float* dwte, float* dwpe, ConstActPtr dout,
                                     const int32_t* tokens, int B, int T, int C, int vocab_begin,
                                     int vocab_end) {
  cuda::embedding_backward(dwte, dwpe, dout, tokens, B, T, C, vocab_begin, vocab_end,
                           workspace(cuda::embedding_backward_scratch_bytes(B * T)), stream_);
}

void CudaBackend::layernorm_forward(ActPtr out, float* mean, float* rstd, ConstActPtr inp,
                                    ConstActPtr weight, ConstActPtr bias, int N, int C) {
  cuda::layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, stream_);
}

void CudaBackend::residual_layernorm_forward(ActPtr residual, ActPtr out, float* mean, float* rstd, ConstActPtr a,
                                             ConstActPtr b, ConstActPtr weight, ConstActPtr bias, int N, int C) {
  cuda::residual_layernorm_forward(residual, out, mean, rstd, a, b, weight, bias, N, C, stream_);
}

void CudaBackend::layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout,
                                     ConstActPtr inp, ConstActPtr weight, const float* mean,
                                     const float* rstd, int N, int C) {
  cuda::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C,
                           column_scratch(cuda::layernorm_backward_scratch_floats(C)), stream_,
                           cuda::LayerNormRows::kWarpPerRow, layernorm_sums_);
}

void CudaBackend::gelu_forward(ActPtr out, ConstActPtr inp, std::size_t n) {
  cuda::gelu_forward(out, inp, n, stream_);
}

void CudaBackend::gelu_backward(ActPtr dinp, ConstActPtr inp, ConstActPtr dout, std::size_t n) {
  cuda::gelu_backward(dinp, inp, dout, n, stream_);
}

void CudaBackend::attention_forward(ActPtr out, float* lse, float* scratch, ConstActPtr qkv,
                                    int B, int T, int C, int NH) {
  if (attention_ == AttentionKernel::kFlash) {
    cuda::flash_attention_forward(out, lse, qkv, B, T, C, NH, stream_, flash_options());
    return;
  }
  cuda::attention_forward(out, lse, scratch, qkv, B, T, C, NH, cublas_, stream_, gemm_attention_options(B, NH));
}

void CudaBackend::attention_backward(ActPtr dqkv, float* scratch, ConstActPtr dout,
                                     ConstActPtr qkv, ConstActPtr out, const float* lse,
                                     int B, int T, int C, int NH) {
  if (attention_ == AttentionKernel::kFlash) {
    // The flash identity rowsum(P * dP) = dout . out needs the forward's out.
    cuda::flash_attention_backward(dqkv, scratch, dout, qkv, out, lse, B, T, C, NH, stream_, flash_options());
    return;
  }
  cuda::attention_backward(dqkv, scratch, dout, qkv, lse, B, T, C, NH, cublas_, stream_,
                           gemm_attention_options(B, NH));
}

cuda::FlashMmaOptions CudaBackend::flash_options() const {
  return {.dq = flash_dq_,
          .block_order = flash_block_order_,
          .forward_products = flash_forward_products_,
          .forward_warpgroups = flash_forward_products_ == FlashProducts::kWarpgroup ? flash_warpgroups_ : 1,
          .backward_products = flash_backward_products_,
          .backward_warpgroups = flash_backward_products_ == FlashProducts::kWarpgroup ? flash_warpgroups_ : 1,
          .forward_schedule = flash_forward_schedule_,
          .backward_schedule = flash_backward_schedule_};
}

GemmAttentionOptions CudaBackend::gemm_attention_options(int B, int NH) {
  GemmAttentionOptions options;
  options.causal_blocks = attention_blocks_;  // clamped by the schedule (causal_blocks)
  if (attention_batching_ == AttentionBatching::kPointers) {
    // Each product writes its pointers and then reads them, in stream order, so one array
    // serves every product of every layer.
    options.matrix_pointers =
        static_cast<void**>(workspace(cuda::attention_matrix_pointers(B, NH) * sizeof(void*)));
  }
  return options;
}

std::size_t CudaBackend::attention_scratch_size(int B, int T, int NH) const {
  return attention_ == AttentionKernel::kFlash ? cuda::flash_attention_scratch_size(B, T, NH, flash_dq_)
                                               : cuda::attention_scratch_size(B, T, NH);
}

void CudaBackend::cross_entropy_forward(float* losses, float* row_max, float* row_sumexp, ConstActPtr logits,
                                        const int32_t* targets, int N, int V, int Vp) {
  cuda::cross_entropy_forward(losses, row_max, row_sumexp, logits, targets, N, V, Vp, stream_);
}

void CudaBackend::cross_entropy_backward(ActPtr dlogits, ConstActPtr logits,
                                         const int32_t* targets, float dloss, int N, int V,
                                         int Vp) {
  cuda::cross_entropy_backward(dlogits, logits, targets, dloss, N, V, Vp, stream_);
}

void CudaBackend::cross_entropy_forward_backward(float* losses, float* row_max, float* row_sumexp, ActPtr dlogits,
                                                 ConstActPtr logits, const int32_t* targets, float dloss, int N,
                                                 int V, int Vp) {
  cuda::cross_entropy_forward_backward(losses, row_max, row_sumexp, dlogits, logits, targets, dloss, N, V, Vp, stream_,
                                       cross_entropy_loads_);
}

void CudaBackend::cross_entropy_shard_statistics(float* stats, ConstActPtr logits, const int32_t* targets, int N,
                                                 int V_local, int Vp_local, int vocab_begin) {
  cuda::cross_entropy_shard_statistics(stats, logits, targets, N, V_local, Vp_local, vocab_begin, stream_);
}

void CudaBackend::cross_entropy_combine_shards(float* row_max, float* row_sumexp, float* target_logit,
                                               const float* gathered, int N, int shards) {
  cuda::cross_entropy_combine_shards(row_max, row_sumexp, target_logit, gathered, N, shards, stream_);
}

void CudaBackend::cross_entropy_backward_sharded(ActPtr dlogits, ConstActPtr logits,
                                                 const int32_t* targets, const float* row_max,
                                                 const float* row_sumexp, float dloss, int N,
                                                 int V_local, int Vp_local, int vocab_begin) {
  cuda::cross_entropy_backward_sharded(dlogits, logits, targets, row_max, row_sumexp, dloss, N,
                                       V_local, Vp_local, vocab_begin, stream_, cross_entropy_loads_);
}

void CudaBackend::add(ActPtr out, ConstActPtr a, ConstActPtr b, std::size_t n) {
  cuda::add(out, a, b, n, stream_);
}

void CudaBackend::accumulate(float* dst, const float* src, std::size_t n) {
  cuda::accumulate(dst, src, n, stream_);
}

void CudaBackend::scale(float* x, float factor, std::size_t n) {
  cuda::scale(x, factor, n, stream_);
}

double CudaBackend::sum_squares(const float* x, std::size_t n) {
  return cuda::sum_squares(x, n, sum_squares_scratch_, stream_);
}

double CudaBackend::sum_squares_of_ranges(const float* base, const ElementRange* ranges, std::size_t count) {
  // The ranges' totals in the workspace: nothing else holds it during the call.
  range_totals_.resize(count);
  return cuda::sum_squares_of_ranges(base, ranges, count, sum_squares_scratch_,
                                     static_cast<double*>(workspace(count * sizeof(double))), range_totals_.data(),
                                     stream_);
}

void CudaBackend::round_to_precision(float* dst, const float* src, std::size_t n, Precision precision) {
  cuda::round_to_precision(dst, src, n, precision, stream_);
}

void CudaBackend::narrow(ActPtr dst, const float* src, std::size_t n) {
  if (n == 0) return;
  if (dst.is_fp32()) {
    CUDA_CHECK(cudaMemcpyAsync(dst.f32(), src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
    return;
  }
  cuda::encode_16bit(dst.bits16(), src, n, dst.storage(), stream_);
}

void CudaBackend::widen(float* dst, ConstActPtr src, std::size_t n) {
  if (n == 0) return;
  if (src.is_fp32()) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src.f32(), n * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
    return;
  }
  cuda::decode_16bit(dst, src.bits16(), n, src.storage(), stream_);
}

void CudaBackend::adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n,
                               const AdamWArgs& args) {
  cuda::adamw_update(param, grad, m, v, n, args, stream_, adamw_loads_);
}

void CudaBackend::adamw_update_master(float* master, ActPtr compute, const float* grad, float* m, float* v,
                                      std::size_t n, const AdamWArgs& args, Precision compute_precision) {
  cuda::adamw_update_master(master, compute, grad, m, v, n, args, compute_precision, stream_, adamw_loads_);
}

}  // namespace trident::kernels::cuda
