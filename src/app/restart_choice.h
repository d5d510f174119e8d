// Which checkpoint a run resumes from (run.restart, docs/checkpoint-format.md).
//
//   none  a fresh start; refused when checkpoint.dir holds checkpoints (of an earlier run);
//   PATH  that checkpoint, which must verify (its per-tensor checksums), else exit 2; refused
//         when checkpoint.dir holds checkpoints of later steps than it (another line of training);
//   auto  the newest checkpoint in checkpoint.dir that verifies. A newer one that does not
//         (truncated, corrupted, unreadable) is reported with its file and reason and set
//         aside as NAME.bad (NAME.bad.2, ... if that step was set aside before), so that it
//         neither counts among checkpoint.keep nor is tried again; then the one before it is tried. No checkpoint: a fresh start. Only ones
//         that failed: exit 2 (a fresh start would silently discard the run). No checkpoint but
//         run.dir/complete (a finished run without checkpoints), or checkpoints in the
//         checkpoint.dir that run.dir's config.ini names (the last run's, which this run's changed
//         checkpoint.dir would leave behind): exit 2, not a retraining that overwrites it.
#pragma once

#include <mpi.h>

#include <string>

#include "io/deck.h"
#include "io/run_config.h"
#include "parallel/comm.h"

namespace trident::app {

// What choose_restart would choose, for trident check: one process, from the files' names and
// attributes (no checksum read). Returns a line to print ("restart: auto: would resume from
// ..."); throws io::UserError for what choose_restart, or the compatibility of the checkpoint's
// saved deck with `deck` (check_restart_compatible), would refuse.
std::string describe_restart(const io::RunConfig& config, const io::ResolvedDeck& deck,
                             const std::string& checkpoint_dir, const std::string& recorded_checkpoint_dir);

// The checkpoint directory that run_dir/config.ini names (the run.dir's last run), or "" when
// there is none or it does not read back. Train reads it before writing its own config.ini.
std::string recorded_checkpoint_directory(const std::string& run_dir);

// Collective over `world` (and `comm`, the same ranks as an MPI communicator for parallel HDF5):
// the same path ("" = fresh start) on every rank, or the same io::UserError on every rank.
// Rank 0 prints what it skipped and how long verification took.
std::string choose_restart(const io::RunConfig& config, const std::string& checkpoint_dir,
                           const std::string& recorded_checkpoint_dir, parallel::Comm& world, MPI_Comm comm);

}  // namespace trident::app
