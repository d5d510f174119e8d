#include "src/train/pipeline_plan.h"

#include <algorithm>

namespace trident::train {

std::vector<int> peak_in_flight_per_chunk(const std::vector<parallel::PipelineAction>& actions, int chunks) {
  std::vector<int> peaks;
  for (int c = 0; c < chunks; ++c) {
    std::vector<parallel::PipelineAction> mine;
    for (const auto& a : actions)
      if (a.chunk == c) mine.push_back(a);
    peaks.push_back(std::max(1, parallel::peak_in_flight(mine)));
  }
  return peaks;
}

PipelinePlan plan_pipeline(const std::string& schedule, int pp, int stage, int64_t micro_batches, int chunks) {
  PipelinePlan plan;
  plan.chunks = chunks;
  plan.actions = parallel::make_pipeline_schedule(parallel::parse_schedule_kind(schedule), pp, stage,
                                                  static_cast<int>(micro_batches), chunks);
  plan.slots = peak_in_flight_per_chunk(plan.actions, chunks);
  plan.last_backward.assign(static_cast<std::size_t>(chunks), plan.actions.size());
  for (std::size_t i = 0; i < plan.actions.size(); ++i) {
    if (plan.actions[i].kind == parallel::ActionKind::kBackward) {
      plan.last_backward[static_cast<std::size_t>(plan.actions[i].chunk)] = i;
    }
  }
  if (!std::is_sorted(plan.last_backward.rbegin(), plan.last_backward.rend())) {
    plan.last_backward.assign(static_cast<std::size_t>(chunks), plan.actions.size());
  }
  return plan;
}

}  // namespace trident::train
