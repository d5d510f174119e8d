#include "src/train/run_layout.h"

#include "src/train/pipeline_plan.h"

namespace trident::train {

int64_t micro_batches_per_step(const io::RunConfig& c) {
  return c.train.global_batch / (c.train.micro_batch * c.parallel.dp);
}

int chunks_per_rank(const io::RunConfig& c) {
  return c.parallel.schedule == "interleaved" && c.parallel.pp > 1 ? c.parallel.virtual_stages : 1;
}

model::GptLayout run_layout(const io::RunConfig& c, const std::vector<int>& stage_layers, int tp_rank, int pp_rank) {
  model::GptLayout layout;
  layout.tp = c.parallel.tp;
  layout.tp_rank = tp_rank;
  layout.pp = c.parallel.pp;
  layout.pp_rank = pp_rank;
  layout.layers_per_stage = stage_layers;
  layout.chunks = chunks_per_rank(c);
  layout.chunk_slots =
      plan_pipeline(c.parallel.schedule, c.parallel.pp, pp_rank, micro_batches_per_step(c), layout.chunks).slots;
  layout.recompute = c.train.recompute == "full" ? model::Recompute::kFull : model::Recompute::kNone;
  layout.sequence_parallel = c.parallel.sequence_parallel;
  // bf16 / fp16: 16-bit activation buffers on every layout (model::GptLayout::storage).
  layout.storage = kernels::parse_precision(c.train.precision);
  return layout;
}

}  // namespace trident::train
