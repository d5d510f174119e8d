// Gpt: a GPT-2 family decoder on one rank, forward and hand-written backward (fp32 arithmetic;
// activations and the compute copy of the weights stored in fp32, bf16 or fp16).
//
//   x = wte[tokens] + wpe[positions]
//   per block:  x = x + proj(attention(ln1(x)));   x = x + down(gelu(up(ln2(x))))
//   logits = ln_f(x) @ wte^T   (LM head tied to the token embedding, padded vocabulary)
//   loss = cross-entropy over the real vocabulary
//
// All math goes through kernels::Backend, so the same code runs on every device. Activations
// live in one arena sized at construction: nothing is allocated in the step loop. With
// Recompute::kFull the arena keeps only the residual stream between blocks and one shared
// block workspace; backward re-runs each block's forward before its backward (docs/model.md,
// "Activation recomputation").
//
// Tensor parallelism (Megatron-LM): with tp ranks each rank holds heads/tp attention heads and
// 4C/tp MLP channels. QKV and MLP-up are column-parallel (output channels split), attention-proj
// and MLP-down row-parallel (input channels split, partial outputs all-reduced); the token
// embedding and LM head are vocabulary-parallel (rows split), with a cross-entropy that combines
// per-row max and sums over the tensor group and never gathers the logits. LayerNorms, the
// row-parallel biases and the position table are replicated: every tensor rank computes them
// identically.
//
// Sequence parallelism (layout.sequence_parallel, tp > 1; Megatron-LM's): outside the matmuls
// each tensor rank keeps only its block of N / tp consecutive rows of the [N = B*T, C]
// activations (rank r: rows [r N/tp, (r+1) N/tp)). LayerNorm and the residual adds are
// per-row, so splitting the flattened batch-and-sequence rows is what Megatron's split along
// the sequence amounts to here (attention, which mixes positions, runs on gathered rows). The residual stream, the LayerNorm
// inputs and statistics, residual2, the block outputs, stage boundaries and dresidual are
// [N/tp, C]. Before each column-parallel matmul (QKV, MLP-up, LM head) the LayerNorm output is
// all-gathered into a full [N, C] buffer (gather_from_sp), which is kept for backward as the
// matmul's input (Megatron re-gathers it in backward instead: less memory, more communication);
// after each row-parallel matmul and the embedding the partial sums are reduce-scattered
// (scatter_to_sp). The LayerNorm weight and bias gradients are then partial sums over each
// rank's rows: reduce_sequence_parallel_gradients() sums them over the tensor group.
//
// Pipeline parallelism: a rank holds one stage, a run of consecutive layers (StageLayout); the
// first stage embeds tokens, the others take their input activations from the previous stage
// (stage_input), and the last stage computes the loss. Several micro-batches can be in flight
// on a stage (1F1B, GPipe): each has a slot of its own forward state, selected by `slot`. With
// the interleaved schedule a rank holds layout.chunks model chunks (virtual stages, see
// stage_layout.h), each with its own slots: forward, backward and the boundary buffers take the
// chunk as well (the overloads without one mean chunk 0).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "parallel/tensor_parallel.h"
#include "src/model/activation_sizes.h"  // ActivationSizes, activation_sizes
#include "src/model/gpt_config.h"
#include "src/model/gpt_layout.h"        // GptLayout, Recompute
#include "src/model/gpt_param_table.h"   // build_gpt_param_table, block_tensor_name
#include "src/model/param_table.h"
#include "src/model/stage_layout.h"

namespace trident::model {

struct GptOptions {
  GptLayout layout{};
  // Elements of the parameter and gradient arenas, at least the table's count (ZeRO-1 pads
  // them to a multiple of the data-parallel size; the padding stays zero). 0 = the table's.
  std::size_t arena_size = 0;
  // The tensor group's operators (its size must be layout.tp); default: one tensor rank.
  parallel::TensorParallel tensor_parallel{nullptr};
};

class Gpt {
 public:
  // B = micro-batch sequences, T = sequence length (<= context).
  Gpt(const GptConfig& config, kernels::Backend& backend, int B, int T, GptOptions options = {});
  ~Gpt();
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  const GptConfig& config() const { return config_; }
  const StageLayout& stage() const { return stage_; }
  const ParamTable& params() const { return table_; }
  // The parameter arena in layout.storage: the weights the kernels read. Under 16-bit storage
  // this is the compute copy, rounded from the fp32 master weights that AdamW keeps.
  kernels::ActPtr parameters() { return params_; }
  // Sets arena elements [offset, offset + count) from fp32 host values, rounded to the arena's
  // storage (initialisation, checkpoint loading, tests).
  void set_parameters(std::size_t offset, const float* host_values, std::size_t count);
  float* gradients() { return grads_; }
  std::size_t arena_size() const { return arena_size_; }
  // Bytes of the activation arena, with the staging workspace the backend holds for 16-bit
  // storage (activation_bytes() of this layout).
  std::size_t activation_bytes() const { return activation_sizes_.bytes(layout_.storage); }
  // Elements of one stage boundary activation (and of its gradient): B * T * C, or this rank's
  // rows of it, B * T / tp * C, with sequence parallelism; in the layout's storage.
  std::size_t boundary_floats() const { return static_cast<std::size_t>(rows_) * config_.hidden; }
  // Whether sequence parallelism is on (layout.sequence_parallel and tp > 1).
  bool sequence_parallel() const { return sp_; }

