// RoundedStorageBackend: 16-bit storage of activations on top of fp32 kernels.
//
// Wraps any backend and rounds what each kernel stores for the next one (its activation
// outputs and activation gradients) to bf16 or fp16, while the fp32 side of mixed precision
// stays fp32: LayerNorm statistics, attention's row log-sum-exp, token losses, the
// cross-entropy row statistics, the weight and bias gradients (accumulated in fp32, as
// Megatron-LM's main gradients), the gradient norm and AdamW. Every kernel still reads its
// inputs and accumulates in fp32, so the numbers
// are those of kernels that load 16-bit values, compute in fp32 and round once when storing:
// the semantics of the GPU's bf16/fp16 kernels, and the CPU twin they are tested against.
//
// `add` (the residual stream) is rounded; `accumulate` and `scale` are not: the model never
// applies them to activations, only the trainer to fp32 gradient buffers.
//
// The wrapper changes numbers, not speed or memory: the buffers stay float. It is how
// train.precision = bf16 | fp16 runs until the CUDA backend has kernels with 16-bit buffers
// (docs/model.md, "Mixed precision").
#pragma once

#include <string>

#include "kernels/forwarding_backend.h"

namespace trident::kernels {

class RoundedStorageBackend final : public ForwardingBackend {
 public:
  // inner must outlive this. precision: kBf16 or kFp16 (kFp32 would round nothing).
  RoundedStorageBackend(Backend& inner, Precision precision);
  Precision precision() const { return precision_; }
  std::string name() const override;

  // The calls that store activations or their gradients; every other call is forwarded as is.
  void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B, int T, int C,
                         int vocab_begin, int vocab_end) override;
  void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                      int OC) override;
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                       const float* weight, int N, int C, int OC) override;
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                         const float* bias, int N, int C) override;
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                          const float* weight, const float* mean, const float* rstd, int N, int C) override;
  // As its two parts: the residual is rounded when stored, and the LayerNorm reads the rounded
  // value (as a 16-bit kernel reads what it stored).
  void residual_layernorm_forward(float* residual, float* out, float* mean, float* rstd, const float* a, const float* b,
                                  const float* weight, const float* bias, int N, int C) override;
  void gelu_forward(float* out, const float* inp, std::size_t n) override;
  void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n) override;
  void attention_forward(float* out, float* lse, float* scratch, const float* qkv, int B, int T, int C,
                         int NH) override;
  void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* out,
                          const float* lse, int B, int T, int C, int NH) override;
  void cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets, float dloss, int N, int V,
                              int Vp) override;
  void cross_entropy_backward_sharded(float* dlogits, const float* logits, const int32_t* targets,
                                      const float* row_max, const float* row_sumexp, float dloss, int N, int V_local,
                                      int Vp_local, int vocab_begin) override;
  void add(float* out, const float* a, const float* b, std::size_t n) override;

 private:
  void store(float* x, std::size_t n) { inner().round_to_precision(x, x, n, precision_); }
  Precision precision_;
};

}  // namespace trident::kernels
