#include "src/model/gpt.h"

#include <algorithm>  // std::min, std::max
#include <cmath>
#include <optional>
#include <stdexcept>  // std::logic_error
#include <string>
#include <utility>  // std::swap
#include <vector>

namespace trident::model {

Gpt::Gpt(const GptConfig& config, kernels::Backend& backend, int B, int T, GptOptions options)
    : config_(config),
      backend_(backend),
      B_(B),
      T_(T),
      layout_(options.layout),
      stage_(layout_.stage(config)),
      tp_(options.tensor_parallel),
      vocab_(parallel::vocab_shard(config.padded_vocab, config.vocab, layout_.tp, layout_.tp_rank)),
      local_hidden_(config.hidden / layout_.tp),
      local_heads_(config.heads / layout_.tp),
      sp_(layout_.sequence_parallel && layout_.tp > 1),
      rows_(sp_ ? B * T / layout_.tp : B * T),
      table_(build_gpt_param_table(config, layout_)) {
  layout_.native_16bit = backend.native_16bit();
  if (tp_.size() != layout_.tp || tp_.rank() != layout_.tp_rank) {
    throw std::logic_error("Gpt: the tensor group does not match layout.tp / layout.tp_rank");
  }
  if (sp_ && (B * T) % layout_.tp != 0) {
    throw std::logic_error("Gpt: sequence parallelism needs B*T = " + std::to_string(B * T) +
                           " divisible by tp = " + std::to_string(layout_.tp));
  }
  arena_size_ = std::max(options.arena_size, table_.total_count());
  if (layout_.storage == kernels::Precision::kFp32) {
    params_ = backend_.allocate(arena_size_);
  } else {
    // Two 16-bit values per float of the allocation.
    params_ = kernels::ActPtr(reinterpret_cast<uint16_t*>(backend_.allocate((arena_size_ + 1) / 2)), layout_.storage);
  }
  grads_ = backend_.allocate(arena_size_);
  backend_.fill_zero(params_, arena_size_);
  backend_.fill_zero(grads_, arena_size_);
  if (stage_.first || stage_.last) wte_offset_ = table_.find("wte").offset;
  if (stage_.first) wpe_offset_ = table_.find("wpe").offset;
  auto end_of = [&](const std::string& name) {
    const ParamTensor& t = table_.find(name);
    return t.offset + t.count;
  };
  if (stage_.first) embeddings_end_ = std::max(end_of("wte"), end_of("wpe"));
  if (stage_.last) {
    lnf_w_offset_ = table_.find("ln_f.weight").offset;
    lnf_b_offset_ = table_.find("ln_f.bias").offset;
  }
  for (const ChunkLayout& chunk : stage_.chunks) {
    chunk_first_block_.push_back(static_cast<int>(layer_offsets_.size()));
    for (int l = chunk.first_layer; l < chunk.end_layer; ++l) {
      auto at = [&](const char* part) { return table_.find(block_tensor_name(l, part)).offset; };
      layer_offsets_.push_back({at("ln1.weight"), at("ln1.bias"), at("attn.qkv.weight"), at("attn.qkv.bias"),
                                at("attn.proj.weight"), at("attn.proj.bias"), at("ln2.weight"), at("ln2.bias"),
                                at("mlp.up.weight"), at("mlp.up.bias"), at("mlp.down.weight"),
                                at("mlp.down.bias")});
      // build_gpt_param_table adds a block's tensors in a run, mlp.down.bias last.
      block_ends_.push_back(end_of(block_tensor_name(l, "mlp.down.bias")));
    }
  }
  if (sp_) {
    for (const auto& t : table_.tensors()) {
      const std::string& name = t.spec.name;
      const bool layernorm = name.find(".ln1.") != std::string::npos || name.find(".ln2.") != std::string::npos ||
                             name.rfind("ln_f.", 0) == 0;
      if (!layernorm) continue;
      if (!sp_partial_grads_.empty() && sp_partial_grads_.back().first + sp_partial_grads_.back().second == t.offset) {
        sp_partial_grads_.back().second += t.count;  // weight and bias side by side: one call
      } else {
        sp_partial_grads_.emplace_back(t.offset, t.count);
      }
    }
  }
  const std::size_t scratch = backend_.attention_scratch_size(B_, T_, local_heads_);
  activation_sizes_ = activation_sizes(config_, B_, T_, scratch, layout_);
  const std::size_t stored_bytes = activation_sizes_.stored * kernels::precision_bytes(layout_.storage);
  stored_arena_ = backend_.allocate((stored_bytes + sizeof(float) - 1) / sizeof(float));
  fp32_arena_ = backend_.allocate(activation_sizes_.fp32);
  carve_activations();
  const auto n = static_cast<std::size_t>(B_) * T_;
  for (Slot& s : slots_) {
    s.tokens = backend_.allocate_tokens(n);
    s.targets = backend_.allocate_tokens(n);
  }
  host_losses_.resize(n);
  if (tp_.active()) {
    host_row_max_.resize(n);
    host_row_sums_.resize(2 * n);
  }
}

Gpt::~Gpt() {
  for (Slot& s : slots_) {
    backend_.release_tokens(s.targets);
    backend_.release_tokens(s.tokens);
  }
  backend_.release(fp32_arena_);
  backend_.release(static_cast<float*>(stored_arena_));
  backend_.release(grads_);
  backend_.release(static_cast<float*>(params_.get()));
}

void Gpt::carve_activations() {
  const auto b = static_cast<std::size_t>(B_), t = static_cast<std::size_t>(T_);
  const std::size_t C = static_cast<std::size_t>(config_.hidden);
  const std::size_t btc = b * t * C, bt = b * t;
  const std::size_t btcl = btc / static_cast<std::size_t>(tp_.size());
  // The sequence-parallel regions: this rank's rows (all of them without sequence parallelism).
  const auto rows = static_cast<std::size_t>(rows_);
  const std::size_t rc = rows * C;
  // Two cursors: the activations in the layout's storage, the statistics and workspace in fp32.
  const kernels::ActPtr stored_begin = layout_.storage == kernels::Precision::kFp32
                                           ? kernels::ActPtr(static_cast<float*>(stored_arena_))
                                           : kernels::ActPtr(static_cast<uint16_t*>(stored_arena_), layout_.storage);
  kernels::ActPtr cursor = stored_begin;
  auto take = [&cursor](std::size_t n) {
    const kernels::ActPtr p = cursor;
    cursor = cursor + n;
    return p;
  };
  float* fp32_cursor = fp32_arena_;
  auto take_fp32 = [&fp32_cursor](std::size_t n) {
    float* p = fp32_cursor;
    fp32_cursor += n;
    return p;
  };
  auto take_block = [&](LayerActivations& a) {
    a.ln1 = take(btc);  // full rows (gathered with sequence parallelism): the QKV matmul's input
    a.ln1_mean = take_fp32(rows);
    a.ln1_rstd = take_fp32(rows);
    a.qkv = take(3 * btcl);
    a.lse = take_fp32(b * static_cast<std::size_t>(local_heads_) * t);
    a.atty = take(btcl);
    a.residual2 = take(rc);
    a.ln2 = take(btc);
    a.ln2_mean = take_fp32(rows);
    a.ln2_rstd = take_fp32(rows);
    a.up = take(4 * btcl);
    a.up_gelu = take(4 * btcl);
  };
  LayerActivations workspace{};
  if (layout_.recompute == Recompute::kFull && stage_.layers() > 0) take_block(workspace);
  const bool multi_chunk = stage_.chunks.size() > 1;
  if (!layout_.chunk_slots.empty() && layout_.chunk_slots.size() != stage_.chunks.size()) {
    throw std::logic_error("Gpt: " + std::to_string(layout_.chunk_slots.size()) + " chunk slot counts for " +
                           std::to_string(stage_.chunks.size()) + " chunks");
  }
  std::vector<std::size_t> chunk_of_slot;
  chunk_first_slot_.clear();
  for (std::size_t c = 0; c < stage_.chunks.size(); ++c) {
    chunk_first_slot_.push_back(chunk_of_slot.size());
    chunk_of_slot.insert(chunk_of_slot.end(), static_cast<std::size_t>(layout_.slots_of(static_cast<int>(c))), c);
  }
  slots_.resize(chunk_of_slot.size());
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    const ChunkLayout& chunk = stage_.chunks[chunk_of_slot[i]];
    s.encoded = take(rc);
    if (multi_chunk) s.input_grad = take(rc);
    s.layers.resize(static_cast<std::size_t>(chunk.layers()));
    for (auto& a : s.layers) {
      if (layout_.recompute == Recompute::kNone) {
        take_block(a);
      } else {
        a = workspace;
      }
      a.out = take(rc);
    }
    if (chunk.last) {
      s.lnf = take(btc);  // full rows: the LM head's input
      s.lnf_mean = take_fp32(rows);
      s.lnf_rstd = take_fp32(rows);
      // 16-bit when the cross-entropy reads them so (GptLayout::logits_16bit), else fp32
      // (holding rounded values under 16-bit storage).
      const std::size_t logits = bt * static_cast<std::size_t>(vocab_.size());
      s.logits = layout_.logits_16bit() ? take(logits) : kernels::ActPtr(take_fp32(logits));
      s.losses = take_fp32(bt);
      s.row_max = take_fp32(bt);
      s.row_sums = take_fp32(tp_.active() ? 2 * bt : bt);
    }
  }
  dresidual_ = take(rc);
  dln_ = take(btc);
  dqkv_ = take(3 * btcl);
  datty_ = take(btcl);
  dup_ = take(4 * btcl);
  attention_scratch_ = take_fp32(backend_.attention_scratch_size(B_, T_, local_heads_));
  if (tp_.active() && stage_.chunks.back().last) {
    shard_statistics_ = take_fp32(3 * bt * static_cast<std::size_t>(tp_.size()));
  }
  if (cursor.get() != (stored_begin + activation_sizes_.stored).get() ||
      fp32_cursor != fp32_arena_ + activation_sizes_.fp32) {
    throw std::logic_error("Gpt: the activation arena was carved differently from activation_sizes()");
  }
}

