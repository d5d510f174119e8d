#include "src/app/memory_estimate.h"

#include <algorithm>
#include <cstdio>

#include "parallel/grad_buckets.h"  // bucket_elems_of_mib
#include "parallel/zero_shard.h"
#include "src/train/adamw.h"  // adamw_state_bytes

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
                               std::size_t attention_scratch, const model::GptLayout& layout, int zero_shards,
                               bool master_weights) {
  MemoryEstimate m;
  const std::size_t params = model::build_gpt_param_table(config, layout).total_count();
  // The same shard arithmetic the trainer allocates with: padded arenas, and AdamW state for
  // rank 0's block (the largest; a last block may be partly padding, which has no state).
  const parallel::ArenaShard shard = parallel::shard_arena(params, zero_shards, 0);
  // The parameter arena is the compute copy, in the activation storage (16 bits under mixed
  // precision); the gradients are fp32 in every precision.
  m.parameters = shard.padded_size * kernels::precision_bytes(layout.storage);
  m.gradients = shard.padded_size * sizeof(float);
  m.optimizer = train::adamw_state_bytes(std::min(shard.block, params), master_weights);
  m.activations = model::activation_bytes(config, micro_batch, seq_len, attention_scratch, layout);
  m.stage = layout.pp_rank;
  m.layers = layout.stage(config).layers();
  m.slots.clear();
  for (int c = 0; c < layout.chunks; ++c) {
    if (c > 0) m.slots.push_back('+');
    m.slots.append(std::to_string(layout.slots_of(c)));
  }
  return m;
}

parallel::CommTransport comm_transport(bool cuda, const std::string& parallel_comm) {
  if (!cuda) return parallel::CommTransport::kMpi;
  return parallel_comm == "nccl" ? parallel::CommTransport::kNccl : parallel::CommTransport::kMpiStaged;
}

MemoryEstimate estimate_run_memory(const io::RunConfig& run, const model::GptConfig& config,
                                   const model::GptLayout& layout, std::size_t attention_scratch,
                                   parallel::CommTransport transport) {
  const int dp = run.parallel.dp;
  const bool zero = run.parallel.zero == 1;
  MemoryEstimate m = estimate_memory(config, static_cast<int>(run.train.micro_batch), run.train.seq_len,
                                     attention_scratch, layout, zero ? dp : 1, run.train.precision != "fp32");
  const model::ParamTable table = model::build_gpt_param_table(config, layout);
  parallel::GradientReductionPlan plan;
  plan.tensor_ends = table.tensor_ends();
  plan.padded_size = parallel::shard_arena(table.total_count(), zero ? dp : 1, 0).padded_size;
  plan.bucket_elems = parallel::bucket_elems_of_mib(run.parallel.bucket_mb);
  plan.dp = dp;
  plan.zero = zero;
  plan.overlap_param_gather = run.parallel.overlap_param_gather;
  plan.wire = kernels::parse_precision(run.parallel.grad_reduce);
  plan.parameters = layout.storage;
  // The first and last stages of a pipeline both hold the tied embedding and sum its gradient.
  const model::StageLayout stage = layout.stage(config);
  if (layout.pp > 1 && (stage.first || stage.last)) plan.tied_embedding = table.find("wte").count;
  const parallel::CommBufferBytes held = parallel::gradient_comm_buffers(plan, transport);
  // On the CPU the model's memory is host memory; on a GPU the host copies are extra.
  m.communication = transport == parallel::CommTransport::kMpi ? held.host : held.device;
  m.host_staging = transport == parallel::CommTransport::kMpi ? 0 : held.host;
  return m;
}

std::string memory_table(const std::vector<MemoryEstimate>& stages, const char* recompute, int zero_shards) {
  std::string out = "memory per rank (estimate; activations with recompute " + std::string(recompute) +
                    (zero_shards > 1 ? ", optimizer state ZeRO-1 sharded over " + std::to_string(zero_shards) + " ranks"
                                     : std::string()) +
                    "):\n";
  // "comm": the gradient reductions' own buffers (parallel/comm_buffers.h).
  char line[192];
  std::snprintf(line, sizeof line, "  %5s %6s %9s %12s %12s %12s %12s %12s %12s\n", "stage", "layers", "in flight",
                "parameters", "gradients", "optimizer", "activations", "comm", "total");
  out += line;
  std::size_t staging = 0;
  for (const MemoryEstimate& m : stages) {
    std::snprintf(line, sizeof line, "  %5d %6d %9s %12s %12s %12s %12s %12s %12s\n", m.stage, m.layers, m.slots.c_str(),
                  format_bytes(static_cast<double>(m.parameters)).c_str(),
                  format_bytes(static_cast<double>(m.gradients)).c_str(),
                  format_bytes(static_cast<double>(m.optimizer)).c_str(),
                  format_bytes(static_cast<double>(m.activations)).c_str(),
                  format_bytes(static_cast<double>(m.communication)).c_str(),
                  format_bytes(static_cast<double>(m.total())).c_str());
    out += line;
    staging = std::max(staging, m.host_staging);
  }
  // Host memory under parallel.comm = mpi on GPUs, beside the device memory of the rows.
  if (staging > 0) {
    out += "  plus host memory for staging gradient reductions through MPI (parallel.comm = mpi): " +
           format_bytes(static_cast<double>(staging)) + " per rank (largest stage)\n";
  }
  return out;
}

}  // namespace trident::app
