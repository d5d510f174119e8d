// Which layers a pipeline stage holds. Stage s holds the consecutive layers
// [first_layer, end_layer); the first stage also holds the embeddings, the last the final
// LayerNorm and the LM head (tied to the token embedding, which so lives on both).
#pragma once

#include <vector>

namespace trident::model {

struct StageLayout {
  int first_layer = 0;
  int end_layer = 0;
  bool first = true;  // holds the embeddings
  bool last = true;   // holds ln_f and the LM head
  int layers() const { return end_layer - first_layer; }
};

// layers_per_stage: one count per stage, summing to the model's layers (callers validate).
StageLayout stage_layout(const std::vector<int>& layers_per_stage, int stage);

// The default split: layers / pp each, the first layers % pp stages one more.
std::vector<int> even_stage_split(int layers, int pp);

}  // namespace trident::model
