// Which layers a pipeline rank holds. Without interleaving a rank holds one stage, the
// consecutive layers [first_layer, end_layer); the first stage also holds the embeddings, the
// last the final LayerNorm and the LM head (tied to the token embedding, which so lives on
// both). With the interleaved schedule (v chunks per rank) the layers are split over v * pp
// virtual stages and virtual stage k = c * pp + s is chunk c of rank s: a rank holds v
// non-consecutive runs of layers, the first rank's chunk 0 embeds and the last rank's chunk
// v - 1 holds the head.
#pragma once

#include <vector>

namespace trident::model {

// One chunk (virtual stage) of a rank: layers [first_layer, end_layer).
struct ChunkLayout {
  int first_layer = 0;
  int end_layer = 0;
  bool first = true;  // the first virtual stage: holds the embeddings
  bool last = true;   // the last virtual stage: holds ln_f and the LM head
  int layers() const { return end_layer - first_layer; }
};

struct StageLayout {
  std::vector<ChunkLayout> chunks{ChunkLayout{}};  // in order of their layers
  bool first = true;  // some chunk holds the embeddings
  bool last = true;   // some chunk holds ln_f and the LM head
  int layers() const {
    int n = 0;
    for (const ChunkLayout& c : chunks) n += c.layers();
    return n;
  }
};

// layers_per_stage: one count per virtual stage (chunks * pp of them, virtual stage
// c * pp + s being chunk c of rank s), summing to the model's layers (callers validate).
// chunks = 1: one count per stage.
StageLayout stage_layout(const std::vector<int>& layers_per_stage, int stage, int chunks = 1);

// The default split: layers / pp each, the first layers % pp stages one more (pp may be the
// number of virtual stages).
std::vector<int> even_stage_split(int layers, int pp);

}  // namespace trident::model
