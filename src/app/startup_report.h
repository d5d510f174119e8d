// The start-up report shared by `trident train` and `trident check`: resolved deck, layout
// table, parameter count and per-rank memory.
#pragma once

#include <string>

#include "parallel/rank_grid.h"
#include "src/app/run_setup.h"

namespace trident::app {

std::string startup_report(const RunSetup& setup, const parallel::RankGrid& grid, std::size_t attention_scratch);

}  // namespace trident::app
