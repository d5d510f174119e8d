#include "src/model/activation_sizes.h"

#include <algorithm>  // std::max
#include <cstddef>

#include "src/model/stage_layout.h"

namespace trident::model {

namespace {

// Rows of the sequence-parallel regions (residual stream, LayerNorm inputs): all B*T rows, or
// this rank's B*T / tp with sequence parallelism.
std::size_t region_rows(std::size_t bt, const GptLayout& layout) {
  return layout.sequence_parallel && layout.tp > 1 ? bt / static_cast<std::size_t>(layout.tp) : bt;
}

// One block's forward state for [B, T] other than its output `out`: what the shared workspace
// holds under Recompute::kFull. Cl = C / tp channels are this rank's; R rows of the
// sequence-parallel regions (B*T, or B*T / tp).
ActivationSizes block_workspace(const GptConfig& c, std::size_t B, std::size_t T, const GptLayout& layout) {
  const int tp = layout.tp;
  const std::size_t btc = B * T * static_cast<std::size_t>(c.hidden);
  const std::size_t btcl = btc / static_cast<std::size_t>(tp);
  const std::size_t rows = region_rows(B * T, layout);
  // Attention keeps one log-sum-exp per row of each local head, not the T x T probabilities.
  const std::size_t lse = B * static_cast<std::size_t>(c.heads / tp) * T;
  ActivationSizes w;
  // ln1 + ln2 (full rows: the column-parallel matmuls' inputs) = 2 BTC; residual2 = R C;
  // qkv(3) + atty + up(4) + up_gelu(4) = 12 BTCl. (tp = 1: 15 BTC.)
  w.stored = 2 * btc + rows * static_cast<std::size_t>(c.hidden) + 12 * btcl;
  w.fp32 = 4 * rows + lse;  // 4 norm statistics per region row, and the lse
  return w;
}

// Under 16-bit storage: the largest call's 16-bit operands, activations and weights alike, which
// kernels::RoundedStorageBackend widens at once into its fp32 workspace. Each term is one call of
// this stage as Gpt makes it, summing the sizes the call declares (an operand given twice, as a
// residual add's output and input, counts once; fp32 logits are not staged). Which term
// is largest depends on tp, sequence parallelism, the micro-batch and the vocabulary, so all are
// listed. N = B*T rows, Cl = C/tp, R the sequence-parallel rows, Vl the local vocabulary rows.
std::size_t staging_floats(const GptConfig& c, std::size_t N, std::size_t T, const GptLayout& layout,
                           const StageLayout& stage) {
  const auto tp = static_cast<std::size_t>(layout.tp);
  const auto C = static_cast<std::size_t>(c.hidden);
  const std::size_t Cl = C / tp;
  const std::size_t nc = N * C, ncl = N * Cl, rc = region_rows(N, layout) * C;
  const std::size_t vocab_rows = static_cast<std::size_t>(c.padded_vocab) / tp;
  // Replicated biases of the row-parallel matmuls and the position table: tensor rank 0 only.
  const std::size_t rank0_bias = layout.tp_rank == 0 ? C : 0;
  std::size_t most = 0;
  auto call = [&most](std::size_t floats) { most = std::max(most, floats); };
  // A call of a family the backend reads natively, with only 16-bit operands, stages nothing.
  // A block's calls all have only 16-bit operands, and so do the LM head's forward inputs (fp32
  // logits are written as they are); its backward too when the logits are 16-bit
  // (logits_16bit), else it reads the fp32 dlogits and is widened.
  const kernels::Native16BitKernels native = layout.native_16bit;
  const std::size_t logits16 = layout.logits_16bit() ? N * vocab_rows : 0;  // staged with their call
  auto family = [&](bool is_native, std::size_t floats) {
    if (!is_native) call(floats);
  };
  if (stage.layers() > 0) {
    family(native.layernorm, 2 * rc + 2 * C);                   // ln1 / ln2 forward: out, inp, weight, bias
    family(native.matmul, 3 * ncl + nc + 3 * Cl * C + 3 * Cl);  // QKV forward
    family(native.attention, 4 * ncl);                          // attention forward: out, qkv
    family(native.matmul, nc + ncl + Cl * C + rank0_bias);      // attention projection forward
    family(native.add, 2 * rc);                                 // residual adds: out (= a), b
    family(native.matmul, 4 * ncl + nc + 4 * Cl * C + 4 * Cl);  // MLP-up forward
    family(native.gelu, 8 * ncl);                               // GELU forward
    family(native.matmul, nc + 4 * ncl + 4 * Cl * C + rank0_bias);  // MLP-down forward
    family(native.matmul, 8 * ncl + nc + 4 * Cl * C);           // MLP-down backward: dinp, dout, inp, weight
    family(native.gelu, 8 * ncl);                               // GELU backward, in place: dinp = dout, inp
    family(native.matmul, 2 * nc + 4 * ncl + 4 * Cl * C);       // MLP-up backward
    family(native.layernorm, 3 * rc + C);                       // LayerNorm backward: dinp, dout, inp, weight
    family(native.matmul, 2 * ncl + nc + Cl * C);               // attention projection backward
    family(native.attention, 8 * ncl);                          // attention backward: dqkv, dout, qkv, out
    family(native.matmul, 2 * nc + 3 * ncl + 3 * Cl * C);       // QKV backward
  }
  if (stage.first) {
    // embedding forward: out, wte, wpe; backward: dout
    family(native.embedding, nc + vocab_rows * C + (layout.tp_rank == 0 ? T * C : 0));
    family(native.embedding, nc);
  }
  if (stage.last) {
    family(native.layernorm, 2 * rc + 2 * C);     // ln_f forward
    family(native.matmul, logits16 + nc + vocab_rows * C);  // LM head forward: (16-bit logits,) ln_f's output, wte
    // LM head backward: dinp, (16-bit dlogits,) inp, wte; with fp32 dlogits widened in any case.
    family(native.matmul && logits16 > 0, 2 * nc + logits16 + vocab_rows * C);
    family(native.layernorm, 3 * rc + C);         // ln_f backward
  }
  return most;
}

}  // namespace

ActivationSizes activation_sizes(const GptConfig& c, int B, int T, std::size_t attention_scratch,
                                 const GptLayout& layout) {
  const int tp = layout.tp;
  const StageLayout stage = layout.stage(c);
  const auto b = static_cast<std::size_t>(B), t = static_cast<std::size_t>(T);
  const std::size_t btc = b * t * static_cast<std::size_t>(c.hidden);
  const std::size_t btcl = btc / static_cast<std::size_t>(tp);
  const std::size_t bt = b * t;
  // Rows of the sequence-parallel regions and their floats (BTC without sequence parallelism).
  const std::size_t rows = region_rows(bt, layout);
  const std::size_t rc = rows * static_cast<std::size_t>(c.hidden);
  const ActivationSizes workspace = block_workspace(c, b, t, layout);
  // Row max and row sum of exp (the backward reads them rather than the logits again), and with
  // tp > 1 the target's logit beside the sum (the loss's three terms, combined over the group).
  const std::size_t vocab_stats = tp > 1 ? 3 * bt : 2 * bt;
  const std::size_t local_vocab = static_cast<std::size_t>(c.padded_vocab / tp);
  const bool multi_chunk = stage.chunks.size() > 1;
  ActivationSizes total;
  for (std::size_t k = 0; k < stage.chunks.size(); ++k) {
    const ChunkLayout& chunk = stage.chunks[k];
    ActivationSizes slot;
    const auto layers = static_cast<std::size_t>(chunk.layers());
    // Per slot: the chunk input, every block's output (the next block's input, or ln_f's),
    // under kNone each block's intermediates, with chunks the input gradient kept for its
    // send; the last chunk adds the head's state: ln_f's output (full rows), its statistics,
    // the logits (16-bit or fp32: GptLayout::logits_16bit), the losses and the cross-entropy's
    // row statistics.
    slot.stored += rc /*input*/ + (multi_chunk ? rc : 0) /*input gradient*/ + layers * rc /*outs*/;
    if (layout.recompute == Recompute::kNone) {
      slot.stored += layers * workspace.stored;
      slot.fp32 += layers * workspace.fp32;
    }
    if (chunk.last) {
      slot.stored += btc;
      slot.fp32 += 2 * rows + bt + vocab_stats;
      (layout.logits_16bit() ? slot.stored : slot.fp32) += bt * local_vocab;
    }
    const auto slots = static_cast<std::size_t>(layout.slots_of(static_cast<int>(k)));
    total.stored += slots * slot.stored;
    total.fp32 += slots * slot.fp32;
  }
  // kFull: one workspace shared by every block, chunk and slot.
  if (layout.recompute == Recompute::kFull && stage.layers() > 0) {
    total.stored += workspace.stored;
    total.fp32 += workspace.fp32;
  }
  // Backward scratch: dresidual (R C) + dln (BTC); dqkv(3) + datty + dup(4) = 8 BTCl (GELU's
  // backward runs in place in dup); and the attention workspace, which forward uses as well.
  total.stored += rc + btc + 8 * btcl;
  total.fp32 += attention_scratch;
  // tp > 1 on the stage with the head: every rank's row statistics (3 BT floats each), gathered
  // for the vocabulary-parallel loss; forward scratch, holding nothing between micro-batches.
  if (tp > 1 && stage.chunks.back().last) total.fp32 += 3 * bt * static_cast<std::size_t>(tp);
  if (layout.storage != kernels::Precision::kFp32) total.staging = staging_floats(c, bt, t, layout, stage);
  return total;
}

std::size_t activation_floats(const GptConfig& c, int B, int T, std::size_t attention_scratch,
                              const GptLayout& layout) {
  const ActivationSizes sizes = activation_sizes(c, B, T, attention_scratch, layout);
  return sizes.stored + sizes.fp32;
}

std::size_t activation_bytes(const GptConfig& c, int B, int T, std::size_t attention_scratch,
                             const GptLayout& layout) {
  return activation_sizes(c, B, T, attention_scratch, layout).bytes(layout.storage);
}

}  // namespace trident::model
