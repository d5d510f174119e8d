// RoundedStorageBackend: 16-bit storage of activations on top of fp32 kernels.
//
// Wraps any backend and gives every kernel call bf16 or fp16 storage semantics: what a kernel
// stores for the next one (its activation outputs and activation gradients) is rounded to the
// 16-bit format, while the fp32 side of mixed precision stays fp32: LayerNorm statistics,
// attention's row log-sum-exp, token losses, the cross-entropy row statistics, the weight and
// bias gradients (accumulated in fp32, as Megatron-LM's main gradients), the gradient norm and
// AdamW. Every kernel reads its inputs and accumulates in fp32 and rounds once when storing:
// the semantics of the GPU's bf16/fp16 kernels, and the CPU twin they are tested against.
//
// The activations themselves (kernels/act_ptr.h) come in either of two forms, and a call may
// mix them:
//   - 16-bit buffers (the model's activation arena under train.precision = bf16 | fp16,
//     src/model/gpt.h): half the memory. The operands are widened into an fp32
//     workspace of this backend, the inner fp32 kernel runs there, and what it wrote is narrowed
//     back. The workspace is the largest call's 16-bit operands (staging_floats()), grown on
//     first use.
//   - fp32 buffers holding rounded values (emulated storage: the model's logits, and the twin
//     the 16-bit buffers are tested against): the inner kernel runs in place and its outputs
//     are rounded.
// Both give the same bits. A call whose operands are all 16-bit buffers goes straight to the inner
// backend when it computes on 16 bits itself in that kernel family (Backend::native_16bit: the
// CUDA backend, in every family), without the widening: the same semantics (fp32 math, one
// rounding per stored value), and for the matmuls another summation order; the CUDA GEMM
// attention also rounds its probabilities and score gradient to 16 bits between its products
// (kernels/cuda/attention_schedule.h). The weights a kernel reads come the same two ways: the
// model's 16-bit compute copy (widened like an activation operand, or read natively) or fp32
// buffers holding rounded values (read in place). On the CUDA backend the model's logits are
// 16-bit too, so nothing is widened there; on the CPU, fp32 logits are read and rounded in place.
//
// `add` (the residual stream) is rounded; `accumulate` and `scale` are not: the model never
// applies them to activations, only the trainer to fp32 gradient buffers.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>

#include "kernels/forwarding_backend.h"

namespace trident::kernels {

class RoundedStorageBackend final : public ForwardingBackend {
 public:
  // inner must outlive this. precision: kBf16 or kFp16 (kFp32 would round nothing).
  RoundedStorageBackend(Backend& inner, Precision precision);
  ~RoundedStorageBackend() override;
  RoundedStorageBackend(const RoundedStorageBackend&) = delete;
  RoundedStorageBackend& operator=(const RoundedStorageBackend&) = delete;

  Precision precision() const { return precision_; }
  std::string name() const override;
  // Floats of fp32 workspace held for widened 16-bit operands (activations and weights): the
  // most one call has needed.
  std::size_t staging_floats() const { return workspace_floats_; }

  // The calls that read or store activations; every other call is forwarded as is.
  void embedding_forward(ActPtr out, const int32_t* tokens, ConstActPtr wte, ConstActPtr wpe, int B, int T, int C,
                         int vocab_begin, int vocab_end) override;
  void embedding_backward(float* dwte, float* dwpe, ConstActPtr dout, const int32_t* tokens, int B, int T, int C,
                          int vocab_begin, int vocab_end) override;
  void matmul_forward(ActPtr out, ConstActPtr inp, ConstActPtr weight, ConstActPtr bias, int N, int C,
                      int OC) override;
  void matmul_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                       ConstActPtr weight, int N, int C, int OC) override;
  // Passed on when both families are native and every operand is 16-bit (the inner backend may
  // fuse them); otherwise as their two parts on this object, each widened as it needs.
  void matmul_gelu_forward(ActPtr out, ActPtr pre, ConstActPtr inp, ConstActPtr weight, ConstActPtr bias, int N,
                           int C, int OC) override;
  void matmul_backward_through_gelu(ActPtr dpre, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                                    ConstActPtr weight, ConstActPtr pre, int N, int C, int OC) override;
  void layernorm_forward(ActPtr out, float* mean, float* rstd, ConstActPtr inp, ConstActPtr weight,
                         ConstActPtr bias, int N, int C) override;
  void layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                          ConstActPtr weight, const float* mean, const float* rstd, int N, int C) override;
  // As its two parts: the residual is rounded when stored, and the LayerNorm reads the rounded
  // value (as a 16-bit kernel reads what it stored).
  void residual_layernorm_forward(ActPtr residual, ActPtr out, float* mean, float* rstd, ConstActPtr a, ConstActPtr b,
                                  ConstActPtr weight, ConstActPtr bias, int N, int C) override;
  void gelu_forward(ActPtr out, ConstActPtr inp, std::size_t n) override;
  void gelu_backward(ActPtr dinp, ConstActPtr inp, ConstActPtr dout, std::size_t n) override;
  void attention_forward(ActPtr out, float* lse, float* scratch, ConstActPtr qkv, int B, int T, int C,
                         int NH) override;
  void attention_backward(ActPtr dqkv, float* scratch, ConstActPtr dout, ConstActPtr qkv, ConstActPtr out,
                          const float* lse, int B, int T, int C, int NH) override;
  void cross_entropy_forward(float* losses, float* row_max, float* row_sumexp, ConstActPtr logits,
                             const int32_t* targets, int N, int V, int Vp) override;
  void cross_entropy_backward(ActPtr dlogits, ConstActPtr logits, const int32_t* targets, float dloss, int N, int V,
                              int Vp) override;
  void cross_entropy_shard_statistics(float* stats, ConstActPtr logits, const int32_t* targets, int N, int V_local,
                                      int Vp_local, int vocab_begin) override;
  void cross_entropy_combine_shards(float* row_max, float* row_sumexp, float* target_logit, const float* gathered,
                                    int N, int shards) override;
  void cross_entropy_backward_sharded(ActPtr dlogits, ConstActPtr logits, const int32_t* targets,
                                      const float* row_max, const float* row_sumexp, float dloss, int N, int V_local,
                                      int Vp_local, int vocab_begin) override;
  void cross_entropy_forward_backward(float* losses, float* row_max, float* row_sumexp, ActPtr dlogits,
                                      ConstActPtr logits, const int32_t* targets, float dloss, int N, int V,
                                      int Vp) override;
  void add(ActPtr out, ConstActPtr a, ConstActPtr b, std::size_t n) override;

 private:
  class Staging;  // one call's fp32 views of its operands (rounded_storage_backend.cpp)
  // Whether a call goes to the inner backend's own 16-bit kernel: its family is native there
  // (`family`, from Backend::native_16bit) and every operand given (null ones are skipped) is a
  // 16-bit buffer of this backend's precision.
  bool native(bool family, std::initializer_list<ConstActPtr> operands) const;
  // The workspace, grown to at least `floats`.
  float* workspace(std::size_t floats);

  Precision precision_;
  float* workspace_ = nullptr;
  std::size_t workspace_floats_ = 0;
};

}  // namespace trident::kernels
