// CpuBackend: forwards every Backend call to the free function of its operation, and owns the
// thread budget (OpenMP for our loops, OpenBLAS for the GEMMs; both set once, here).
#include "kernels/cpu/cpu_backend.h"

#include <cblas.h>  // openblas_set_num_threads
#include <omp.h>    // omp_set_num_threads

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "kernels/cpu/adamw.h"          // adamw_update
#include "kernels/cpu/attention.h"      // attention_forward, attention_backward
#include "kernels/cpu/cross_entropy.h"  // cross_entropy_forward/backward, sharded pieces
#include "kernels/cpu/elementwise.h"    // fill_zero, add, accumulate, scale, sum_squares
#include "kernels/cpu/embedding.h"      // embedding_forward, embedding_backward
#include "kernels/cpu/gelu.h"           // gelu_forward, gelu_backward
#include "kernels/cpu/layernorm.h"      // layernorm_forward, layernorm_backward
#include "kernels/cpu/matmul.h"         // matmul_forward, matmul_backward
#include "kernels/out_of_memory.h"      // OutOfMemory, mib

namespace trident::kernels::cpu {

namespace {
constexpr std::size_t kAlignment = 64;  // a cache line, and the widest SIMD register

// aligned_alloc wants a size that is a non-zero multiple of the alignment.
void* aligned_bytes(std::size_t bytes) {
  bytes = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (bytes == 0) bytes = kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, bytes);
  if (ptr == nullptr) throw OutOfMemory("out of host memory: an allocation of " + mib(bytes) + " failed");
  return ptr;
}

}  // namespace

CpuBackend::CpuBackend(int threads) : threads_(threads) {
  if (threads <= 0) throw std::invalid_argument("CpuBackend: threads must be > 0");
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

std::string CpuBackend::name() const {
  return "cpu (OpenBLAS, " + std::to_string(threads_) + (threads_ == 1 ? " thread)" : " threads)");
}

float* CpuBackend::allocate(std::size_t count) {
  return static_cast<float*>(aligned_bytes(count * sizeof(float)));
}

void CpuBackend::release(float* ptr) { std::free(ptr); }

int32_t* CpuBackend::allocate_tokens(std::size_t count) {
  return static_cast<int32_t*>(aligned_bytes(count * sizeof(int32_t)));
}

void CpuBackend::release_tokens(int32_t* ptr) { std::free(ptr); }

void CpuBackend::copy_tokens_to_device(int32_t* dst, const int32_t* host_src, std::size_t count) {
  if (count > 0) std::memcpy(dst, host_src, count * sizeof(int32_t));
}

void CpuBackend::fill_zero(ActPtr ptr, std::size_t count) {
  if (ptr.is_fp32()) {
    cpu::fill_zero(ptr.f32(), count);
  } else if (count > 0) {
    std::memset(ptr.get(), 0, ptr.bytes(count));  // +0 is all zero bits in bf16 and fp16 too
  }
}

void CpuBackend::copy_to_device(float* dst, const float* host_src, std::size_t count) {
  if (count > 0) std::memcpy(dst, host_src, count * sizeof(float));
}

void CpuBackend::copy_to_host(float* host_dst, const float* src, std::size_t count) {
  if (count > 0) std::memcpy(host_dst, src, count * sizeof(float));
}

void CpuBackend::copy_bytes_to_device(void* dst, const void* host_src, std::size_t bytes) {
  if (bytes > 0) std::memcpy(dst, host_src, bytes);
}

void CpuBackend::copy_bytes_to_host(void* host_dst, const void* src, std::size_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, src, bytes);
}

void CpuBackend::embedding_forward(ActPtr out, const int32_t* tokens, ConstActPtr wte,
                                   ConstActPtr wpe, int B, int T, int C, int vocab_begin,
                                   int vocab_end) {
  cpu::embedding_forward(out.f32(), tokens, wte.f32(), wpe.f32(), B, T, C, vocab_begin, vocab_end);
}

void CpuBackend::embedding_backward(float* dwte, float* dwpe, ConstActPtr dout,
                                    const int32_t* tokens, int B, int T, int C, int vocab_begin,
                                    int vocab_end) {
  cpu::embedding_backward(dwte, dwpe, dout.f32(), tokens, B, T, C, vocab_begin, vocab_end);
}

void CpuBackend::matmul_forward(ActPtr out, ConstActPtr inp, ConstActPtr weight,
                                ConstActPtr bias, int N, int C, int OC) {
  cpu::matmul_forward(out.f32(), inp.f32(), weight.f32(), bias.f32(), N, C, OC);
}

void CpuBackend::matmul_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout,
                                 ConstActPtr inp, ConstActPtr weight, int N, int C, int OC) {
  cpu::matmul_backward(dinp.f32(), dweight, dbias, dout.f32(), inp.f32(), weight.f32(), N, C, OC);
}

void CpuBackend::layernorm_forward(ActPtr out, float* mean, float* rstd, ConstActPtr inp,
                                   ConstActPtr weight, ConstActPtr bias, int N, int C) {
  cpu::layernorm_forward(out.f32(), mean, rstd, inp.f32(), weight.f32(), bias.f32(), N, C);
}