kernels::ConstActPtr Gpt::block_input(const Slot& s, int l) const {
  return l == 0 ? s.encoded : s.layers[static_cast<std::size_t>(l - 1)].out;
}

kernels::ConstActPtr Gpt::stage_output(int slot, int chunk) const {
  const Slot& s = slot_of(slot, chunk);
  return s.layers.empty() ? s.encoded : s.layers.back().out;
}

kernels::ConstActPtr Gpt::input_grad(int slot, int chunk) const {
  return stage_.chunks.size() > 1 ? slot_of(slot, chunk).input_grad : dresidual_;
}

void Gpt::set_parameters(std::size_t offset, const float* host_values, std::size_t count) {
  if (offset > arena_size_ || count > arena_size_ - offset) {
    throw std::logic_error("Gpt::set_parameters: elements beyond the parameter arena");
  }
  if (params_.is_fp32()) {
    backend_.copy_to_device(params_.f32() + offset, host_values, count);
    return;
  }
  std::vector<uint16_t> bits(count);
  for (std::size_t i = 0; i < count; ++i) bits[i] = kernels::encode_16bit(host_values[i], layout_.storage);
  backend_.copy_bytes_to_device((params_ + offset).get(), bits.data(), params_.bytes(count));
}

template <class Ptr>
Gpt::LayerTensors<Ptr> Gpt::layer_tensors(Ptr arena, int local_layer) const {
  const LayerOffsets& o = layer_offsets_[static_cast<std::size_t>(local_layer)];
  return {arena + o.ln1_w, arena + o.ln1_b,  arena + o.qkv_w, arena + o.qkv_b, arena + o.proj_w, arena + o.proj_b,
          arena + o.ln2_w, arena + o.ln2_b, arena + o.up_w,  arena + o.up_b,  arena + o.down_w, arena + o.down_b};
}

