#include "src/model/gpt.h"

#include <algorithm>  // std::min, std::max
#include <cmath>
#include <stdexcept>  // std::logic_error
#include <string>

namespace trident::model {

namespace {

// Floats of one block's forward state for [B, T] other than its output `out` (BTC): what the
// shared workspace holds under Recompute::kFull. Cl = C / tp channels are this rank's.
std::size_t block_workspace_floats(const GptConfig& c, std::size_t B, std::size_t T, int tp) {
  const std::size_t btc = B * T * static_cast<std::size_t>(c.hidden);
  const std::size_t btcl = btc / static_cast<std::size_t>(tp);
  const std::size_t bt = B * T;
  const std::size_t att = B * static_cast<std::size_t>(c.heads / tp) * T * T;
  // ln1 + residual2 + ln2 (full width) = 3 BTC; qkv(3) + atty + up(4) + up_gelu(4) = 12 BTCl;
  // 4 norm statistics per row. (tp = 1: 15 BTC.)
  return 3 * btc + 12 * btcl + 4 * bt + att;
}

std::string block_name(int layer, const char* part) {
  return "block" + std::to_string(layer) + "." + part;
}

}  // namespace

std::size_t activation_floats(const GptConfig& c, int B, int T, std::size_t attention_scratch,
                              Recompute recompute, int tp) {
  const auto b = static_cast<std::size_t>(B), t = static_cast<std::size_t>(T);
  const std::size_t btc = b * t * static_cast<std::size_t>(c.hidden);
  const std::size_t btcl = btc / static_cast<std::size_t>(tp);
  const std::size_t bt = b * t;
  const auto layers = static_cast<std::size_t>(c.layers);
  // Every block's output is kept in both modes (it is the next block's input, or ln_f's).
  // kNone keeps each block's intermediates; kFull one shared set.
  const std::size_t block_state = layers * btc /*out*/ +
                                  (recompute == Recompute::kNone ? layers : std::min<std::size_t>(layers, 1)) *
                                      block_workspace_floats(c, b, t, tp);
  const std::size_t vocab_stats = tp > 1 ? 3 * bt : 0;  // row max, row sum of exp, target logit
  const std::size_t forward_state = btc /*encoded*/ + block_state + btc /*lnf*/ + 2 * bt +
                                    bt * static_cast<std::size_t>(c.padded_vocab / tp) /*logits*/ +
                                    bt /*losses*/ + vocab_stats;
  // dresidual + dln = 2 BTC; dqkv(3) + datty + dup_gelu(4) + dup(4) = 12 BTCl
  const std::size_t backward_scratch = 2 * btc + 12 * btcl + attention_scratch;
  return forward_state + backward_scratch;
}

ParamTable build_gpt_param_table(const GptConfig& c, int tp, int tp_rank) {
  ParamTable table;
  // Tensor-parallel slices: this rank's share of `axis` (whole tensors when tp = 1).
  auto split = [tp, tp_rank](TensorSpec spec, int axis) {
    if (tp > 1) {
      const int64_t extent = spec.global_shape[static_cast<std::size_t>(axis)] / tp;
      spec.split_axis = axis;
      spec.slice_begin = extent * tp_rank;
      spec.slice_extent = extent;
    }
    return spec;
  };
  const int64_t C = c.hidden;
  const float std_init = 0.02f;
  // GPT-2: the projections that write into the residual stream are scaled by 1/sqrt(2 L), so
  // the residual variance does not grow with depth.
  const float residual_std = std_init / std::sqrt(2.0f * static_cast<float>(c.layers));
  auto normal = [](std::string name, std::vector<int64_t> shape, float sd) {
    TensorSpec s;
    s.name = std::move(name);
    s.global_shape = std::move(shape);
    s.init = InitKind::kNormal;
    s.init_std = sd;
    s.weight_decay = true;
    return s;
  };
  auto constant = [](std::string name, std::vector<int64_t> shape, InitKind kind) {
    TensorSpec s;
    s.name = std::move(name);
    s.global_shape = std::move(shape);
    s.init = kind;
    return s;
  };
  TensorSpec wte = normal("wte", {c.padded_vocab, C}, std_init);
  wte.init_rows = c.vocab;  // padded rows stay zero: they never see a token or a target
  table.add(split(wte, 0));  // vocabulary-parallel
  table.add(normal("wpe", {c.context, C}, std_init));
  for (int l = 0; l < c.layers; ++l) {
    table.add(constant(block_name(l, "ln1.weight"), {C}, InitKind::kOnes));
    table.add(constant(block_name(l, "ln1.bias"), {C}, InitKind::kZeros));
    // q, k, v stacked on a leading axis of 3, so that a head split is one hyperslab: [3, C/tp, C]
    // is this rank's q, k and v rows for its heads (column-parallel).
    table.add(split(normal(block_name(l, "attn.qkv.weight"), {3, C, C}, std_init), 1));
    table.add(split(constant(block_name(l, "attn.qkv.bias"), {3, C}, InitKind::kZeros), 1));
    // Row-parallel: the input channels (axis 1 of [out, in]) are split; the bias is replicated.
    table.add(split(normal(block_name(l, "attn.proj.weight"), {C, C}, residual_std), 1));
    table.add(constant(block_name(l, "attn.proj.bias"), {C}, InitKind::kZeros));
    table.add(constant(block_name(l, "ln2.weight"), {C}, InitKind::kOnes));
    table.add(constant(block_name(l, "ln2.bias"), {C}, InitKind::kZeros));
    table.add(split(normal(block_name(l, "mlp.up.weight"), {4 * C, C}, std_init), 0));  // column-parallel
    table.add(split(constant(block_name(l, "mlp.up.bias"), {4 * C}, InitKind::kZeros), 0));
    table.add(split(normal(block_name(l, "mlp.down.weight"), {C, 4 * C}, residual_std), 1));  // row-parallel
    table.add(constant(block_name(l, "mlp.down.bias"), {C}, InitKind::kZeros));
  }
  table.add(constant("ln_f.weight", {C}, InitKind::kOnes));
  table.add(constant("ln_f.bias", {C}, InitKind::kZeros));
  return table;
}

Gpt::Gpt(const GptConfig& config, kernels::Backend& backend, int B, int T, GptOptions options)
    : config_(config),
      backend_(backend),
      B_(B),
      T_(T),
      recompute_(options.recompute),
      tp_(options.tensor_parallel),
      vocab_(parallel::vocab_shard(config.padded_vocab, config.vocab, tp_.size(), tp_.rank())),
      local_hidden_(config.hidden / tp_.size()),
      local_heads_(config.heads / tp_.size()),
      table_(build_gpt_param_table(config, tp_.size(), tp_.rank())) {
  arena_size_ = std::max(options.arena_size, table_.total_count());
  params_ = backend_.allocate(arena_size_);
  grads_ = backend_.allocate(arena_size_);
  backend_.fill_zero(params_, arena_size_);
  backend_.fill_zero(grads_, arena_size_);
  wte_offset_ = table_.find("wte").offset;
  wpe_offset_ = table_.find("wpe").offset;
  lnf_w_offset_ = table_.find("ln_f.weight").offset;
  lnf_b_offset_ = table_.find("ln_f.bias").offset;
  for (int l = 0; l < config_.layers; ++l) {
    auto at = [&](const char* part) { return table_.find(block_name(l, part)).offset; };
    layer_offsets_.push_back({at("ln1.weight"), at("ln1.bias"), at("attn.qkv.weight"), at("attn.qkv.bias"),
                              at("attn.proj.weight"), at("attn.proj.bias"), at("ln2.weight"), at("ln2.bias"),
                              at("mlp.up.weight"), at("mlp.up.bias"), at("mlp.down.weight"), at("mlp.down.bias")});
  }
  const std::size_t scratch = backend_.attention_scratch_size(B_, T_, local_heads_);
  activation_count_ = activation_floats(config_, B_, T_, scratch, recompute_, tp_.size());
  activations_ = backend_.allocate(activation_count_);
  carve_activations();
  tokens_ = backend_.allocate_tokens(static_cast<std::size_t>(B_) * T_);
  targets_ = backend_.allocate_tokens(static_cast<std::size_t>(B_) * T_);
  host_losses_.resize(static_cast<std::size_t>(B_) * T_);
  if (tp_.active()) {
    host_row_max_.resize(host_losses_.size());
    host_row_sums_.resize(2 * host_losses_.size());
  }
}

Gpt::~Gpt() {
  backend_.release_tokens(targets_);
  backend_.release_tokens(tokens_);
  backend_.release(activations_);
  backend_.release(grads_);
  backend_.release(params_);
}

void Gpt::carve_activations() {
  const auto b = static_cast<std::size_t>(B_), t = static_cast<std::size_t>(T_);
  const std::size_t C = static_cast<std::size_t>(config_.hidden);
  const std::size_t btc = b * t * C, bt = b * t;
  const std::size_t btcl = btc / static_cast<std::size_t>(tp_.size());
  float* cursor = activations_;
  auto take = [&cursor](std::size_t n) {
    float* p = cursor;
    cursor += n;
    return p;
  };
  auto take_block = [&](LayerActivations& a) {
    a.ln1 = take(btc);
    a.ln1_mean = take(bt);
    a.ln1_rstd = take(bt);
    a.qkv = take(3 * btcl);
    a.att = take(b * static_cast<std::size_t>(local_heads_) * t * t);
    a.atty = take(btcl);
    a.residual2 = take(btc);
    a.ln2 = take(btc);
    a.ln2_mean = take(bt);
    a.ln2_rstd = take(bt);
    a.up = take(4 * btcl);
    a.up_gelu = take(4 * btcl);
  };
  encoded_ = take(btc);
  layers_.resize(static_cast<std::size_t>(config_.layers));
  if (recompute_ == Recompute::kNone) {
    for (auto& a : layers_) {
      take_block(a);
      a.out = take(btc);
    }
  } else if (!layers_.empty()) {
    LayerActivations workspace{};
    take_block(workspace);
    for (auto& a : layers_) {
      a = workspace;
      a.out = take(btc);
    }
  }
  lnf_ = take(btc);
  lnf_mean_ = take(bt);
  lnf_rstd_ = take(bt);
  logits_ = take(bt * static_cast<std::size_t>(vocab_.size()));
  losses_ = take(bt);
  if (tp_.active()) {
    row_max_ = take(bt);
    row_sums_ = take(2 * bt);
  }
  dresidual_ = take(btc);
  dln_ = take(btc);
  dqkv_ = take(3 * btcl);
  datty_ = take(btcl);
  dup_gelu_ = take(4 * btcl);
  dup_ = take(4 * btcl);
  attention_scratch_ = take(backend_.attention_scratch_size(B_, T_, local_heads_));
  if (cursor != activations_ + activation_count_)
    throw std::logic_error("Gpt: activation arena carved " + std::to_string(cursor - activations_) +
                           " floats but activation_floats() sized " + std::to_string(activation_count_));
}

const float* Gpt::block_input(int layer) const {
  return layer == 0 ? encoded_ : layers_[static_cast<std::size_t>(layer - 1)].out;
}

Gpt::LayerPointers Gpt::layer_pointers(float* arena, int layer) const {
  const LayerOffsets& o = layer_offsets_[static_cast<std::size_t>(layer)];
  return {arena + o.ln1_w, arena + o.ln1_b,  arena + o.qkv_w, arena + o.qkv_b, arena + o.proj_w, arena + o.proj_b,
          arena + o.ln2_w, arena + o.ln2_b, arena + o.up_w,  arena + o.up_b,  arena + o.down_w, arena + o.down_b};
}

void Gpt::block_forward(int layer, const float* x_in, const LayerActivations& a) {
  const int B = B_, T = T_, C = config_.hidden, Cl = local_hidden_, NHl = local_heads_;
  const int N = B * T;
  const std::size_t btc = static_cast<std::size_t>(N) * C;
  const LayerPointers p = layer_pointers(params_, layer);
  // A replicated bias of a row-parallel matmul joins the partial sums on one tensor rank only.
  const bool adds_bias = tp_.rank() == 0;
  backend_.layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x_in, p.ln1_w, p.ln1_b, N, C);
  tp_.copy_to_tp_forward(a.ln1, btc);
  backend_.matmul_forward(a.qkv, a.ln1, p.qkv_w, p.qkv_b, N, C, 3 * Cl);
  backend_.attention_forward(a.atty, a.att, a.qkv, B, T, Cl, NHl);
  backend_.matmul_forward(a.residual2, a.atty, p.proj_w, adds_bias ? p.proj_b : nullptr, N, Cl, C);
  tp_.reduce_from_tp_forward(a.residual2, btc);
  backend_.add(a.residual2, a.residual2, x_in, btc);
  backend_.layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, p.ln2_w, p.ln2_b, N, C);
  tp_.copy_to_tp_forward(a.ln2, btc);
  backend_.matmul_forward(a.up, a.ln2, p.up_w, p.up_b, N, C, 4 * Cl);
  backend_.gelu_forward(a.up_gelu, a.up, 4 * static_cast<std::size_t>(N) * Cl);
  backend_.matmul_forward(a.out, a.up_gelu, p.down_w, adds_bias ? p.down_b : nullptr, N, 4 * Cl, C);
  tp_.reduce_from_tp_forward(a.out, btc);
  backend_.add(a.out, a.out, a.residual2, btc);
}

