#include "src/model/gpt.h"

#include <algorithm>  // std::min, std::max
#include <cmath>
#include <stdexcept>  // std::logic_error
#include <string>

namespace trident::model {

namespace {

// Floats of one block's forward state for [B, T] other than its output `out` (BTC): what the
// shared workspace holds under Recompute::kFull.
std::size_t block_workspace_floats(const GptConfig& c, std::size_t B, std::size_t T) {
  const std::size_t btc = B * T * static_cast<std::size_t>(c.hidden);
  const std::size_t bt = B * T;
  const std::size_t att = B * static_cast<std::size_t>(c.heads) * T * T;
  // ln1 + qkv(3) + atty + residual2 + ln2 + up(4) + up_gelu(4) = 15 BTC; 4 norm stats
  return 15 * btc + 4 * bt + att;
}

std::string block_name(int layer, const char* part) {
  return "block" + std::to_string(layer) + "." + part;
}

}  // namespace

std::size_t activation_floats(const GptConfig& c, int B, int T, std::size_t attention_scratch,
                              Recompute recompute) {
  const auto b = static_cast<std::size_t>(B), t = static_cast<std::size_t>(T);
  const std::size_t btc = b * t * static_cast<std::size_t>(c.hidden);
  const std::size_t bt = b * t;
  const auto layers = static_cast<std::size_t>(c.layers);
  // Every block's output is kept in both modes (it is the next block's input, or ln_f's).
  // kNone keeps each block's intermediates; kFull one shared set.
  const std::size_t block_state = layers * btc /*out*/ +
                                  (recompute == Recompute::kNone ? layers : std::min<std::size_t>(layers, 1)) *
                                      block_workspace_floats(c, b, t);
  const std::size_t forward_state = btc /*encoded*/ + block_state + btc /*lnf*/ + 2 * bt +
                                    bt * static_cast<std::size_t>(c.padded_vocab) /*logits*/ + bt /*losses*/;
  // dresidual + dln + dqkv(3) + datty + dup_gelu(4) + dup(4) = 14 BTC
  const std::size_t backward_scratch = 14 * btc + attention_scratch;
  return forward_state + backward_scratch;
}

ParamTable build_gpt_param_table(const GptConfig& c) {
  ParamTable table;
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
  table.add(wte);
  table.add(normal("wpe", {c.context, C}, std_init));
  for (int l = 0; l < c.layers; ++l) {
    table.add(constant(block_name(l, "ln1.weight"), {C}, InitKind::kOnes));
    table.add(constant(block_name(l, "ln1.bias"), {C}, InitKind::kZeros));
    // q, k, v stacked on a leading axis of 3, so that a head split is one hyperslab.
    table.add(normal(block_name(l, "attn.qkv.weight"), {3, C, C}, std_init));
    table.add(constant(block_name(l, "attn.qkv.bias"), {3, C}, InitKind::kZeros));
    table.add(normal(block_name(l, "attn.proj.weight"), {C, C}, residual_std));
    table.add(constant(block_name(l, "attn.proj.bias"), {C}, InitKind::kZeros));
    table.add(constant(block_name(l, "ln2.weight"), {C}, InitKind::kOnes));
    table.add(constant(block_name(l, "ln2.bias"), {C}, InitKind::kZeros));
    table.add(normal(block_name(l, "mlp.up.weight"), {4 * C, C}, std_init));
    table.add(constant(block_name(l, "mlp.up.bias"), {4 * C}, InitKind::kZeros));
    table.add(normal(block_name(l, "mlp.down.weight"), {C, 4 * C}, residual_std));
    table.add(constant(block_name(l, "mlp.down.bias"), {C}, InitKind::kZeros));
  }
  table.add(constant("ln_f.weight", {C}, InitKind::kOnes));
  table.add(constant("ln_f.bias", {C}, InitKind::kZeros));
  return table;
}

Gpt::Gpt(const GptConfig& config, kernels::Backend& backend, int B, int T, Recompute recompute,
         std::size_t arena_size)
    : config_(config),
      backend_(backend),
      B_(B),
      T_(T),
      recompute_(recompute),
      table_(build_gpt_param_table(config)) {
  arena_size_ = std::max(arena_size, table_.total_count());
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
  const std::size_t scratch = backend_.attention_scratch_size(B_, T_, config_.heads);
  activation_count_ = activation_floats(config_, B_, T_, scratch, recompute_);
  activations_ = backend_.allocate(activation_count_);
  carve_activations();
  tokens_ = backend_.allocate_tokens(static_cast<std::size_t>(B_) * T_);
  targets_ = backend_.allocate_tokens(static_cast<std::size_t>(B_) * T_);
  host_losses_.resize(static_cast<std::size_t>(B_) * T_);
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
    a.qkv = take(3 * btc);
    a.att = take(b * static_cast<std::size_t>(config_.heads) * t * t);
    a.atty = take(btc);
    a.residual2 = take(btc);
    a.ln2 = take(btc);
    a.ln2_mean = take(bt);
    a.ln2_rstd = take(bt);
    a.up = take(4 * btc);
    a.up_gelu = take(4 * btc);
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
  logits_ = take(bt * static_cast<std::size_t>(config_.padded_vocab));
  losses_ = take(bt);
  dresidual_ = take(btc);
  dln_ = take(btc);
  dqkv_ = take(3 * btc);
  datty_ = take(btc);
  dup_gelu_ = take(4 * btc);
  dup_ = take(4 * btc);
  attention_scratch_ = take(backend_.attention_scratch_size(B_, T_, config_.heads));
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
  const int B = B_, T = T_, C = config_.hidden, NH = config_.heads;
  const int N = B * T;
  const std::size_t btc = static_cast<std::size_t>(N) * C;
  const LayerPointers p = layer_pointers(params_, layer);
  backend_.layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x_in, p.ln1_w, p.ln1_b, N, C);
  backend_.matmul_forward(a.qkv, a.ln1, p.qkv_w, p.qkv_b, N, C, 3 * C);
  backend_.attention_forward(a.atty, a.att, a.qkv, B, T, C, NH);
  backend_.matmul_forward(a.residual2, a.atty, p.proj_w, p.proj_b, N, C, C);
  backend_.add(a.residual2, a.residual2, x_in, btc);
  backend_.layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, p.ln2_w, p.ln2_b, N, C);
  backend_.matmul_forward(a.up, a.ln2, p.up_w, p.up_b, N, C, 4 * C);
  backend_.gelu_forward(a.up_gelu, a.up, 4 * btc);
  backend_.matmul_forward(a.out, a.up_gelu, p.down_w, p.down_b, N, 4 * C, C);
  backend_.add(a.out, a.out, a.residual2, btc);
}