void Gpt::block_forward(int local_layer, kernels::ConstActPtr x_in, const LayerActivations& a,
                        const LayerActivations* previous, bool complete_output) {
  const int B = B_, T = T_, C = config_.hidden, Cl = local_hidden_, NHl = local_heads_;
  const int N = B * T, R = rows_;
  const std::size_t btc = static_cast<std::size_t>(N) * C;
  const std::size_t rc = static_cast<std::size_t>(R) * C;  // this rank's rows (btc without sp_)
  const auto p = layer_tensors<kernels::ConstActPtr>(params_, local_layer);
  // A replicated bias of a row-parallel matmul joins the partial sums on one tensor rank only
  // (with sequence parallelism too: before the reduce-scatter, so it is counted once).
  const bool adds_bias = tp_.rank() == 0;
  // A LayerNorm writes this rank's rows of `full`; then every rank gets the full rows for a
  // column-parallel matmul.
  auto own_rows = [&](kernels::ActPtr full) { return sp_ ? tp_.own_block(full, rc) : full; };
  auto share_full_rows = [&](kernels::ActPtr full) {
    if (sp_) {
      tp_.gather_from_sp_forward(full, rc);
    } else {
      tp_.copy_to_tp_forward(full, btc);
    }
  };
  // A row-parallel matmul into this rank's rows of `dst`, its partial sums combined.
  auto row_parallel = [&](kernels::ActPtr dst, kernels::ConstActPtr inp, kernels::ConstActPtr w,
                          kernels::ConstActPtr bias, int in_channels) {
    const kernels::ActPtr partial = sp_ ? dln_ : dst;  // full rows; dln_ is free between backward's kernels
    backend_.matmul_forward(partial, inp, w, adds_bias ? bias : kernels::ConstActPtr(), N, in_channels, C);
    if (sp_) {
      tp_.scatter_to_sp_forward(partial, dst, rc);
    } else {
      tp_.reduce_from_tp_forward(dst, btc);
    }
  };
  if (previous != nullptr) {
    // x_in = previous->out += previous->residual2, and its LayerNorm, in one pass.
    backend_.residual_layernorm_forward(previous->out, own_rows(a.ln1), a.ln1_mean, a.ln1_rstd, previous->out,
                                        previous->residual2, p.ln1_w, p.ln1_b, R, C);
  } else {
    backend_.layernorm_forward(own_rows(a.ln1), a.ln1_mean, a.ln1_rstd, x_in, p.ln1_w, p.ln1_b, R, C);
  }
  share_full_rows(a.ln1);
  backend_.matmul_forward(a.qkv, a.ln1, p.qkv_w, p.qkv_b, N, C, 3 * Cl);
  backend_.attention_forward(a.atty, a.lse, attention_scratch_, a.qkv, B, T, Cl, NHl);
  row_parallel(a.residual2, a.atty, p.proj_w, p.proj_b, Cl);
  // residual2 += x_in and its LayerNorm in one pass (the same bits as the add, then the norm).
  backend_.residual_layernorm_forward(a.residual2, own_rows(a.ln2), a.ln2_mean, a.ln2_rstd, a.residual2, x_in, p.ln2_w,
                                      p.ln2_b, R, C);
  share_full_rows(a.ln2);
  // up = ln2 W_up^T + b, up_gelu = gelu(up): one call, so that a backend can fuse them.
  backend_.matmul_gelu_forward(a.up_gelu, a.up, a.ln2, p.up_w, p.up_b, N, C, 4 * Cl);
  row_parallel(a.out, a.up_gelu, p.down_w, p.down_b, 4 * Cl);
  if (complete_output) backend_.add(a.out, a.out, a.residual2, rc);
}