void Gpt::block_backward(int layer, const float* x_in, const LayerActivations& a) {
  const int B = B_, T = T_, C = config_.hidden, Cl = local_hidden_, NHl = local_heads_;
  const int N = B * T;
  const std::size_t btc = static_cast<std::size_t>(N) * C;
  const std::size_t btcl = static_cast<std::size_t>(N) * Cl;
  const LayerPointers p = layer_pointers(params_, layer);
  const LayerPointers g = layer_pointers(grads_, layer);
  // out = residual2 + down(gelu(up(ln2(residual2)))). dresidual_ is the same on every tensor
  // rank, so the replicated down bias gets the same (whole) gradient everywhere.
  tp_.reduce_from_tp_backward(dresidual_, btc);
  backend_.fill_zero(dup_gelu_, 4 * btcl);
  backend_.matmul_backward(dup_gelu_, g.down_w, g.down_b, dresidual_, a.up_gelu, p.down_w, N, 4 * Cl, C);
  backend_.fill_zero(dup_, 4 * btcl);
  backend_.gelu_backward(dup_, a.up, dup_gelu_, 4 * btcl);
  backend_.fill_zero(dln_, btc);
  backend_.matmul_backward(dln_, g.up_w, g.up_b, dup_, a.ln2, p.up_w, N, C, 4 * Cl);
  tp_.copy_to_tp_backward(dln_, btc);  // each rank's dln_ covered its own channels only
  backend_.layernorm_backward(dresidual_, g.ln2_w, g.ln2_b, dln_, a.residual2, p.ln2_w, a.ln2_mean, a.ln2_rstd,
                              N, C);
  // residual2 = x_in + proj(attention(qkv(ln1(x_in))))
  tp_.reduce_from_tp_backward(dresidual_, btc);
  backend_.fill_zero(datty_, btcl);
  backend_.matmul_backward(datty_, g.proj_w, g.proj_b, dresidual_, a.atty, p.proj_w, N, Cl, C);
  backend_.fill_zero(dqkv_, 3 * btcl);
  backend_.attention_backward(dqkv_, attention_scratch_, datty_, a.qkv, a.att, B, T, Cl, NHl);
  backend_.fill_zero(dln_, btc);
  backend_.matmul_backward(dln_, g.qkv_w, g.qkv_b, dqkv_, a.ln1, p.qkv_w, N, C, 3 * Cl);
  tp_.copy_to_tp_backward(dln_, btc);
  backend_.layernorm_backward(dresidual_, g.ln1_w, g.ln1_b, dln_, x_in, p.ln1_w, a.ln1_mean, a.ln1_rstd, N, C);
}

