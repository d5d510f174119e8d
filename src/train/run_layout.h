// How the rank at (tp_rank, pp_rank) holds the model in this run: its tensor slice, its stage's
// layers, the micro-batches its schedule keeps in flight, the recomputation mode. The trainer
// builds the model with it and the memory estimate sizes it, so the two always agree.
#pragma once

#include <vector>

#include "io/run_config.h"
#include "src/model/gpt.h"

namespace trident::train {

// config.parallel.dp must be resolved; stage_layers: one count per virtual stage (pp *
// chunks_per_rank(config)).
model::GptLayout run_layout(const io::RunConfig& config, const std::vector<int>& stage_layers, int tp_rank,
                            int pp_rank);

int64_t micro_batches_per_step(const io::RunConfig& config);

// Model chunks per pipeline rank: parallel.virtual_stages with the interleaved schedule and
// pp > 1, else 1 (parallel.virtual_stages is ignored).
int chunks_per_rank(const io::RunConfig& config);

}  // namespace trident::train
