// The files of a checkpoint directory (docs/checkpoint-format.md): `step-NNNNNNNNN.h5`, zero-padded
// so that names sort by step, beside `latest`, `*.tmp` of an interrupted write and `*.h5.bad`
// set aside by a restart. One definition for the writer (pruning) and the restart (choice).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trident::train {

// "step-000001000.h5" for 1000 steps done.
std::string checkpoint_name(int64_t steps_done);

// Names in `dir` that are "step-*" + suffix (".h5": checkpoints; ".h5.bad": set aside), in
// ascending order (oldest first). Empty when dir cannot be read.
std::vector<std::string> list_checkpoint_files(const std::string& dir, const std::string& suffix = ".h5");

}  // namespace trident::train
