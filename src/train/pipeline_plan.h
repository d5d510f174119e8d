// The pipeline schedule one stage runs every step, and how many micro-batches it holds at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/pipeline_schedule.h"

namespace trident::train {

struct PipelinePlan {
  std::vector<parallel::PipelineAction> actions;
  int slots = 1;  // micro-batches whose activations the stage holds at once (the schedule's peak)
};

// schedule: parallel.schedule ("gpipe" | "1f1b"). With one stage, 1f1b is forward then
// backward of each micro-batch in turn (one slot), gpipe all forwards first (m slots).
PipelinePlan plan_pipeline(const std::string& schedule, int pp, int stage, int64_t micro_batches);

}  // namespace trident::train
