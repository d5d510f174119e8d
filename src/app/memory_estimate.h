// The memory one rank will need, from the parameter table and the activation arena (the same
// functions that size the real allocations), so `trident check` can answer before a launch.
#pragma once

#include <cstddef>
#include <string>

#include "src/model/gpt.h"  // Recompute
#include "src/model/gpt_config.h"

namespace trident::app {

struct MemoryEstimate {
  std::size_t parameters = 0;   // bytes, fp32
  std::size_t gradients = 0;
  std::size_t optimizer = 0;    // AdamW first and second moments
  std::size_t activations = 0;  // one micro-batch's forward state plus backward scratch
  model::Recompute recompute = model::Recompute::kNone;  // what the activations keep (train.recompute)
  int zero_shards = 1;          // data ranks sharing the optimizer state (ZeRO-1), else 1
  std::size_t total() const { return parameters + gradients + optimizer + activations; }
  std::string table() const;
};

// attention_scratch: floats the backend asks for (Backend::attention_scratch_size).
// recompute: train.recompute, which sets how much forward state the activations keep.
// zero_shards: dp with parallel.zero = 1 (the AdamW state is one block of the arena padded to a
// multiple of dp, parallel/zero_shard.h), 1 otherwise.
// tp: tensor-parallel size (the rank's share of the sharded tensors and activations).
MemoryEstimate estimate_memory(const model::GptConfig& config, int micro_batch, int seq_len,
                               std::size_t attention_scratch,
                               model::Recompute recompute = model::Recompute::kNone, int zero_shards = 1,
                               int tp = 1);

std::string format_bytes(double bytes);

}  // namespace trident::app