void Gpt::zero_gradients() { backend_.fill_zero(grads_, arena_size_); }

double Gpt::forward(const int32_t* tokens, const int32_t* targets) {
  const int B = B_, T = T_, C = config_.hidden;
  const int N = B * T;
  backend_.copy_tokens_to_device(tokens_, tokens, static_cast<std::size_t>(N));
  backend_.copy_tokens_to_device(targets_, targets, static_cast<std::size_t>(N));

  // Vocabulary-parallel embedding: each rank looks up the tokens it owns (zero for the others),
  // tensor rank 0 adds the positions, and the all-reduce assembles the sum.
  backend_.embedding_forward(encoded_, tokens_, params_ + wte_offset_,
                             tp_.rank() == 0 ? params_ + wpe_offset_ : nullptr, B, T, C, vocab_.begin, vocab_.end);
  tp_.reduce_from_tp_forward(encoded_, static_cast<std::size_t>(N) * C);
  for (int l = 0; l < config_.layers; ++l) block_forward(l, block_input(l), layers_[static_cast<std::size_t>(l)]);
  const float* x = config_.layers > 0 ? layers_.back().out : encoded_;
  backend_.layernorm_forward(lnf_, lnf_mean_, lnf_rstd_, x, params_ + lnf_w_offset_,
                             params_ + lnf_b_offset_, N, C);
  tp_.copy_to_tp_forward(lnf_, static_cast<std::size_t>(N) * C);
  backend_.matmul_forward(logits_, lnf_, params_ + wte_offset_, nullptr, N, C, vocab_.size());
  if (tp_.active()) return sharded_loss_sum();
  backend_.cross_entropy_forward(losses_, logits_, targets_, N, config_.vocab, config_.padded_vocab);
  backend_.copy_to_host(host_losses_.data(), losses_, host_losses_.size());
  double sum = 0.0;
  for (float loss : host_losses_) sum += loss;
  return sum;
}

