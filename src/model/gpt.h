// Gpt: a GPT-2 family decoder on one rank, forward and hand-written backward in fp32.
//
//   x = wte[tokens] + wpe[positions]
//   per block:  x = x + proj(attention(ln1(x)));   x = x + down(gelu(up(ln2(x))))
//   logits = ln_f(x) @ wte^T   (LM head tied to the token embedding, padded vocabulary)
//   loss = cross-entropy over the real vocabulary
//
// All math goes through kernels::Backend, so the same code runs on every device. Activations
// for one micro-batch of [B, T] live in one arena sized at construction: nothing is allocated
// in the step loop. With Recompute::kFull the arena keeps only the residual stream between
// blocks and one shared block workspace; backward re-runs each block's forward before its
// backward (docs/model.md, "Activation recomputation").
//
// Tensor parallelism (Megatron-LM): with tp ranks each rank holds heads/tp attention heads and
// 4C/tp MLP channels. QKV and MLP-up are column-parallel (output channels split), attention-proj
// and MLP-down row-parallel (input channels split, partial outputs all-reduced); the token
// embedding and LM head are vocabulary-parallel (rows split), with a cross-entropy that combines
// per-row max and sums over the tensor group and never gathers the logits. LayerNorms, the
// row-parallel biases and the position table are replicated: every tensor rank computes them
// identically.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/backend.h"
#include "parallel/tensor_parallel.h"
#include "src/model/gpt_config.h"
#include "src/model/param_table.h"

namespace trident::model {

// What forward keeps for backward.
//   kNone: every block's intermediates, one set per block.
//   kFull: only each block's input (the residual stream) and the head's state; the block
//          intermediates share one workspace and are recomputed in backward, bit-identically.
enum class Recompute { kNone, kFull };

struct GptOptions {
  Recompute recompute = Recompute::kNone;
  // Elements of the parameter and gradient arenas, at least the table's count (ZeRO-1 pads
  // them to a multiple of the data-parallel size; the padding stays zero). 0 = the table's.
  std::size_t arena_size = 0;
  // The tensor group's operators; default: one tensor rank.
  parallel::TensorParallel tensor_parallel{nullptr};
};

// Floats of the activation arena for a micro-batch [B, T] (forward state kept for backward,
// plus the backward scratch). Used for allocation and for the memory estimate alike.
// tp: tensor-parallel size (local sizes are the rank's share).
std::size_t activation_floats(const GptConfig& config, int B, int T, std::size_t attention_scratch,
                              Recompute recompute = Recompute::kNone, int tp = 1);

// The parameter table of tensor rank tp_rank of tp in forward order: wte, wpe, blocks, ln_f.
// Requires heads and padded_vocab divisible by tp.
ParamTable build_gpt_param_table(const GptConfig& config, int tp = 1, int tp_rank = 0);

class Gpt {
 public:
  // B = micro-batch sequences, T = sequence length (<= context). options.recompute trades one
  // extra forward of the blocks for activation memory; results are identical either way.
  Gpt(const GptConfig& config, kernels::Backend& backend, int B, int T, GptOptions options = {});
  ~Gpt();
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  const GptConfig& config() const { return config_; }
  const ParamTable& params() const { return table_; }
  float* parameters() { return params_; }
  float* gradients() { return grads_; }
  std::size_t arena_size() const { return arena_size_; }
  std::size_t activation_bytes() const { return activation_count_ * sizeof(float); }

  void zero_gradients();
  // tokens and targets: host int32 [B*T]; copied to the device.
  // Returns the sum of the B*T token losses (the caller divides by the global token count).
  double forward(const int32_t* tokens, const int32_t* targets);
  // Backward of the last forward. dloss: derivative of the step's loss with respect to each
  // token's loss (1 / global tokens per step). Gradients accumulate into gradients().
  // grads_final(offset) is called whenever every gradient at arena offset >= offset has
  // received its last contribution of this backward (for overlapping the data-parallel
  // reduction); it may be empty.
  void backward(float dloss, const std::function<void(std::size_t)>& grads_final);

 private:
  struct LayerPointers {
    float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b;
    float *ln2_w, *ln2_b, *up_w, *up_b, *down_w, *down_b;
  };
  struct LayerActivations {
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *att, *atty, *residual2;
    float *ln2, *ln2_mean, *ln2_rstd, *up, *up_gelu, *out;
  };
  // Arena offsets of one block's tensors, resolved once at construction (no lookups or
  // allocations in the step loop).
  struct LayerOffsets {
    std::size_t ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, up_w, up_b, down_w, down_b;
  };
  LayerPointers layer_pointers(float* arena, int layer) const;
  void carve_activations();
  // The residual stream entering block `layer`: encoded_ for block 0, else the previous out.
  const float* block_input(int layer) const;
  // One block's forward from x_in, writing every tensor of a (a.out last). The only forward
  // code of a block: forward() and the recomputation in backward() both run it.
  void block_forward(int layer, const float* x_in, const LayerActivations& a);
  // One block's backward: dresidual_ holds d(loss)/d(a.out) on entry and d(loss)/d(x_in) on
  // return; gradients accumulate into the block's tensors. a must hold this block's forward.
  void block_backward(int layer, const float* x_in, const LayerActivations& a);

  // The loss of each row from the statistics the tensor group combined (vocabulary-parallel).
  double sharded_loss_sum();

  GptConfig config_;
  kernels::Backend& backend_;
  int B_, T_;
  Recompute recompute_;
  parallel::TensorParallel tp_;
  parallel::VocabShard vocab_;  // this rank's rows of the (padded) vocabulary
  int local_hidden_ = 0;        // C / tp: attention channels of this rank's heads
  int local_heads_ = 0;         // heads / tp
  std::size_t arena_size_ = 0;
  ParamTable table_;
  float* params_ = nullptr;
  float* grads_ = nullptr;
  std::size_t wte_offset_ = 0, wpe_offset_ = 0, lnf_w_offset_ = 0, lnf_b_offset_ = 0;
  std::vector<LayerOffsets> layer_offsets_;

  // activation arena and its views
  float* activations_ = nullptr;
  std::size_t activation_count_ = 0;
  float* encoded_ = nullptr;
  // Per block views. kNone: each block owns all its tensors. kFull: every view points into one
  // shared workspace except `out`, which is the block's own slot of the kept residual stream.
  std::vector<LayerActivations> layers_;
  float *lnf_ = nullptr, *lnf_mean_ = nullptr, *lnf_rstd_ = nullptr, *logits_ = nullptr,
        *losses_ = nullptr;
  // vocabulary-parallel cross-entropy (tp > 1): row max, then row sum of exp and the target's
  // logit side by side so that one all-reduce combines both
  float *row_max_ = nullptr, *row_sums_ = nullptr;
  // backward scratch, shared by all blocks
  float *dresidual_ = nullptr, *dln_ = nullptr, *dqkv_ = nullptr, *datty_ = nullptr,
        *dup_gelu_ = nullptr, *dup_ = nullptr, *attention_scratch_ = nullptr;
  int32_t* tokens_ = nullptr;
  int32_t* targets_ = nullptr;
  std::vector<float> host_losses_;
  std::vector<float> host_row_max_, host_row_sums_;
};

}  // namespace trident::model
