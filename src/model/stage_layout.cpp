#include "src/model/stage_layout.h"

namespace trident::model {

StageLayout stage_layout(const std::vector<int>& layers_per_stage, int stage) {
  StageLayout s;
  for (int i = 0; i < stage; ++i) s.first_layer += layers_per_stage[static_cast<std::size_t>(i)];
  s.end_layer = s.first_layer + layers_per_stage[static_cast<std::size_t>(stage)];
  s.first = stage == 0;
  s.last = stage + 1 == static_cast<int>(layers_per_stage.size());
  return s;
}

std::vector<int> even_stage_split(int layers, int pp) {
  std::vector<int> counts(static_cast<std::size_t>(pp), layers / pp);
  for (int i = 0; i < layers % pp; ++i) ++counts[static_cast<std::size_t>(i)];
  return counts;
}

}  // namespace trident::model
