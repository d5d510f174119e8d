// The pipeline schedule one stage runs every step, and how many micro-batches it holds at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/pipeline_schedule.h"

namespace trident::train {

struct PipelinePlan {
  std::vector<parallel::PipelineAction> actions;
  int chunks = 1;  // model chunks per rank (interleaved), 1 otherwise
  // Micro-batches whose activations each chunk of the stage holds at once (the schedule's peak
  // for that chunk): the model's slots of the chunk (GptLayout::chunk_slots). In-flight
  // micro-batches of a chunk are consecutive, so micro_batch % slots[chunk] never collides.
  // Interleaved chunks differ (p = 4, m = 8, v = 2, stage 0: 8 and 4), so each has its own.
  std::vector<int> slots{1};
  // Per chunk, the index in `actions` of its last backward of the step, which starts the
  // data-parallel buckets of its blocks as they become final. The schedules order those from the
  // last chunk to the first, the chunks' arena ranges ascending (pipeline_schedule_test); were
  // one to order them otherwise, every entry is actions.size(): the buckets all start once the
  // schedule is done.
  std::vector<std::size_t> last_backward;
};

// schedule: parallel.schedule ("gpipe" | "1f1b" | "interleaved"). With one stage, 1f1b is
// forward then backward of each micro-batch in turn (one slot), gpipe all forwards first (m
// slots). chunks: model chunks per rank, only for interleaved (1 otherwise).
PipelinePlan plan_pipeline(const std::string& schedule, int pp, int stage, int64_t micro_batches, int chunks = 1);

// The most micro-batches each chunk has in flight under `actions` (forwards done whose backward
// is not yet done, counted per chunk), at least 1 each.
std::vector<int> peak_in_flight_per_chunk(const std::vector<parallel::PipelineAction>& actions, int chunks);

}  // namespace trident::train
