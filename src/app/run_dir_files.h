// The files train keeps in run.dir besides metrics and checkpoints: the directory and its lock,
// config.ini and the complete marker. Rank 0 writes them; every rank agrees on a failure, which is
// a user error naming the file.
#pragma once

#include <cstdint>
#include <string>

#include "parallel/comm.h"
#include "src/app/run_dir_lock.h"
#include "src/app/run_setup.h"

namespace trident::app {

// Rank 0 creates run.dir and takes its lock (one training at a time, run_dir_lock.h); failures
// are agreed by every rank. The lock is rank 0's to hold for the run.
RunDirLock prepare_run_dir(const RunSetup& setup, parallel::Comm& world);

// Rank 0 writes the resolved deck as run.dir/config.ini once the restart is chosen and its
// checkpoint read: a start that is refused (a deck the checkpoint does not allow among them) leaves
// the last run's config.ini, which still resumes that run and whose checkpoint.dir the next
// attempt compares (choose_restart). Failures are agreed by every rank.
void write_run_config(const RunSetup& setup, parallel::Comm& world);

// Rank 0 writes run.dir/complete (the step reached), which tells job scripts that a rerun has
// nothing left to do. Checked, and agreed by every rank: without it they would rerun a finished
// run, each time with nothing left to train.
void write_complete_marker(const std::string& run_dir, int64_t steps_reached, parallel::Comm& world);

}  // namespace trident::app