kernels::ActPtr Gpt::full_output_grad() {
  const std::size_t btc = static_cast<std::size_t>(B_) * T_ * config_.hidden;
  if (!sp_) {
    tp_.reduce_from_tp_backward(dresidual_, btc);
    return dresidual_;
  }
  tp_.scatter_to_sp_backward(dresidual_, dln_, static_cast<std::size_t>(rows_) * config_.hidden);
  return dln_;
}

kernels::ConstActPtr Gpt::own_input_grad() {
  const std::size_t btc = static_cast<std::size_t>(B_) * T_ * config_.hidden;
  if (!sp_) {
    tp_.copy_to_tp_backward(dln_, btc);  // each rank's dln_ covered its own channels only
    return dln_;
  }
  const std::size_t rc = static_cast<std::size_t>(rows_) * config_.hidden;
  tp_.gather_from_sp_backward(dln_, rc);
  return tp_.own_block(dln_, rc);
}

void Gpt::block_backward(int local_layer, kernels::ConstActPtr x_in, const LayerActivations& a) {
  const int B = B_, T = T_, C = config_.hidden, Cl = local_hidden_, NHl = local_heads_;
  const int N = B * T, R = rows_;
  const auto p = layer_tensors<kernels::ConstActPtr>(params_, local_layer);
  const auto g = layer_tensors<float*>(grads_, local_layer);
  // out = residual2 + down(gelu(up(ln2(residual2)))). The output gradient of the full rows is
  // the same on every tensor rank, so the replicated down bias gets the same (whole) gradient
  // everywhere.
  kernels::ConstActPtr dout = full_output_grad();
  // Activation gradients are overwritten by each call (no zero-fills). dup_ is the gradient of
  // the GELU's input, up: the down projection's backward taken through the GELU in one call.
  backend_.matmul_backward_through_gelu(dup_, g.down_w, g.down_b, dout, a.up_gelu, p.down_w, a.up, N, 4 * Cl, C);
  backend_.matmul_backward(dln_, g.up_w, g.up_b, dup_, a.ln2, p.up_w, N, C, 4 * Cl);
  // With sequence parallelism the LayerNorm gradients below cover this rank's rows only: a
  // partial sum (reduce_sequence_parallel_gradients).
  backend_.layernorm_backward(dresidual_, g.ln2_w, g.ln2_b, own_input_grad(), a.residual2, p.ln2_w, a.ln2_mean,
                              a.ln2_rstd, R, C);
  // residual2 = x_in + proj(attention(qkv(ln1(x_in))))
  dout = full_output_grad();
  backend_.matmul_backward(datty_, g.proj_w, g.proj_b, dout, a.atty, p.proj_w, N, Cl, C);
  // a.atty is this block's attention output under every recompute mode (the proj backward above
  // reads it too): kNone keeps it per block, kFull has just re-run the block into the workspace.
  backend_.attention_backward(dqkv_, attention_scratch_, datty_, a.qkv, a.atty, a.lse, B, T, Cl, NHl);
  backend_.matmul_backward(dln_, g.qkv_w, g.qkv_b, dqkv_, a.ln1, p.qkv_w, N, C, 3 * Cl);
  backend_.layernorm_backward(dresidual_, g.ln1_w, g.ln1_b, own_input_grad(), x_in, p.ln1_w, a.ln1_mean,
                              a.ln1_rstd, R, C);
}