  void zero_gradients();
  // ZeRO-1's parameter gather overlapping forward (parallel/param_gather.h): forward calls
  // wait(offset) before it first reads the parameters below arena offset `offset` (the
  // embeddings, then each block, then the head), so that it waits for each piece of the gather
  // only as it reaches it. Empty (the default): the parameters are always complete.
  void set_parameter_wait(std::function<void(std::size_t)> wait) { parameter_wait_ = std::move(wait); }
  // Forward of one micro-batch in `slot`. tokens and targets: host int32 [B*T] (the first stage
  // embeds the tokens, the last uses the targets). A stage other than the first reads its input
  // from stage_input(slot), which the caller fills first. Returns the sum of the B*T token
  // losses on the last stage (the caller divides by the global token count), 0 elsewhere.
  // With chunks, `chunk` selects the model chunk (the first chunk of the model embeds, the last
  // computes the loss; the others read stage_input(slot, chunk)).
  // training_dloss: a training forward, whose backward(slot, chunk, dloss) will follow with this
  // very dloss. The last stage then makes the logits' gradient with the loss, in the same pass
  // over the logits (Backend::cross_entropy_forward_backward, written over them), where without
  // it backward makes it (without tensor parallelism; with it the loss needs the shards'
  // statistics first, so backward always makes it). The same bits either way.
  double forward(int slot, int chunk, const int32_t* tokens, const int32_t* targets,
                 std::optional<float> training_dloss = std::nullopt);
  double forward(int slot, const int32_t* tokens, const int32_t* targets) { return forward(slot, 0, tokens, targets); }
  double forward(const int32_t* tokens, const int32_t* targets) { return forward(0, 0, tokens, targets); }
  // Backward of the micro-batch in `slot`, whose forward ran last for that slot. dloss:
  // derivative of the step's loss with respect to each token's loss (1 / global tokens per
  // step). A stage other than the last takes d(loss)/d(its output) from output_grad(), which
  // the caller fills first; a stage other than the first leaves d(loss)/d(its input) in
  // input_grad(). Gradients accumulate into gradients(). grads_final(offset) is called whenever
  // every gradient at arena offset >= offset has received its last contribution of this
  // backward (for overlapping the data-parallel reduction); it may be empty.
  // With layout.chunks > 1 a chunk's backward finishes only its own blocks (and ln_f, for the
  // model's last chunk): pass grads_final only to each chunk's last backward of the step, when the
  // later chunks, above it in the arena, have had theirs (as the interleaved schedule orders
  // them); offset 0 (the embeddings) is reported by chunk 0's alone. The output gradient is then
  // read from output_grad(slot, chunk) and the input gradient left in input_grad(slot, chunk), a
  // buffer of the slot, so that a deferred send of it survives later backwards.
  void backward(int slot, int chunk, float dloss, const std::function<void(std::size_t)>& grads_final);
  void backward(int slot, float dloss, const std::function<void(std::size_t)>& grads_final) {
    backward(slot, 0, dloss, grads_final);
  }
  void backward(float dloss, const std::function<void(std::size_t)>& grads_final) {
    backward(0, 0, dloss, grads_final);
  }
  // Sequence parallelism: sums the LayerNorm weight and bias gradients (ln1, ln2, ln_f), which
  // each tensor rank computed from its own rows only, over the tensor group. Call once per
  // step, after the last backward and before any other reduction touches them (an all-reduce
  // of the accumulated gradients per micro-batch would count earlier micro-batches tp times).
  // The row-parallel biases and wpe need no sum: their gradients come from the all-gathered
  // full-row output gradient and are whole on every rank. Does nothing without sequence
  // parallelism.
  void reduce_sequence_parallel_gradients();