double Gpt::sharded_loss_sum() {
  const int N = B_ * T_;
  const auto n = static_cast<std::size_t>(N);
  // loss = log(sum of exp(l - max)) + max - target logit, each term combined over the group.
  backend_.cross_entropy_row_max(row_max_, logits_, N, vocab_.real, vocab_.size());
  tp_.all_reduce_max(row_max_, n);
  backend_.cross_entropy_row_sums(row_sums_, row_sums_ + n, logits_, targets_, row_max_, N, vocab_.real,
                                  vocab_.size(), vocab_.begin);
  tp_.all_reduce_sum(row_sums_, 2 * n);
  backend_.copy_to_host(host_row_max_.data(), row_max_, n);
  backend_.copy_to_host(host_row_sums_.data(), row_sums_, 2 * n);
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    sum += std::log(static_cast<double>(host_row_sums_[i])) + host_row_max_[i] - host_row_sums_[n + i];
  }
  return sum;
}

void Gpt::backward(float dloss, const std::function<void(std::size_t)>& grads_final) {
  const int B = B_, T = T_, C = config_.hidden;
  const int N = B * T;
  const std::size_t btc = static_cast<std::size_t>(N) * C;
  auto final_from = [&](std::size_t offset) {
    if (grads_final) grads_final(offset);
  };

  // Head: logits -> dlogits in place, then into ln_f and the tied embedding.
  float* dlogits = logits_;
  if (tp_.active()) {
    backend_.cross_entropy_backward_sharded(dlogits, logits_, targets_, row_max_, row_sums_, dloss, N, vocab_.real,
                                            vocab_.size(), vocab_.begin);
  } else {
    backend_.cross_entropy_backward(dlogits, logits_, targets_, dloss, N, config_.vocab, config_.padded_vocab);
  }
  backend_.fill_zero(dln_, btc);
  backend_.matmul_backward(dln_, grads_ + wte_offset_, nullptr, dlogits, lnf_, params_ + wte_offset_, N, C,
                           vocab_.size());
  tp_.copy_to_tp_backward(dln_, btc);
  const float* x_last = config_.layers > 0 ? layers_.back().out : encoded_;
  backend_.fill_zero(dresidual_, btc);
  backend_.layernorm_backward(dresidual_, grads_ + lnf_w_offset_, grads_ + lnf_b_offset_, dln_, x_last,
                              params_ + lnf_w_offset_, lnf_mean_, lnf_rstd_, N, C);
  final_from(lnf_w_offset_);

  // Blocks in reverse; dresidual_ carries d(loss)/d(residual stream) downwards.
  for (int l = config_.layers - 1; l >= 0; --l) {
    const LayerActivations& a = layers_[static_cast<std::size_t>(l)];
    const float* x_in = block_input(l);
    // Under kFull the workspace still holds the last block's forward, so every other block is
    // re-run from its kept input: same kernels, same inputs, hence the same bits as kNone. The
    // re-run also rewrites a.out, the input of block l + 1, whose backward is already done,
    // with the values it already holds.
    if (recompute_ == Recompute::kFull && l + 1 < config_.layers) block_forward(l, x_in, a);
    block_backward(l, x_in, a);
    final_from(layer_offsets_[static_cast<std::size_t>(l)].ln1_w);  // the block's first tensor
  }
  tp_.reduce_from_tp_backward(dresidual_, btc);
  backend_.embedding_backward(grads_ + wte_offset_, grads_ + wpe_offset_, dresidual_, tokens_, B, T, C,
                              vocab_.begin, vocab_.end);
  final_from(0);
}

}  // namespace trident::model