void Gpt::zero_gradients() { backend_.fill_zero(grads_, arena_size_); }

double Gpt::forward(int slot, int chunk_index, const int32_t* tokens, const int32_t* targets,
                    std::optional<float> training_dloss) {
  Slot& s = slot_of(slot, chunk_index);
  const ChunkLayout& chunk = stage_.chunks[static_cast<std::size_t>(chunk_index)];
  const int first_block = chunk_first_block_[static_cast<std::size_t>(chunk_index)];
  const int B = B_, T = T_, C = config_.hidden;
  const int N = B * T;
  const std::size_t btc = static_cast<std::size_t>(N) * C;
  const std::size_t rc = static_cast<std::size_t>(rows_) * C;
  if (chunk.first) {
    wait_for_parameters_below(embeddings_end_);
    backend_.copy_tokens_to_device(s.tokens, tokens, static_cast<std::size_t>(N));
    // Vocabulary-parallel embedding: each rank looks up the tokens it owns (zero for the
    // others), tensor rank 0 adds the positions, and the all-reduce assembles the sum (with
    // sequence parallelism: the reduce-scatter, each rank keeping its rows).
    const kernels::ActPtr lookup = sp_ ? dln_ : s.encoded;  // full rows
    backend_.embedding_forward(lookup, s.tokens, params_ + wte_offset_,
                               tp_.rank() == 0 ? params_ + wpe_offset_ : kernels::ActPtr(), B, T, C, vocab_.begin,
                               vocab_.end);
    if (sp_) {
      tp_.scatter_to_sp_forward(lookup, s.encoded, rc);
    } else {
      tp_.reduce_from_tp_forward(s.encoded, btc);
    }
  }
  // Each block's closing residual add waits for the next LayerNorm (block_forward): the next
  // block's first, or the final one on the model's last chunk. Another chunk's last block makes
  // its own, as its output leaves for the next stage or chunk.
  const int layers = chunk.layers();
  for (int l = 0; l < layers; ++l) {
    const auto i = static_cast<std::size_t>(l);
    wait_for_parameters_below(block_ends_[static_cast<std::size_t>(first_block + l)]);
    block_forward(first_block + l, block_input(s, l), s.layers[i], l > 0 ? &s.layers[i - 1] : nullptr,
                  l + 1 == layers && !chunk.last);
  }
  workspace_slot_ = slot;
  workspace_chunk_ = chunk_index;
  if (!chunk.last) return 0.0;

  s.logits_gradient_dloss.reset();
  wait_for_parameters_below(table_.total_count());  // ln_f, and wte for the LM head
  backend_.copy_tokens_to_device(s.targets, targets, static_cast<std::size_t>(N));
  const kernels::ActPtr own_lnf = sp_ ? tp_.own_block(s.lnf, rc) : s.lnf;
  if (layers > 0) {
    // The last block's output += its residual2, and the final LayerNorm of the sum, in one pass.
    const LayerActivations& last = s.layers.back();
    backend_.residual_layernorm_forward(last.out, own_lnf, s.lnf_mean, s.lnf_rstd, last.out, last.residual2,
                                        params_ + lnf_w_offset_, params_ + lnf_b_offset_, rows_, C);
  } else {
    backend_.layernorm_forward(own_lnf, s.lnf_mean, s.lnf_rstd, stage_output(slot, chunk_index),
                               params_ + lnf_w_offset_, params_ + lnf_b_offset_, rows_, C);
  }
  if (sp_) {
    tp_.gather_from_sp_forward(s.lnf, rc);
  } else {
    tp_.copy_to_tp_forward(s.lnf, btc);
  }
  backend_.matmul_forward(s.logits, s.lnf, params_ + wte_offset_, nullptr, N, C, vocab_.size());
  if (tp_.active()) return sharded_loss_sum(s);
  if (training_dloss) {
    // The logits' gradient in the loss's pass over them (dlogits = logits, as head_backward's).
    backend_.cross_entropy_forward_backward(s.losses, s.row_max, s.row_sums, s.logits, s.logits, s.targets,
                                            *training_dloss, N, config_.vocab, config_.padded_vocab);
    s.logits_gradient_dloss = training_dloss;
  } else {
    backend_.cross_entropy_forward(s.losses, s.row_max, s.row_sums, s.logits, s.targets, N, config_.vocab,
                                   config_.padded_vocab);
  }
  backend_.copy_to_host(host_losses_.data(), s.losses, host_losses_.size());
  double sum = 0.0;
  for (float loss : host_losses_) sum += loss;
  return sum;
}

