#include "src/app/memory_estimate.h"

#include <cstdio>

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
                               std::size_t attention_scratch) {
  MemoryEstimate m;
  const std::size_t params = model::build_gpt_param_table(config).total_count();
  m.parameters = params * sizeof(float);
  m.gradients = params * sizeof(float);
  m.optimizer = 2 * params * sizeof(float);
  m.activations = model::activation_floats(config, micro_batch, seq_len, attention_scratch) * sizeof(float);
  return m;
}

std::string MemoryEstimate::table() const {
  std::string out = "memory per rank (estimate):\n";
  auto row = [&out](const char* what, std::size_t bytes) {
    char line[96];
    std::snprintf(line, sizeof line, "  %-12s %12s\n", what, format_bytes(static_cast<double>(bytes)).c_str());
    out += line;
  };
  row("parameters", parameters);
  row("gradients", gradients);
  row("optimizer", optimizer);
  row("activations", activations);
  row("total", total());
  return out;
}

}  // namespace trident::app
