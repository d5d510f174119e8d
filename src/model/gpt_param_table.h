// The parameter table of a GPT-2 model on one rank of a layout: which tensors it holds, their
// global shapes, its tensor-parallel slice of each and how each is initialised.
#pragma once

#include <string>

#include "src/model/gpt_config.h"
#include "src/model/gpt_layout.h"
#include "src/model/param_table.h"

namespace trident::model {

// The parameter table of this layout's rank in forward order: wte (first and last stage), wpe
// (first), the blocks of every chunk in order, ln_f (last). Requires heads and padded_vocab divisible by tp.
ParamTable build_gpt_param_table(const GptConfig& config, const GptLayout& layout = {});

// The parameter table's name of `part` ("ln1.weight", "mlp.down.bias", ...) of block `layer`
// (its global index): "block<layer>.<part>".
std::string block_tensor_name(int layer, const char* part);

}  // namespace trident::model
