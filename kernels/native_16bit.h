#pragma once

namespace trident::kernels {

// The kernel families a backend can run on 16-bit buffers (bf16 or fp16) itself: every
// activation and weight operand of a call 16-bit of one precision, read as it is, fp32 math,
// each stored value rounded once; the fp32 side (LayerNorm statistics, attention's lse, weight
// and bias gradients) fp32 as always. That is the semantics RoundedStorageBackend gives an fp32
// kernel by widening the operands into fp32 copies, without the copies.
struct Native16BitKernels {
  // matmul_forward/backward. The forward also takes an fp32 out with 16-bit inputs (the LM head's
  // logits): the fp32 results, which the caller rounds.
  bool matmul = false;
  bool layernorm = false;  // layernorm_forward/backward, residual_layernorm_forward
  bool gelu = false;       // gelu_forward/backward
  bool add = false;        // add (the residual stream)
  bool attention = false;  // attention_forward/backward
  bool embedding = false;  // embedding_forward (16-bit out and tables), embedding_backward (16-bit dout)
  // cross_entropy_* on 16-bit logits (and dlogits); the losses and row statistics fp32. The model
  // then keeps its logits in 16 bits too (src/model/gpt.h).
  bool cross_entropy = false;
  bool any() const { return matmul || layernorm || gelu || add || attention || embedding || cross_entropy; }
  // Every family.
  static Native16BitKernels all() { return {true, true, true, true, true, true, true}; }
  // Written out: the CUDA sources are C++17, without defaulted comparisons.
  bool operator==(const Native16BitKernels& o) const {
    return matmul == o.matmul && layernorm == o.layernorm && gelu == o.gelu && add == o.add &&
           attention == o.attention && embedding == o.embedding && cross_entropy == o.cross_entropy;
  }
  bool operator!=(const Native16BitKernels& o) const { return !(*this == o); }
};

}  // namespace trident::kernels
