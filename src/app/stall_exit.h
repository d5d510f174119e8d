// run.stall_timeout's action (src/train/stall_watchdog.h): one line on stderr naming this rank,
// where it was and for how long, then the process ends with exit status 4. mpirun then ends the
// other ranks; under srun, --kill-on-bad-exit does (jobs/slurm-train.sbatch), or their own
// watchdogs. Job scripts rerun a job that ended so: it resumes from the newest checkpoint.
#pragma once

#include <string>

#include "parallel/rank_grid.h"
#include "src/train/stall_watchdog.h"

namespace trident::app {

inline constexpr int kStallExitStatus = 4;

// The line the action prints (without "trident: error on rank R: ").
std::string stall_message(const train::RankPosition& position, double seconds, int timeout_seconds,
                          const std::string& checkpoint_dir);

// Prints `trident: error on rank R (tensor t, data d, stage p): ` + stall_message, flushes
// stdout and stderr, and ends the process with kStallExitStatus (no MPI_Finalize: the ranks it
// would wait for are the stuck ones).
train::StallWatchdog::StallAction stall_exit_action(int world_rank, parallel::GridCoord coord, int timeout_seconds,
                                                    std::string checkpoint_dir);

}  // namespace trident::app
