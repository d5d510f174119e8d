#include "src/train/pipeline_plan.h"

#include <algorithm>

namespace trident::train {

PipelinePlan plan_pipeline(const std::string& schedule, int pp, int stage, int64_t micro_batches) {
  PipelinePlan plan;
  plan.actions = parallel::make_pipeline_schedule(parallel::parse_schedule_kind(schedule), pp, stage,
                                                  static_cast<int>(micro_batches));
  plan.slots = std::max(1, parallel::peak_in_flight(plan.actions));
  return plan;
}

}  // namespace trident::train