void Gpt::block_backward(int layer, const float* x_in, const LayerActivations& a) {
  const int B = B_, T = T_, C = config_.hidden, NH = config_.heads;
  const int N = B * T;
  const std::size_t btc = static_cast<std::size_t>(N) * C;
  const LayerPointers p = layer_pointers(params_, layer);
  const LayerPointers g = layer_pointers(grads_, layer);
  // out = residual2 + down(gelu(up(ln2(residual2))))
  backend_.fill_zero(dup_gelu_, 4 * btc);
  backend_.matmul_backward(dup_gelu_, g.down_w, g.down_b, dresidual_, a.up_gelu, p.down_w, N, 4 * C, C);
  backend_.fill_zero(dup_, 4 * btc);
  backend_.gelu_backward(dup_, a.up, dup_gelu_, 4 * btc);
  backend_.fill_zero(dln_, btc);
  backend_.matmul_backward(dln_, g.up_w, g.up_b, dup_, a.ln2, p.up_w, N, C, 4 * C);
  backend_.layernorm_backward(dresidual_, g.ln2_w, g.ln2_b, dln_, a.residual2, p.ln2_w, a.ln2_mean, a.ln2_rstd,
                              N, C);
  // residual2 = x_in + proj(attention(qkv(ln1(x_in))))
  backend_.fill_zero(datty_, btc);
  backend_.matmul_backward(datty_, g.proj_w, g.proj_b, dresidual_, a.atty, p.proj_w, N, C, C);
  backend_.fill_zero(dqkv_, 3 * btc);
  backend_.attention_backward(dqkv_, attention_scratch_, datty_, a.qkv, a.att, B, T, C, NH);
  backend_.fill_zero(dln_, btc);
  backend_.matmul_backward(dln_, g.qkv_w, g.qkv_b, dqkv_, a.ln1, p.qkv_w, N, C, 3 * C);
  backend_.layernorm_backward(dresidual_, g.ln1_w, g.ln1_b, dln_, x_in, p.ln1_w, a.ln1_mean, a.ln1_rstd, N, C);
}

void Gpt::zero_gradients() { backend_.fill_zero(grads_, arena_size_); }

double Gpt::forward(const int32_t* tokens, const int32_t* targets) {
  const int B = B_, T = T_, C = config_.hidden;
  const int N = B * T;
  backend_.copy_tokens_to_device(tokens_, tokens, static_cast<std::size_t>(N));
  backend_.copy_tokens_to_device(targets_, targets, static_cast<std::size_t>(N));

  backend_.embedding_forward(encoded_, tokens_, params_ + wte_offset_, params_ + wpe_offset_, B, T, C);
  for (int l = 0; l < config_.layers; ++l) block_forward(l, block_input(l), layers_[static_cast<std::size_t>(l)]);
  const float* x = config_.layers > 0 ? layers_.back().out : encoded_;
  backend_.layernorm_forward(lnf_, lnf_mean_, lnf_rstd_, x, params_ + lnf_w_offset_,
                             params_ + lnf_b_offset_, N, C);
  backend_.matmul_forward(logits_, lnf_, params_ + wte_offset_, nullptr, N, C, config_.padded_vocab);
  backend_.cross_entropy_forward(losses_, logits_, targets_, N, config_.vocab, config_.padded_vocab);
  backend_.copy_to_host(host_losses_.data(), losses_, host_losses_.size());
  double sum = 0.0;
  for (float loss : host_losses_) sum += loss;
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
  backend_.cross_entropy_backward(dlogits, logits_, targets_, dloss, N, config_.vocab, config_.padded_vocab);
  backend_.fill_zero(dln_, btc);
  backend_.matmul_backward(dln_, grads_ + wte_offset_, nullptr, dlogits, lnf_, params_ + wte_offset_, N, C,
                           config_.padded_vocab);
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
  backend_.embedding_backward(grads_ + wte_offset_, grads_ + wpe_offset_, dresidual_, tokens_, B, T, C);
  final_from(0);
}

}  // namespace trident::model
