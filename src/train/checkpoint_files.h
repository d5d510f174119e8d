// The files of a checkpoint directory (docs/checkpoint-format.md): `step-NNNNNNNNN.h5`, zero-padded
// so that names sort by step, beside `latest`, `*.tmp` of an interrupted write and `*.h5.bad`
// (`*.h5.bad.2`, ... when the same step failed before) set aside by a restart. One definition for the writer (pruning) and the restart (choice).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trident::train {

// Where a run's checkpoints go: checkpoint.dir when absolute, else inside run.dir.
std::string checkpoint_directory(const std::string& run_dir, const std::string& checkpoint_dir);

// Why checkpoints cannot be written into `dir` ("" when they can): it is created when missing,
// and a probe file is created and removed in it, so that a read-only or full file system is
// found at start-up rather than after checkpoint.every steps of training; it must also list (a
// directory without read permission would look empty to restarts and pruning). Rank 0 only.
std::string checkpoint_directory_problem(const std::string& dir);

// Why a checkpoint or `latest` could not be written into `dir` for an entry already in its place
// ("" when none is): a directory (or another non-file) named step-N.h5 or `latest`, which the
// rename that publishes a checkpoint cannot replace, so that the run would fail at that
// checkpoint, hours in. A missing or unreadable `dir` has no such entry. Any rank; `check` asks too.
std::string checkpoint_name_clash(const std::string& dir);

// Why the metadata of checkpoint `path` cannot be trusted ("" when it can): the `step` attribute
// is negative, missing, or differs from the step of the file's name (step-N.h5; any other name is
// not compared); `samples` (the data position) or `deck` (what the restart checks its own deck
// against) is missing; `loss_scale` is not a finite positive number, or `loss_scale_clean_steps`
// is negative. The tensors' checksums do not cover attributes: a damaged step would resume (or
// export) at another step than the tensors hold, a damaged scale would make every fp16 step of
// the restart overflow or vanish.
std::string checkpoint_metadata_problem(const std::string& path);

// The step a checkpoint's name says ("step-000000030.h5" -> 30), or -1 for any other name.
int64_t checkpoint_step_of_name(const std::string& name);

// "step-000001000.h5" for 1000 steps done.
std::string checkpoint_name(int64_t steps_done);

// Names in `dir` that are "step-" + digits + suffix (".h5": checkpoints; ".h5.bad": set aside),
// in ascending order of step (oldest first); other names (a copy called step-best.h5) are not
// listed. Empty when dir cannot be read.
std::vector<std::string> list_checkpoint_files(const std::string& dir, const std::string& suffix = ".h5");

// Names in `dir` set aside by a restart: "step-*.h5.bad" and "step-*.h5.bad.N", ascending.
std::vector<std::string> list_set_aside_files(const std::string& dir);

// The name under which checkpoint `name` in `dir` is set aside: "NAME.bad", or "NAME.bad.N" with
// the smallest N >= 2 that is free, so that an earlier failure of the same step (a rerun wrote it
// again and it failed again) is kept for inspection rather than overwritten.
std::string set_aside_name(const std::string& dir, const std::string& name);

}  // namespace trident::train