  kernels::ActPtr stage_input(int slot, int chunk) { return slot_of(slot, chunk).encoded; }
  kernels::ActPtr stage_input(int slot) { return stage_input(slot, 0); }
  kernels::ConstActPtr stage_output(int slot, int chunk) const;
  kernels::ConstActPtr stage_output(int slot) const { return stage_output(slot, 0); }
  // Where the next backward reads d(loss)/d(chunk output) (fill right before it).
  kernels::ActPtr output_grad(int /*slot*/, int /*chunk*/) { return dresidual_; }
  kernels::ActPtr output_grad() { return dresidual_; }
  // d(loss)/d(chunk input) left by the backward of (slot, chunk).
  kernels::ConstActPtr input_grad(int slot, int chunk) const;
  kernels::ConstActPtr input_grad() const { return dresidual_; }

 private:
  // One block's tensors in an arena: the weights (kernels::ConstActPtr, in the arena's storage)
  // or their gradients (float*).
  template <class Ptr>
  struct LayerTensors {
    Ptr ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b;
    Ptr ln2_w, ln2_b, up_w, up_b, down_w, down_b;
  };
  // Activations in the layout's storage; the statistics (means, rstds, attention's lse
  // [B, NH/tp, T]) in fp32.
  struct LayerActivations {
    kernels::ActPtr ln1, qkv, atty, residual2, ln2, up, up_gelu, out;
    float *ln1_mean, *ln1_rstd, *lse, *ln2_mean, *ln2_rstd;
  };
  // One micro-batch's forward state on this stage (one chunk of it).
  struct Slot {
    kernels::ActPtr encoded;     // input of the chunk's first block (embeddings, or received)
    kernels::ActPtr input_grad;  // chunks > 1: d(loss)/d(encoded), kept for a deferred send
    // Per local block. kNone: each block owns all its tensors. kFull: every view points into
    // the shared workspace except `out`, the block's own slot of the kept residual stream.
    std::vector<LayerActivations> layers;
    // last chunk only
    kernels::ActPtr lnf, logits;
    float *lnf_mean = nullptr, *lnf_rstd = nullptr, *losses = nullptr;
    // the cross-entropy's row statistics, which its backward reads: row max, row sum of exp and
    // (tp > 1, vocabulary-parallel) the target's logit beside the sum, for the loss
    float *row_max = nullptr, *row_sums = nullptr;
    // Set when the forward wrote the logits' gradient over them, for this dloss (forward's
    // training_dloss); head_backward then starts from it.
    std::optional<float> logits_gradient_dloss;
    int32_t* tokens = nullptr;
    int32_t* targets = nullptr;
  };
  // Arena offsets of one block's tensors, resolved once at construction (no lookups or
  // allocations in the step loop).
  struct LayerOffsets {
    std::size_t ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, up_w, up_b, down_w, down_b;
  };
  template <class Ptr>
  LayerTensors<Ptr> layer_tensors(Ptr arena, int local_layer) const;
  void carve_activations();
  // The residual stream entering local block `l` of a slot.
  kernels::ConstActPtr block_input(const Slot& s, int l) const;
  Slot& slot_of(int slot, int chunk) {
    return slots_[chunk_first_slot_[static_cast<std::size_t>(chunk)] + static_cast<std::size_t>(slot)];
  }
  const Slot& slot_of(int slot, int chunk) const {
    return slots_[chunk_first_slot_[static_cast<std::size_t>(chunk)] + static_cast<std::size_t>(slot)];
  }
  // One block's forward from x_in, writing every tensor of a (a.out last). The only forward
  // code of a block: forward() and the recomputation in backward() both run it.
  // The residual add that ends a block (out += residual2) is fused into the LayerNorm after it
  // (residual_layernorm_forward: the bits of the add, then the norm; one pass over the rows
  // instead of two): with `previous` set, x_in is previous->out still waiting for its add, which
  // this block's first LayerNorm makes, storing the sum in previous->out. With
  // `complete_output`, this block makes its own add (a chunk's last block whose output is sent
  // or read as it is; the recomputation in backward); without, the next LayerNorm must.
  void block_forward(int local_layer, kernels::ConstActPtr x_in, const LayerActivations& a,
                     const LayerActivations* previous, bool complete_output);
  // One block's backward: dresidual_ holds d(loss)/d(a.out) on entry and d(loss)/d(x_in) on
  // return; gradients accumulate into the block's tensors. a must hold this block's forward.
  void block_backward(int local_layer, kernels::ConstActPtr x_in, const LayerActivations& a);
  // Backward through scatter_to_sp / reduce_from_tp: d(loss)/d(the full rows of a row-parallel
  // matmul's output) from dresidual_ (this rank's rows with sequence parallelism: all-gathered
  // into dln_). The same on every tensor rank.
  kernels::ActPtr full_output_grad();
  // Backward through gather_from_sp / copy_to_tp: dln_ holds this rank's partial d(loss)/d(the
  // full rows of a column-parallel matmul's input); returns the summed gradient of the rows
  // this rank's LayerNorm produced (all rows without sequence parallelism).
  kernels::ConstActPtr own_input_grad();
  // The loss of each row from the statistics the tensor group combined (vocabulary-parallel).
  double sharded_loss_sum(Slot& s);
  // Cross-entropy, LM head and ln_f backward of the last stage: leaves d(loss)/d(stage
  // output) in dresidual_.
  void head_backward(Slot& s, float dloss);

