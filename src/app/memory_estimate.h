// The memory one rank will need, from the parameter table and the activation arena (the same
// functions that size the real allocations), so `trident check` can answer before a launch.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "io/run_config.h"
#include "parallel/comm_buffers.h"
#include "src/model/gpt.h"
#include "src/model/gpt_config.h"

namespace trident::app {

struct MemoryEstimate {
  std::size_t parameters = 0;   // bytes: the compute copy (fp32, or 16-bit under mixed precision)
  std::size_t gradients = 0;    // fp32
  std::size_t optimizer = 0;    // AdamW first and second moments (and fp32 master weights)
  std::size_t activations = 0;  // forward state of the micro-batches in flight plus backward scratch
                                // and the attention workspace (one layer's T x T at a time)
  std::size_t communication = 0;  // the gradient reductions' own buffers in the model's memory
                                  // (device memory on GPUs; parallel/comm_buffers.h)
  std::size_t host_staging = 0;   // parallel.comm = mpi on GPUs: the host copies those reductions
                                  // stage through (host memory, not in total())
  int stage = 0;
  int layers = 0;               // blocks on the stage
  std::string slots = "1";      // micro-batches in flight: "4", or per chunk "8+4" (interleaved)
  std::size_t total() const { return parameters + gradients + optimizer + activations + communication; }
};

// attention_scratch: floats the backend asks for (Backend::attention_scratch_size for the
// rank's heads; forward and backward share it). zero_shards: dp with parallel.zero = 1 (the
// AdamW state is one block of the arena padded to a multiple of dp, parallel/zero_shard.h), 1
// otherwise. master_weights: train.precision is bf16 or fp16 (AdamW then holds fp32 master
// weights of its block too).
MemoryEstimate estimate_memory(const model::GptConfig& config, int micro_batch, int seq_len,
                               std::size_t attention_scratch, const model::GptLayout& layout = {},
                               int zero_shards = 1, bool master_weights = false);

// How a run's groups would talk: MPI on the CPU; on a GPU (`cuda`) NCCL, or MPI staged through
// host memory, as parallel.comm says.
parallel::CommTransport comm_transport(bool cuda, const std::string& parallel_comm);

// The run's estimate for one stage's ranks: estimate_memory with the deck's ZeRO-1 and precision,
// plus the gradient reductions' buffers over `transport`.
MemoryEstimate estimate_run_memory(const io::RunConfig& run, const model::GptConfig& config,
                                   const model::GptLayout& layout, std::size_t attention_scratch,
                                   parallel::CommTransport transport);

// One row per pipeline stage (every rank of a stage needs the same).
std::string memory_table(const std::vector<MemoryEstimate>& stages, const char* recompute, int zero_shards);

std::string format_bytes(double bytes);

}  // namespace trident::app
