// Test support: a CPU backend that says it computes on 16-bit operands itself in a chosen set of
// kernel families (Backend::native_16bit), as the CUDA backend does. A call of a claimed family
// that arrives with 16-bit operands is counted and computed by widening them (a
// RoundedStorageBackend of its own over the same fp32 kernels), which gives the bits the widening
// path gives, so that what passes through the rounding decorator (and the staging it saves) can be
// tested without a GPU; every other call goes to the fp32 backend as it is.
#pragma once

#include <initializer_list>

#include "kernels/forwarding_backend.h"
#include "kernels/rounded_storage_backend.h"

namespace trident::test_support {

// Calls that arrived with 16-bit operands, per family.
struct Native16BitCalls {
  int matmul = 0, layernorm = 0, gelu = 0, add = 0, attention = 0, embedding = 0, cross_entropy = 0;
  int total() const { return matmul + layernorm + gelu + add + attention + embedding + cross_entropy; }
};

class Native16BitKernelsStandIn final : public kernels::ForwardingBackend {
 public:
  using ActPtr = kernels::ActPtr;
  using ConstActPtr = kernels::ConstActPtr;

  // fp32: the CPU backend; precision: the 16-bit format the calls arrive in.
  Native16BitKernelsStandIn(kernels::Backend& fp32, kernels::Precision precision, kernels::Native16BitKernels claimed)
      : ForwardingBackend(fp32), claimed_(claimed), widening_(fp32, precision) {}

  kernels::Native16BitKernels native_16bit() const override { return claimed_; }
  Native16BitCalls calls;

  void embedding_forward(ActPtr out, const int32_t* tokens, ConstActPtr wte, ConstActPtr wpe, int B, int T, int C,
                         int vocab_begin, int vocab_end) override {
    target(claimed_.embedding, calls.embedding, {out, wte, wpe})
        .embedding_forward(out, tokens, wte, wpe, B, T, C, vocab_begin, vocab_end);
  }
  void embedding_backward(float* dwte, float* dwpe, ConstActPtr dout, const int32_t* tokens, int B, int T, int C,
                          int vocab_begin, int vocab_end) override {
    target(claimed_.embedding, calls.embedding, {dout})
        .embedding_backward(dwte, dwpe, dout, tokens, B, T, C, vocab_begin, vocab_end);
  }
  void matmul_forward(ActPtr out, ConstActPtr inp, ConstActPtr weight, ConstActPtr bias, int N, int C,
                      int OC) override {
    target(claimed_.matmul, calls.matmul, {out, inp, weight, bias}).matmul_forward(out, inp, weight, bias, N, C, OC);
  }
  void matmul_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                       ConstActPtr weight, int N, int C, int OC) override {
    target(claimed_.matmul, calls.matmul, {dinp, dout, inp, weight})
        .matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  }
  void layernorm_forward(ActPtr out, float* mean, float* rstd, ConstActPtr inp, ConstActPtr weight, ConstActPtr bias,
                         int N, int C) override {
    target(claimed_.layernorm, calls.layernorm, {out, inp, weight, bias})
        .layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
  }
  void layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                          ConstActPtr weight, const float* mean, const float* rstd, int N, int C) override {
    target(claimed_.layernorm, calls.layernorm, {dinp, dout, inp, weight})
        .layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  }
  void residual_layernorm_forward(ActPtr residual, ActPtr out, float* mean, float* rstd, ConstActPtr a, ConstActPtr b,
                                  ConstActPtr weight, ConstActPtr bias, int N, int C) override {
    target(claimed_.layernorm, calls.layernorm, {residual, out, a, b, weight, bias})
        .residual_layernorm_forward(residual, out, mean, rstd, a, b, weight, bias, N, C);
  }
  void gelu_forward(ActPtr out, ConstActPtr inp, std::size_t n) override {
    target(claimed_.gelu, calls.gelu, {out, inp}).gelu_forward(out, inp, n);
  }
  void gelu_backward(ActPtr dinp, ConstActPtr inp, ConstActPtr dout, std::size_t n) override {
    target(claimed_.gelu, calls.gelu, {dinp, inp, dout}).gelu_backward(dinp, inp, dout, n);
  }
  void attention_forward(ActPtr out, float* lse, float* scratch, ConstActPtr qkv, int B, int T, int C,
                         int NH) override {
    target(claimed_.attention, calls.attention, {out, qkv}).attention_forward(out, lse, scratch, qkv, B, T, C, NH);
  }
  void attention_backward(ActPtr dqkv, float* scratch, ConstActPtr dout, ConstActPtr qkv, ConstActPtr out,
                          const float* lse, int B, int T, int C, int NH) override {
    target(claimed_.attention, calls.attention, {dqkv, dout, qkv, out})
        .attention_backward(dqkv, scratch, dout, qkv, out, lse, B, T, C, NH);
  }
  void cross_entropy_forward(float* losses, float* row_max, float* row_sumexp, ConstActPtr logits,
                             const int32_t* targets, int N, int V, int Vp) override {
    target(claimed_.cross_entropy, calls.cross_entropy, {logits})
        .cross_entropy_forward(losses, row_max, row_sumexp, logits, targets, N, V, Vp);
  }
  void cross_entropy_backward(ActPtr dlogits, ConstActPtr logits, const int32_t* targets, float dloss, int N, int V,
                              int Vp) override {
    target(claimed_.cross_entropy, calls.cross_entropy, {dlogits, logits})
        .cross_entropy_backward(dlogits, logits, targets, dloss, N, V, Vp);
  }
  void cross_entropy_shard_statistics(float* stats, ConstActPtr logits, const int32_t* targets, int N, int V_local,
                                      int Vp_local, int vocab_begin) override {
    target(claimed_.cross_entropy, calls.cross_entropy, {logits})
        .cross_entropy_shard_statistics(stats, logits, targets, N, V_local, Vp_local, vocab_begin);
  }
  void cross_entropy_backward_sharded(ActPtr dlogits, ConstActPtr logits, const int32_t* targets,
                                      const float* row_max, const float* row_sumexp, float dloss, int N, int V_local,
                                      int Vp_local, int vocab_begin) override {
    target(claimed_.cross_entropy, calls.cross_entropy, {dlogits, logits})
        .cross_entropy_backward_sharded(dlogits, logits, targets, row_max, row_sumexp, dloss, N, V_local, Vp_local,
                                        vocab_begin);
  }
  void add(ActPtr out, ConstActPtr a, ConstActPtr b, std::size_t n) override {
    target(claimed_.add, calls.add, {out, a, b}).add(out, a, b, n);
  }

 private:
  // The backend that computes a call: the widening one (counted) when its family is claimed and
  // an operand is 16-bit, else the fp32 one.
  kernels::Backend& target(bool claimed, int& counter, std::initializer_list<ConstActPtr> operands) {
    bool sixteen = false;
    for (ConstActPtr p : operands) sixteen = sixteen || (p && !p.is_fp32());
    if (!claimed || !sixteen) return inner();
    ++counter;
    return widening_;
  }

  kernels::Native16BitKernels claimed_;
  kernels::RoundedStorageBackend widening_;
};

}  // namespace trident::test_support
