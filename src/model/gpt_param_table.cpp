#include "src/model/gpt_param_table.h"

#include <cmath>  // std::sqrt
#include <cstdint>
#include <string>
#include <utility>  // std::move
#include <vector>

#include "src/model/stage_layout.h"

namespace trident::model {

std::string block_tensor_name(int layer, const char* part) {
  return "block" + std::to_string(layer) + "." + part;
}

ParamTable build_gpt_param_table(const GptConfig& c, const GptLayout& layout) {
  ParamTable table;
  const int tp = layout.tp, tp_rank = layout.tp_rank;
  const StageLayout stage = layout.stage(c);
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
  if (stage.first || stage.last) {
    // The token embedding is also the LM head: the first and the last stage both hold it, and
    // their gradients are summed over the embedding group.
    TensorSpec wte = normal("wte", {c.padded_vocab, C}, std_init);
    wte.init_rows = c.vocab;  // padded rows stay zero: they never see a token or a target
    table.add(split(wte, 0));  // vocabulary-parallel
  }
  if (stage.first) table.add(normal("wpe", {c.context, C}, std_init));
  for (const ChunkLayout& chunk : stage.chunks) {
    for (int l = chunk.first_layer; l < chunk.end_layer; ++l) {
      table.add(constant(block_tensor_name(l, "ln1.weight"), {C}, InitKind::kOnes));
      table.add(constant(block_tensor_name(l, "ln1.bias"), {C}, InitKind::kZeros));
      // q, k, v stacked on a leading axis of 3, so that a head split is one hyperslab: [3, C/tp, C]
      // is this rank's q, k and v rows for its heads (column-parallel).
      table.add(split(normal(block_tensor_name(l, "attn.qkv.weight"), {3, C, C}, std_init), 1));
      table.add(split(constant(block_tensor_name(l, "attn.qkv.bias"), {3, C}, InitKind::kZeros), 1));
      // Row-parallel: the input channels (axis 1 of [out, in]) are split; the bias is replicated.
      table.add(split(normal(block_tensor_name(l, "attn.proj.weight"), {C, C}, residual_std), 1));
      table.add(constant(block_tensor_name(l, "attn.proj.bias"), {C}, InitKind::kZeros));
      table.add(constant(block_tensor_name(l, "ln2.weight"), {C}, InitKind::kOnes));
      table.add(constant(block_tensor_name(l, "ln2.bias"), {C}, InitKind::kZeros));
      table.add(split(normal(block_tensor_name(l, "mlp.up.weight"), {4 * C, C}, std_init), 0));  // column-parallel
      table.add(split(constant(block_tensor_name(l, "mlp.up.bias"), {4 * C}, InitKind::kZeros), 0));
      table.add(split(normal(block_tensor_name(l, "mlp.down.weight"), {C, 4 * C}, residual_std), 1));  // row-parallel
      table.add(constant(block_tensor_name(l, "mlp.down.bias"), {C}, InitKind::kZeros));
    }
  }
  if (stage.last) {
    table.add(constant("ln_f.weight", {C}, InitKind::kOnes));
    table.add(constant("ln_f.bias", {C}, InitKind::kZeros));
  }
  return table;
}

}  // namespace trident::model
