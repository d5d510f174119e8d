#include "src/app/run_report.h"

#include <cmath>
#include <cstdio>

#include "src/app/resident_memory.h"
#include "src/app/startup_report.h"
#include "src/app/threads.h"  // binding_note

namespace trident::app {

void print_run_banner(const RunSetup& setup, parallel::ParallelContext& ctx, const RunKernels& run_kernels,
                      const io::TokenFileInfo& data) {
  if (ctx.world_rank() != 0) return;
  const io::RunConfig& c = setup.config;
  const kernels::Backend& backend = *run_kernels.device;
  const DeviceChoice& device = run_kernels.device_choice;
  std::printf("%s", startup_report(setup, ctx.grid(),
                                   backend.attention_scratch_size(static_cast<int>(c.train.micro_batch),
                                                                  c.train.seq_len, c.model.heads / c.parallel.tp),
                                   backend.native_16bit(), run_kernels.transport)
                        .c_str());
  std::printf("backend: %s per rank (%s)\n", run_kernels.compute->name().c_str(), device.reason.c_str());
  if (run_kernels.flash_too_large) {
    std::printf("note: run.attention = auto: GEMM attention, as this GPU gives a block less shared memory than the "
                "flash kernels need (compute capability 8.0 and later give enough)\n");
  }
  // Only where the thread count came from the binding; a GPU run's host threads matter little.
  if (const std::string note = binding_note(ctx.node_local_size());
      !note.empty() && c.run.threads == 0 && device.device == kernels::Device::kCpu) {
    std::printf("%s\n", note.c_str());
  }
  if (run_kernels.profiled) {
    std::printf("profile: run.profile = true: every kernel call of the training steps is timed alone, the device "
                "drained around it, so the steps run slower than plain ones\n");
  }
  if (device.device != kernels::Device::kCpu) {
    std::printf("communication: %s\n", c.parallel.comm == "nccl"
                                           ? "parallel.comm = nccl: NCCL on device memory, one stream per group"
                                           : "parallel.comm = mpi: MPI, device buffers staged through host memory");
  }
  std::printf("data: %s: %lld tokens (%lld train), vocab %lld, tokenizer %s\n", c.data.path.c_str(),
              static_cast<long long>(data.total_tokens), static_cast<long long>(data.train_tokens),
              static_cast<long long>(data.vocab_size), data.tokenizer.c_str());
  if (!std::isnan(data.entropy_rate_nats)) {
    std::printf("data: synthetic source, entropy rate (loss floor) %.4f nats/token\n", data.entropy_rate_nats);
  }
  std::fflush(stdout);
}

void print_memory_use(const MemoryEstimate& estimate, double resident_before, const RunKernels& run_kernels,
                      parallel::ParallelContext& ctx, parallel::Comm& world) {
  const bool leader = world.rank() == 0;
  float grown_mib = static_cast<float>((static_cast<double>(peak_resident_bytes()) - resident_before) / 1048576.0);
  world.all_reduce_max(&grown_mib, 1);
  // The gradient reductions' own buffers, held now against their share of the estimate.
  parallel::CommBufferBytes held = ctx.data().buffer_bytes();
  if (ctx.embedding() != nullptr) held += ctx.embedding()->buffer_bytes();
  if (leader) {
    std::printf("memory: rank 0 estimate %s; measured growth of resident memory while training: %.1f MiB "
                "(largest over ranks)\n",
                format_bytes(static_cast<double>(estimate.total())).c_str(), static_cast<double>(grown_mib));
    std::printf("memory: rank 0's gradient-reduction buffers: %zu bytes held, %zu bytes estimated\n",
                held.device + held.host, estimate.communication + estimate.host_staging);
  }
  // On a GPU the model's memory is device memory: its high-water mark, through the backend.
  const kernels::Backend& backend = *run_kernels.device;
  float device_mib = static_cast<float>(static_cast<double>(backend.device_bytes_high_water()) / 1048576.0);
  world.all_reduce_max(&device_mib, 1);
  if (leader && run_kernels.device_choice.device != kernels::Device::kCpu) {
    std::printf("memory: device memory held by the backend at most: %.1f MiB (largest over ranks; the CUDA "
                "context and library workspaces come on top)\n",
                static_cast<double>(device_mib));
  }
  const std::string algorithms = backend.matmul_algorithm_report();
  if (leader && !algorithms.empty()) std::printf("%s (rank 0)\n", algorithms.c_str());
}

void print_done(const io::RunConfig& c, int64_t start_step, double seconds, const train::RunSummary& summary,
                double entropy_rate_nats) {
  if (start_step >= c.train.steps) {
    // A rerun of a finished run (a requeued job): no step, so no loss to report.
    std::printf("done: nothing left to train: the checkpoint is at step %lld of train.steps = %lld (raise "
                "train.steps to train on); metrics in %s/metrics.jsonl\n",
                static_cast<long long>(start_step), static_cast<long long>(c.train.steps), c.run.dir.c_str());
    return;
  }
  // The steps of this invocation: a resumed run did not train the first start_step of them.
  if (start_step > 0) {
    std::printf("done: steps %lld to %lld in %.1f s (resumed after step %lld); final loss %.4f",
                static_cast<long long>(start_step + 1), static_cast<long long>(c.train.steps), seconds,
                static_cast<long long>(start_step), summary.last_loss);
  } else {
    std::printf("done: %lld steps in %.1f s; final loss %.4f", static_cast<long long>(c.train.steps), seconds,
                summary.last_loss);
  }
  if (!std::isnan(summary.last_val_loss)) std::printf(", validation loss %.4f", summary.last_val_loss);
  if (!std::isnan(entropy_rate_nats) && !std::isnan(summary.last_val_loss)) {
    std::printf(" (%.1f%% above the loss floor %.4f)", 100.0 * (summary.last_val_loss / entropy_rate_nats - 1.0),
                entropy_rate_nats);
  }
  std::printf("; metrics in %s/metrics.jsonl\n", c.run.dir.c_str());
}

}  // namespace trident::app
