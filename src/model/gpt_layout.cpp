#include "src/model/gpt_layout.h"

namespace trident::model {

StageLayout GptLayout::stage(const GptConfig& config) const {
  return stage_layout(layers_per_stage.empty() ? even_stage_split(config.layers, pp * chunks) : layers_per_stage,
                      pp_rank, chunks);
}

}  // namespace trident::model
