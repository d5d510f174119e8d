// GptConfig: the shape of a GPT-2 family model and the counts derived from it.
#pragma once

#include <cstdint>

namespace trident::model {

struct GptConfig {
  int layers = 0;
  int heads = 0;
  int hidden = 0;          // C
  int context = 0;         // positions in the learned position table
  int vocab = 0;           // real vocabulary V
  int padded_vocab = 0;    // Vp >= V: a multiple of model.vocab_multiple, for efficient matmuls

  int head_size() const { return hidden / heads; }
  // Every parameter element (the padded vocabulary rows included, they are stored).
  int64_t parameter_count() const;
  // Parameters taking part in matmuls per token: blocks plus the LM head over the REAL
  // vocabulary (padding rows are zero and do no useful work; position table is a lookup).
  int64_t matmul_parameter_count() const;
  // Model FLOPs per trained token (forward + backward) at sequence length T:
  //   6 * matmul_parameter_count + 6 * layers * T * hidden
  // The attention term counts QK^T and AV (2 * 2 * T * C per layer forward over all T keys,
  // times 3 for forward + backward) halved, as the causal mask leaves a query (T + 1) / 2 keys
  // on average: llm.c's formula. PaLM's and nanoGPT's count it unhalved (docs/model.md).
  double flops_per_token(int seq_len) const;
};

// Rounds vocab up to a multiple of `multiple`.
int pad_vocab(int vocab, int multiple);

}  // namespace trident::model