void CpuBackend::residual_layernorm_forward(ActPtr residual, ActPtr out, float* mean, float* rstd, ConstActPtr a,
                                            ConstActPtr b, ConstActPtr weight, ConstActPtr bias, int N, int C) {
  cpu::residual_layernorm_forward(residual.f32(), out.f32(), mean, rstd, a.f32(), b.f32(), weight.f32(), bias.f32(), N, C);
}

void CpuBackend::layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout,
                                    ConstActPtr inp, ConstActPtr weight, const float* mean,
                                    const float* rstd, int N, int C) {
  cpu::layernorm_backward(dinp.f32(), dweight, dbias, dout.f32(), inp.f32(), weight.f32(), mean, rstd, N, C);
}

void CpuBackend::gelu_forward(ActPtr out, ConstActPtr inp, std::size_t n) {
  cpu::gelu_forward(out.f32(), inp.f32(), n);
}

void CpuBackend::gelu_backward(ActPtr dinp, ConstActPtr inp, ConstActPtr dout, std::size_t n) {
  cpu::gelu_backward(dinp.f32(), inp.f32(), dout.f32(), n);
}

void CpuBackend::attention_forward(ActPtr out, float* lse, float* scratch, ConstActPtr qkv,
                                   int B, int T, int C, int NH) {
  cpu::attention_forward(out.f32(), lse, scratch, qkv.f32(), B, T, C, NH);
}

void CpuBackend::attention_backward(ActPtr dqkv, float* scratch, ConstActPtr dout,
                                    ConstActPtr qkv, ConstActPtr /*out*/, const float* lse,
                                    int B, int T, int C, int NH) {
  cpu::attention_backward(dqkv.f32(), scratch, dout.f32(), qkv.f32(), lse, B, T, C, NH);
}

std::size_t CpuBackend::attention_scratch_size(int B, int T, int NH) const {
  return cpu::attention_scratch_size(B, T, NH);
}

void CpuBackend::cross_entropy_forward(float* losses, float* row_max, float* row_sumexp, ConstActPtr logits,
                                       const int32_t* targets, int N, int V, int Vp) {
  cpu::cross_entropy_forward(losses, row_max, row_sumexp, logits.f32(), targets, N, V, Vp);
}

void CpuBackend::cross_entropy_backward(ActPtr dlogits, ConstActPtr logits,
                                        const int32_t* targets, float dloss, int N, int V,
                                        int Vp) {
  cpu::cross_entropy_backward(dlogits.f32(), logits.f32(), targets, dloss, N, V, Vp);
}

void CpuBackend::cross_entropy_shard_statistics(float* stats, ConstActPtr logits, const int32_t* targets, int N,
                                                int V_local, int Vp_local, int vocab_begin) {
  cpu::cross_entropy_shard_statistics(stats, logits.f32(), targets, N, V_local, Vp_local, vocab_begin);
}

void CpuBackend::cross_entropy_combine_shards(float* row_max, float* row_sumexp, float* target_logit,
                                              const float* gathered, int N, int shards) {
  cpu::cross_entropy_combine_shards(row_max, row_sumexp, target_logit, gathered, N, shards);
}

void CpuBackend::cross_entropy_backward_sharded(ActPtr dlogits, ConstActPtr logits,
                                                const int32_t* targets, const float* row_max,
                                                const float* row_sumexp, float dloss, int N,
                                                int V_local, int Vp_local, int vocab_begin) {
  cpu::cross_entropy_backward_sharded(dlogits.f32(), logits.f32(), targets, row_max, row_sumexp, dloss, N,
                                      V_local, Vp_local, vocab_begin);
}

void CpuBackend::add(ActPtr out, ConstActPtr a, ConstActPtr b, std::size_t n) {
  cpu::add(out.f32(), a.f32(), b.f32(), n);
}

void CpuBackend::accumulate(float* dst, const float* src, std::size_t n) {
  cpu::accumulate(dst, src, n);
}

void CpuBackend::scale(float* x, float factor, std::size_t n) { cpu::scale(x, factor, n); }

double CpuBackend::sum_squares(const float* x, std::size_t n) { return cpu::sum_squares(x, n); }

void CpuBackend::round_to_precision(float* dst, const float* src, std::size_t n, Precision precision) {
  cpu::round_to_precision(dst, src, n, precision);
}

void CpuBackend::narrow(ActPtr dst, const float* src, std::size_t n) {
  if (dst.is_fp32()) {
    if (n > 0) std::memcpy(dst.f32(), src, n * sizeof(float));
    return;
  }
  cpu::encode_16bit(dst.bits16(), src, n, dst.storage());
}

void CpuBackend::widen(float* dst, ConstActPtr src, std::size_t n) {
  if (src.is_fp32()) {
    if (n > 0) std::memcpy(dst, src.f32(), n * sizeof(float));
    return;
  }
  cpu::decode_16bit(dst, src.bits16(), n, src.storage());
}

void CpuBackend::adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n,
                              const AdamWArgs& args) {
  cpu::adamw_update(param, grad, m, v, n, args);
}

void CpuBackend::adamw_update_master(float* master, ActPtr compute, const float* grad, float* m, float* v,
                                     std::size_t n, const AdamWArgs& args, Precision compute_precision) {
  cpu::adamw_update_master(master, compute, grad, m, v, n, args, compute_precision);
}

}  // namespace trident::kernels::cpu