double Gpt::sharded_loss_sum(Slot& s) {
  const int N = B_ * T_;
  const auto n = static_cast<std::size_t>(N);
  // loss = log(sum of exp(l - max)) + max - target logit, each term combined over the group:
  // one statistics kernel over this rank's logits, one all-gather of every rank's (max, sum,
  // target logit), and every rank combines the same blocks into the same statistics.
  const std::size_t block = 3 * n;
  float* own = shard_statistics_ + static_cast<std::size_t>(tp_.rank()) * block;
  backend_.cross_entropy_shard_statistics(own, s.logits, s.targets, N, vocab_.real, vocab_.size(), vocab_.begin);
  tp_.all_gather_in_place(shard_statistics_, block);
  backend_.cross_entropy_combine_shards(s.row_max, s.row_sums, s.row_sums + n, shard_statistics_, N, tp_.size());
  backend_.copy_to_host(host_row_max_.data(), s.row_max, n);
  backend_.copy_to_host(host_row_sums_.data(), s.row_sums, 2 * n);
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    sum += std::log(static_cast<double>(host_row_sums_[i])) + host_row_max_[i] - host_row_sums_[n + i];
  }
  return sum;
}

void Gpt::head_backward(Slot& s, float dloss) {
  const int N = B_ * T_, C = config_.hidden;
  // logits -> dlogits in place, then into ln_f and the tied embedding.
  // With the row statistics of the forward (both tp cases; without tp the shard is the whole
  // vocabulary), so this pass reads each logit once: no max or sum pass over the row again.
  // A training forward may have made the gradient already (forward's training_dloss).
  const kernels::ActPtr dlogits = s.logits;
  if (!s.logits_gradient_dloss) {
    backend_.cross_entropy_backward_sharded(dlogits, s.logits, s.targets, s.row_max, s.row_sums, dloss, N,
                                            vocab_.real, vocab_.size(), vocab_.begin);
  } else if (*s.logits_gradient_dloss != dloss) {
    throw std::logic_error("Gpt::backward: dloss " + std::to_string(dloss) + " is not the " +
                           std::to_string(*s.logits_gradient_dloss) +
                           " its training forward made the logits' gradient with");
  }
  backend_.matmul_backward(dln_, grads_ + wte_offset_, nullptr, dlogits, s.lnf, params_ + wte_offset_, N, C,
                           vocab_.size());
  const kernels::ConstActPtr dlnf = own_input_grad();
  backend_.fill_zero(dresidual_, static_cast<std::size_t>(rows_) * C);
  backend_.layernorm_backward(dresidual_, grads_ + lnf_w_offset_, grads_ + lnf_b_offset_, dlnf,
                              s.layers.empty() ? s.encoded : s.layers.back().out, params_ + lnf_w_offset_, s.lnf_mean, s.lnf_rstd, rows_, C);
}

