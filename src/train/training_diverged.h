// TrainingDiverged: thrown by Trainer::run on every rank alike when a step's gradients hold an
// inf or a NaN that no loss scale can absorb (in fp32 and bf16 any; in fp16 one at the smallest
// scale). The update is not applied, so the parameters stay finite and no checkpoint holds the
// step; main prints the message (what happened, where to restart from) on rank 0 and every rank
// exits with status 3, which a job script can tell from a user error (2) and not requeue.
#pragma once

#include <stdexcept>
#include <string>

namespace trident::train {

class TrainingDiverged : public std::runtime_error {
 public:
  explicit TrainingDiverged(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace trident::train
