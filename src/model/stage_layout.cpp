#include "src/model/stage_layout.h"

namespace trident::model {

StageLayout stage_layout(const std::vector<int>& layers_per_stage, int stage, int chunks) {
  const int virtual_stages = static_cast<int>(layers_per_stage.size());
  const int pp = virtual_stages / chunks;
  StageLayout s;
  s.chunks.clear();
  s.first = false;
  s.last = false;
  for (int c = 0; c < chunks; ++c) {
    const int k = c * pp + stage;
    ChunkLayout chunk;
    for (int i = 0; i < k; ++i) chunk.first_layer += layers_per_stage[static_cast<std::size_t>(i)];
    chunk.end_layer = chunk.first_layer + layers_per_stage[static_cast<std::size_t>(k)];
    chunk.first = k == 0;
    chunk.last = k + 1 == virtual_stages;
    s.first = s.first || chunk.first;
    s.last = s.last || chunk.last;
    s.chunks.push_back(chunk);
  }
  return s;
}

std::vector<int> even_stage_split(int layers, int pp) {
  std::vector<int> counts(static_cast<std::size_t>(pp), layers / pp);
  for (int i = 0; i < layers % pp; ++i) ++counts[static_cast<std::size_t>(i)];
  return counts;
}

}  // namespace trident::model