void Gpt::backward(int slot, int chunk_index, float dloss, const std::function<void(std::size_t)>& grads_final) {
  Slot& s = slot_of(slot, chunk_index);
  const ChunkLayout& chunk = stage_.chunks[static_cast<std::size_t>(chunk_index)];
  const int first_block = chunk_first_block_[static_cast<std::size_t>(chunk_index)];
  const int B = B_, T = T_, C = config_.hidden;
  auto final_from = [&](std::size_t offset) {
    if (grads_final) grads_final(offset);
  };
  if (chunk.last) {
    head_backward(s, dloss);
    final_from(lnf_w_offset_);
  }
  // Otherwise dresidual_ holds d(loss)/d(chunk output), received from the next virtual stage.

  // Blocks in reverse; dresidual_ carries d(loss)/d(residual stream) downwards.
  const int layers = chunk.layers();
  for (int l = layers - 1; l >= 0; --l) {
    const LayerActivations& a = s.layers[static_cast<std::size_t>(l)];
    const kernels::ConstActPtr x_in = block_input(s, l);
    // Under kFull the shared workspace holds the last forward's last block; every other block
    // (and that one too when another slot ran forward since) is re-run from its kept input:
    // same kernels, same inputs, hence the same bits as kNone. The re-run also rewrites a.out,
    // the input of block l + 1, whose backward is already done, with the values it holds.
    if (layout_.recompute == Recompute::kFull &&
        (l + 1 < layers || workspace_slot_ != slot || workspace_chunk_ != chunk_index)) {
      block_forward(first_block + l, x_in, a, nullptr, true);  // x_in complete; a.out rewritten whole
      workspace_slot_ = -1;
      workspace_chunk_ = -1;
    }
    block_backward(first_block + l, x_in, a);
    final_from(layer_offsets_[static_cast<std::size_t>(first_block + l)].ln1_w);  // the block's first tensor
  }
  if (chunk.first) {
    // Every rank gets the output gradient of all rows, so wpe's gradient (positions added by
    // tensor rank 0 before the reduction) is whole on every rank, with or without sequence
    // parallelism.
    backend_.embedding_backward(grads_ + wte_offset_, grads_ + wpe_offset_, full_output_grad(), s.tokens, B, T, C,
                                vocab_.begin, vocab_.end);
  } else if (stage_.chunks.size() > 1) {
    // Kept by the slot: its send may be deferred past later backwards, which reuse dresidual_.
    // The two buffers have the same size: trade them instead of copying.
    std::swap(s.input_grad, dresidual_);
  }
  // Below the chunk's first block lie the earlier chunks' blocks, whose backwards come later; the
  // embeddings (offset 0 up) are final only after chunk 0's.
  if (chunk_index == 0) final_from(0);
}

void Gpt::reduce_sequence_parallel_gradients() {
  for (const auto& [offset, count] : sp_partial_grads_) tp_.all_reduce_sum(grads_ + offset, count);
}

}  // namespace trident::model
