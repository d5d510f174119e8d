#include "kernels/rounded_storage_backend.h"

#include <stdexcept>

namespace trident::kernels {

namespace {
std::size_t product(int a, int b) { return static_cast<std::size_t>(a) * static_cast<std::size_t>(b); }
}  // namespace

RoundedStorageBackend::RoundedStorageBackend(Backend& inner, Precision precision)
    : ForwardingBackend(inner), precision_(precision) {
  if (precision == Precision::kFp32) throw std::logic_error("RoundedStorageBackend: fp32 storage rounds nothing");
  // Every GEMM input is now a stored (rounded) activation or the rounded compute copy of a
  // weight: the inner backend may use tensor-core math that is exact on them.
  inner.set_gemm_input_precision(precision);
}

std::string RoundedStorageBackend::name() const {
  return inner().name() + ", " + precision_name(precision_) + " storage emulated (fp32 kernels, rounded outputs)";
}

void RoundedStorageBackend::embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                                              int B, int T, int C, int vocab_begin, int vocab_end) {
  inner().embedding_forward(out, tokens, wte, wpe, B, T, C, vocab_begin, vocab_end);
  store(out, product(B * T, C));
}

void RoundedStorageBackend::matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                                           int N, int C, int OC) {
  inner().matmul_forward(out, inp, weight, bias, N, C, OC);
  store(out, product(N, OC));
}

void RoundedStorageBackend::matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                            const float* inp, const float* weight, int N, int C, int OC) {
  inner().matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  if (dinp != nullptr) store(dinp, product(N, C));  // dweight, dbias: fp32 gradients
}

void RoundedStorageBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                              const float* weight, const float* bias, int N, int C) {
  inner().layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
  store(out, product(N, C));  // mean, rstd: fp32 statistics
}

void RoundedStorageBackend::residual_layernorm_forward(float* residual, float* out, float* mean, float* rstd,
                                                       const float* a, const float* b, const float* weight,
                                                       const float* bias, int N, int C) {
  add(residual, a, b, product(N, C));
  layernorm_forward(out, mean, rstd, residual, weight, bias, N, C);
}

void RoundedStorageBackend::layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                               const float* inp, const float* weight, const float* mean,
                                               const float* rstd, int N, int C) {
  inner().layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  store(dinp, product(N, C));
}

void RoundedStorageBackend::gelu_forward(float* out, const float* inp, std::size_t n) {
  inner().gelu_forward(out, inp, n);
  store(out, n);
}

void RoundedStorageBackend::gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n) {
  inner().gelu_backward(dinp, inp, dout, n);
  store(dinp, n);
}

void RoundedStorageBackend::attention_forward(float* out, float* lse, float* scratch, const float* qkv, int B,
                                              int T, int C, int NH) {
  inner().attention_forward(out, lse, scratch, qkv, B, T, C, NH);
  // lse: an fp32 statistic, as the LayerNorm mean and rstd. Rounded to 8 bits it would move every
  // recomputed probability by up to |lse| * 2^-9 relative, a coherent error across the row.
  store(out, product(B * T, C));
}

void RoundedStorageBackend::attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                                               const float* out, const float* lse, int B, int T, int C, int NH) {
  inner().attention_backward(dqkv, scratch, dout, qkv, out, lse, B, T, C, NH);
  store(dqkv, product(B * T, 3 * C));
}

void RoundedStorageBackend::cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets,
                                                   float dloss, int N, int V, int Vp) {
  inner().cross_entropy_backward(dlogits, logits, targets, dloss, N, V, Vp);
  store(dlogits, product(N, Vp));
}

void RoundedStorageBackend::cross_entropy_backward_sharded(float* dlogits, const float* logits,
                                                           const int32_t* targets, const float* row_max,
                                                           const float* row_sumexp, float dloss, int N, int V_local,
                                                           int Vp_local, int vocab_begin) {
  inner().cross_entropy_backward_sharded(dlogits, logits, targets, row_max, row_sumexp, dloss, N, V_local, Vp_local,
                                        vocab_begin);
  store(dlogits, product(N, Vp_local));
}

void RoundedStorageBackend::add(float* out, const float* a, const float* b, std::size_t n) {
  inner().add(out, a, b, n);
  store(out, n);
}

}  // namespace trident::kernels
