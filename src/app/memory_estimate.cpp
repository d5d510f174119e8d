#include "src/app/memory_estimate.h"

#include <algorithm>
#include <cstdio>

#include "parallel/zero_shard.h"
#include "src/model/gpt.h"

namespace trident::app {

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", bytes, units[unit]);
  return text;
}

MemoryEstimate estimate_memory(const model::GptConfig& config, int micro_batch, int seq_len,
                               std::size_t attention_scratch, model::Recompute recompute, int zero_shards,
                               int tp) {
  MemoryEstimate m;
  const std::size_t params = model::build_gpt_param_table(config, tp, 0).total_count();
  // The same shard arithmetic the trainer allocates with: padded arenas, and AdamW state for
  // rank 0's block (the largest; a last block may be partly padding, which has no state).
  const parallel::ArenaShard shard = parallel::shard_arena(params, zero_shards, 0);
  m.parameters = shard.padded_size * sizeof(float);
  m.gradients = shard.padded_size * sizeof(float);
  m.optimizer = 2 * std::min(shard.block, params) * sizeof(float);
  m.zero_shards = zero_shards;
  m.recompute = recompute;
  m.activations =
      model::activation_floats(config, micro_batch, seq_len, attention_scratch, recompute, tp) * sizeof(float);
  return m;
}

std::string MemoryEstimate::table() const {
  std::string out = "memory per rank (estimate):\n";
  auto row = [&out](const char* what, std::size_t bytes) {
    char line[96];
    std::snprintf(line, sizeof line, "  %-28s %12s\n", what, format_bytes(static_cast<double>(bytes)).c_str());
    out += line;
  };
  row("parameters", parameters);
  row("gradients", gradients);
  row(zero_shards > 1 ? "optimizer (ZeRO-1 shard)" : "optimizer", optimizer);
  row(recompute == model::Recompute::kFull ? "activations (recompute full)" : "activations (recompute none)",
      activations);
  row("total", total());
  return out;
}

}  // namespace trident::app