  GptConfig config_;
  kernels::Backend& backend_;
  int B_, T_;
  GptLayout layout_;
  StageLayout stage_;
  parallel::TensorParallel tp_;
  parallel::VocabShard vocab_;  // this rank's rows of the (padded) vocabulary
  int local_hidden_ = 0;        // C / tp: attention channels of this rank's heads
  int local_heads_ = 0;         // heads / tp
  bool sp_ = false;             // sequence parallelism on (layout.sequence_parallel, tp > 1)
  int rows_ = 0;                // rows of the sequence-parallel regions: B*T, or B*T / tp with sp_
  // Arena ranges [offset, offset + count) of the gradients that sequence parallelism leaves
  // partial (the LayerNorms), adjacent tensors merged.
  std::vector<std::pair<std::size_t, std::size_t>> sp_partial_grads_;
  std::size_t arena_size_ = 0;
  ParamTable table_;
  kernels::ActPtr params_;  // in layout_.storage
  float* grads_ = nullptr;
  // Offsets of the stage's non-block tensors (absent ones unused).
  std::size_t wte_offset_ = 0, wpe_offset_ = 0, lnf_w_offset_ = 0, lnf_b_offset_ = 0;
  std::vector<LayerOffsets> layer_offsets_;  // per local block (every chunk's, in order)
  // Arena end of the stage's embeddings (first stage) and of each local block's tensors: what
  // forward waits for (parameter_wait_) before it reads them.
  std::size_t embeddings_end_ = 0;
  std::vector<std::size_t> block_ends_;
  std::function<void(std::size_t)> parameter_wait_;
  void wait_for_parameters_below(std::size_t offset) {
    if (parameter_wait_) parameter_wait_(offset);
  }
  std::vector<int> chunk_first_block_;       // per chunk: the local index of its first block

  // The arena: the activations in layout_.storage, and the fp32 statistics and workspace.
  void* stored_arena_ = nullptr;
  float* fp32_arena_ = nullptr;
  ActivationSizes activation_sizes_;
  std::vector<Slot> slots_;  // chunk-major: chunk c's slots from chunk_first_slot_[c], layout_.slots_of(c) of them
  std::vector<std::size_t> chunk_first_slot_;
  // kFull: the slot and chunk whose last block's forward the shared workspace still holds (-1:
  // none), so that backward may skip re-running it.
  int workspace_slot_ = -1;
  int workspace_chunk_ = -1;
  // backward scratch, shared by all blocks and slots. With sequence parallelism dln_ (full
  // [N, C]) is also forward's scratch for the row-parallel partial sums before their
  // reduce-scatter and backward's for the all-gathered output gradient: it holds nothing
  // between two kernels' uses (dresidual_, which carries the gradient, is never touched).
  // attention_scratch_ is the attention workspace of forward and backward alike (the T x T
  // scores of one layer at a time), holding nothing between calls.
  kernels::ActPtr dresidual_, dln_, dqkv_, datty_, dup_;
  float* attention_scratch_ = nullptr;
  // tp > 1, last stage: the tensor group's row statistics gathered for the loss (3 B T floats
  // per rank, rank-major; Backend::cross_entropy_shard_statistics), forward scratch.
  float* shard_statistics_ = nullptr;
  std::vector<float> host_losses_;
  std::vector<float> host_row_max_, host_row_sums_;
};

}  // namespace trident::model
