#include "src/app/stall_exit.h"

#include <cstdio>
#include <cstdlib>  // std::_Exit
#include <utility>

namespace trident::app {

std::string stall_message(const train::RankPosition& position, double seconds, int timeout_seconds,
                          const std::string& checkpoint_dir) {
  char age[64];
  std::snprintf(age, sizeof age, "%.0f s", seconds);
  return std::string("no progress for ") + age + " (run.stall_timeout = " + std::to_string(timeout_seconds) +
         ") at " + train::describe(position) +
         ". A rank of the job is stuck or has died (the ranks that wait for it report a reduction, a send or a "
         "receive; a stuck one what it was doing); ending the job with exit status 4. Rerun the same command "
         "to resume from the newest checkpoint in " + checkpoint_dir;
}

train::StallWatchdog::StallAction stall_exit_action(int world_rank, parallel::GridCoord coord, int timeout_seconds,
                                                    std::string checkpoint_dir) {
  return [=, dir = std::move(checkpoint_dir)](const train::RankPosition& position, double seconds) {
    std::fflush(stdout);
    std::fprintf(stderr, "trident: error on rank %d (tensor %d, data %d, stage %d): %s\n", world_rank, coord.tp_rank,
                 coord.dp_rank, coord.pp_rank, stall_message(position, seconds, timeout_seconds, dir).c_str());
    std::fflush(stderr);
    std::_Exit(kStallExitStatus);
  };
}

}  // namespace trident::app
