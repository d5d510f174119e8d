// trident train DECK [--section.key=value ...]
#include <memory>
#include <chrono>
#include <algorithm>  // std::max
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>  // std::strerror
#include <filesystem>
#include <system_error>
#include <fstream>

#include "io/path_lookup.h"  // uncreatable_directory
#include "io/user_error.h"
#include "kernels/backend.h"
#include "kernels/device_refusal.h"  // DeviceRefusal: reported as the user's error
#include "kernels/rounded_storage_backend.h"
#include "kernels/timing_backend.h"
#include "mpi_support/mpi_process.h"  // duplicate, world_size, processor_name
#include "parallel/mpi_comm.h"
#include "parallel/parallel_context.h"
#include "src/app/backend_options.h"
#include "src/app/gradient_fault.h"  // gradient_fault_from_environment (a test hook)
#include "src/app/command_args.h"
#include "src/app/commands.h"
#include "src/app/dataset_access.h"
#include "src/app/device_choice.h"
#include "src/app/rank_error.h"  // end_job_on_rank_error
#include "src/app/run_dir_lock.h"
#include "src/app/run_setup.h"
#include "src/app/memory_estimate.h"
#include "src/app/memory_fit.h"
#include "src/app/resident_memory.h"
#include "io/param_file.h"
#include "src/app/restart_choice.h"
#include "src/app/restart_compatibility.h"
#include "src/app/startup_clock.h"
#include "src/app/stall_exit.h"  // stall_exit_action (run.stall_timeout)
#include "src/app/startup_report.h"
#include "src/app/stop_signal.h"
#include "src/app/threads.h"
#include "src/app/version_text.h"
#include "src/train/checkpoint_files.h"  // checkpoint_directory
#include "src/train/final_parameters.h"
#include "src/train/peak_flops.h"
#include "src/train/run_layout.h"
#include "src/train/trainer.h"

namespace trident::app {

namespace {

constexpr const char* kTrainUsage =
    "usage: trident train DECK [--section.key=value ...]\n"
    "\n"
    "Trains a GPT as the input deck DECK says, on every rank of the job: launch it with mpirun\n"
    "or srun, dp x tp x pp ranks. Any deck key can be overridden after the deck, as\n"
    "--optim.lr=3e-4 or --train.steps 1000 (a value starting with -- only after =). The run\n"
    "writes into run.dir: the resolved deck (config.ini), metrics.jsonl, checkpoints/ and\n"
    "final-params.h5. With run.restart = auto (the default) a rerun resumes from the newest\n"
    "checkpoint that verifies, on any layout. SIGTERM or SIGUSR1 stops it after the current step\n"
    "with a checkpoint (exit 0).\n"
    "\n"
    "examples:\n"
    "  mpirun -np 2 trident train inputs/quickstart.ini\n"
    "  srun trident train inputs/gpt2-124m.ini --run.dir=runs/lr3e-4 --optim.lr=3e-4 --optim.min_lr=3e-5\n"
    "\n"
    "Deck keys: docs/input-deck.md; running, restarts, signals: docs/running.md. Exit status:\n"
    "0 success, 2 a user error (one line naming the key or file), 3 training diverged, 4 a rank\n"
    "stalled (rerun to resume), 1 an internal error.\n";

// Rank 0 creates run.dir and takes its lock (one training at a time, run_dir_lock.h); failures
// are agreed by every rank. The lock is rank 0's to hold for the run.
RunDirLock prepare_run_dir(const RunSetup& setup, parallel::Comm& world) {
  std::string error;
  RunDirLock lock;
  if (world.rank() == 0) {
    const std::string& dir = setup.config.run.dir;
    error = io::uncreatable_directory("run.dir", dir);  // a file in the way: trident check's line
    std::error_code ec;
    if (error.empty()) std::filesystem::create_directories(dir, ec);
    if (error.empty() && ec) error = "run.dir '" + dir + "': cannot create the run directory (" + ec.message() + ")";
    if (error.empty()) {
      try {
        lock = RunDirLock(dir);
      } catch (const io::UserError& e) {
        error = e.what();
      }
    }
    if (error.empty() && !lock.unsupported_reason().empty()) {
      std::printf("note: %s: a second training started in this run.dir would not be refused\n",
                  lock.unsupported_reason().c_str());
    }
  }
  error = parallel::agree_on_error(world, error);
  if (!error.empty()) throw io::UserError(error);
  return lock;
}

// Rank 0 writes the resolved deck as run.dir/config.ini once the restart is chosen and its
// checkpoint read: a start that is refused (a deck the checkpoint does not allow among them) leaves
// the last run's config.ini, which still resumes that run and whose checkpoint.dir the next
// attempt compares (choose_restart). Failures are agreed by every rank.
void write_run_config(const RunSetup& setup, parallel::Comm& world) {
  std::string error;
  if (world.rank() == 0) {
    const std::string config_path = setup.config.run.dir + "/config.ini";
    std::ofstream out(config_path);
    if (out) out << setup.deck.to_ini();
    if (!out || !out.flush()) error = "run.dir '" + setup.config.run.dir + "': cannot write " + config_path;
  }
  error = parallel::agree_on_error(world, error);
  if (!error.empty()) throw io::UserError(error);
}

// run.device for this rank (src/app/device_choice.h); a refusal on any node fails every rank.
DeviceChoice choose_device_collectively(const std::string& requested, bool ranks_may_share_gpus,
                                        parallel::ParallelContext& ctx, parallel::Comm& world) {
  // Each rank names the physical GPU it would take; the node's ranks compare names, so ranks
  // bound to one GPU each (every one seeing "GPU 0") are told from ranks crowding one GPU.
  NodeGpus node;
  node.visible = requested == "cpu" ? 0 : kernels::cuda_device_count();
  node.local_rank = ctx.node_local_rank();
  std::string mine;
  if (node.visible > 0) {
    const int gpu = gpu_for_rank(node.local_rank, node.visible);
    mine = kernels::cuda_device_bus_id(gpu);
    // Without a bus id, the visible index stands in: right when every rank sees every GPU.
    if (mine.empty()) mine = "visible GPU " + std::to_string(gpu);
    // cuBLAS is opened here, where a GPU may be taken, and not on CPU runs (kernels/backend.h).
    node.library_problem = kernels::cuda_library_problem();
  }
  node.taken = parallel::all_gather_strings(ctx.node(), mine);
  DeviceChoice choice;
  std::string error;
  try {
    choice = choose_device(requested, kernels::cuda_compiled(), node, ranks_may_share_gpus,
                           node.visible == 0 ? kernels::cuda_device_problem() : std::string());
  } catch (const io::UserError& e) {
    error = e.what();
  }
  error = parallel::agree_on_error(world, error);
  if (!error.empty()) throw io::UserError(error);
  // auto decides per node: where nodes differ (one without GPUs, or with too few for its ranks)
  // some ranks would build NCCL groups the others never join. Then every rank takes the CPU.
  const bool on_cuda = choice.device == kernels::Device::kCuda;
  const bool any_cuda = world.all_reduce_max(on_cuda ? 1 : 0) == 1;
  const bool any_cpu = world.all_reduce_max(on_cuda ? 0 : 1) == 1;
  if (any_cuda && any_cpu) {
    choice = DeviceChoice{kernels::Device::kCpu, -1,
                          "run.device = auto: cpu, because not every rank has a GPU of its own"};
  }
  return choice;
}

// Stops the run on every rank, before the model is allocated, when the ranks sharing a memory
// pool (a node's host memory, or one GPU) need more than it has free (src/app/memory_fit.h).
void check_run_fits(const MemoryEstimate& estimate, const DeviceChoice& device, parallel::ParallelContext& ctx,
                    parallel::Comm& world) {
  const std::string node_name = mpi_support::processor_name();
  const bool cuda = device.device == kernels::Device::kCuda;
  MemoryPool pool;
  std::string key = "host";
  if (cuda) {
    const kernels::DeviceMemoryInfo gpu = kernels::cuda_device_memory(device.gpu);
    pool.free_bytes = gpu.free_bytes;
    pool.total_bytes = gpu.total_bytes;
    key = kernels::cuda_device_bus_id(device.gpu);
    pool.name = "GPU " + std::to_string(device.gpu) + " (" + gpu.name + (key.empty() ? "" : ", " + key) +
                ") of node " + node_name;
    pool.free_means = "free";
    // Without a bus id, ranks bound to different GPUs could all call theirs "GPU 0": each rank
    // then counts as a pool of its own, which can miss crowding but never refuses a run wrongly.
    if (key.empty()) key = "GPU of world rank " + std::to_string(world.rank());
  } else {
    pool = host_memory_pool(node_name);
  }
  const std::string error = check_memory_fits(ctx.node(), world, key, estimate.total(), pool, cuda);
  if (!error.empty()) throw io::UserError(error);
}

// The objects of a run that train_from_deck makes, owned by train_command outside
// end_job_on_rank_error, so that a rank's error is handled (rank_error.h) while they are alive.
// Some of their destructors are collective or wait for peers (the dataset's parallel HDF5 close, a
// pending reduction's request in the trainer, an NCCL stream): run while a failing rank unwinds,
// they would block it while the others wait in their next collective. Members go in the reverse
// order of declaration, so the order here is chosen for that, not for their making (the backend
// is made after the groups, which choose the device): the groups go before the backend whose
// memory and stream they use.
struct RunObjects {
  std::unique_ptr<io::TokenDataset> dataset;
  RunDirLock run_dir_lock;
  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<parallel::BackendMemory> backend_memory;
  std::unique_ptr<parallel::ParallelContext> ctx;
  std::unique_ptr<train::StallWatchdog> watchdog;
  std::unique_ptr<kernels::Backend> fault;
  std::unique_ptr<kernels::TimingBackend> timing;
  std::unique_ptr<kernels::RoundedStorageBackend> rounded;
  std::unique_ptr<train::Trainer> trainer;
};

// Everything after the deck: the dataset, the device and groups, the model, the restart, the
// steps and the final files, made into `run`. Its errors may be one rank's alone (train_command
// runs it inside end_job_on_rank_error).
void train_from_deck(const RunSetup& setup, parallel::MpiComm& world, StartupClock& startup, RunObjects& run) {
  const auto& c = setup.config;
  const int world_size = world.size();
  const bool leader = world.rank() == 0;
  run.dataset = open_run_dataset(setup, world, MPI_COMM_WORLD);
  const std::unique_ptr<io::TokenDataset>& dataset = run.dataset;
  const auto& info = dataset->info();
  check_dataset_fits(setup, info.vocab_size, dataset->num_samples(io::Split::kTrain, c.train.seq_len),
                     dataset->num_samples(io::Split::kValidation, c.train.seq_len), c.data.path);
  // Where run.dir's last run kept its checkpoints (its config.ini, rewritten once the restart is
  // chosen): a changed checkpoint.dir must not silently start that run over (choose_restart).
  const std::string recorded_checkpoint_dir = leader ? recorded_checkpoint_directory(c.run.dir) : "";
  run.run_dir_lock = prepare_run_dir(setup, world);
  startup.phase_done("deck and data");

  // The backend is declared before the groups, made after them (the device is chosen per
  // node-local rank): the groups' NCCL and staging communicators use the backend's memory and
  // stream until they are destroyed, so the backend must be destroyed after them (RunObjects).
  std::unique_ptr<kernels::Backend>& backend = run.backend;
  run.ctx = std::make_unique<parallel::ParallelContext>(MPI_COMM_WORLD, c.parallel.tp, c.parallel.dp, c.parallel.pp);
  parallel::ParallelContext& ctx = *run.ctx;
  // run.stall_timeout: from here on a rank that stops making progress (a device, NCCL's set-up, a
  // step, a checkpoint) ends the job saying where it was, rather than hold it to its time limit.
  std::unique_ptr<train::StallWatchdog>& watchdog = run.watchdog;
  if (c.run.stall_timeout > 0) {
    watchdog = std::make_unique<train::StallWatchdog>(
        c.run.stall_timeout, stall_exit_action(ctx.world_rank(), ctx.coord(), c.run.stall_timeout,
                                               train::checkpoint_directory(c.run.dir, c.checkpoint.dir)));
  }
  const int threads = c.run.threads > 0 ? c.run.threads : default_threads(ctx.node_local_size());
  const bool nccl = c.parallel.comm == "nccl";
  const DeviceChoice device = choose_device_collectively(c.run.device, !nccl, ctx, world);
  const bool flash_fits = device.device == kernels::Device::kCuda && kernels::cuda_flash_attention_fits(device.gpu);
  const kernels::BackendOptions kernel_options = backend_options(c, device.device, flash_fits);
  // run.attention = auto passing over flash for this GPU alone (said in the start-up report).
  const bool flash_too_large = kernel_options.attention == kernels::AttentionKernel::kGemm &&
                               attention_kernel(c, device.device, true) == kernels::AttentionKernel::kFlash;
  if (kernel_options.attention == kernels::AttentionKernel::kFlash && device.device == kernels::Device::kCpu) {
    // Every rank chose the same device (choose_device_collectively): all refuse alike.
    throw io::UserError("run.attention = flash: only the CUDA backend has flash attention, and this run is on the "
                        "CPU (" + device.reason + "); use run.attention = gemm");
  }
  try {
    backend = kernels::make_backend(device.device, threads, device.gpu < 0 ? 0 : device.gpu, kernel_options);
  } catch (const kernels::DeviceRefusal& e) {
    throw io::UserError(e.what());  // the deck's kernel choices against this device: the user's to change
  }
  // On GPUs the groups talk NCCL on device memory, or (parallel.comm = mpi) MPI on host copies
  // of the device buffers. CPU runs use MPI on their own memory.
  run.backend_memory = std::make_unique<parallel::BackendMemory>(*backend);
  // The same choice the memory estimate counts the communication buffers of.
  const parallel::CommTransport transport = comm_transport(device.device != kernels::Device::kCpu, c.parallel.comm);
  if (transport == parallel::CommTransport::kNccl) {
    // A build without NCCL refuses on every rank alike: a user error (parallel.comm = mpi works).
    try {
      ctx.use_nccl(*run.backend_memory, backend->device_stream());
    } catch (const std::runtime_error& e) {
      throw io::UserError(e.what());
    }
  } else if (transport == parallel::CommTransport::kMpiStaged) {
    ctx.stage_device_buffers(*run.backend_memory);
  }
  startup.phase_done("device and groups");
  // bf16 / fp16: 16-bit storage semantics (kernels/rounded_storage_backend.h) for the model's
  // 16-bit buffers: the kernels that do not read 16 bits themselves (all of the CPU's; none on
  // CUDA) run on widened fp32 copies.
  const kernels::Precision precision = kernels::parse_precision(c.train.precision);
  // A test's injected NaN (src/app/gradient_fault.h), innermost: the rest sees a kernel's output.
  run.fault = gradient_fault_from_environment(*backend, ctx.world_rank());
  kernels::Backend& device_kernels = run.fault ? *run.fault : *backend;
  // run.profile: the kernels timed where they run, under the rounding (its widening and
  // narrowing, where a kernel lacks 16-bit loads, show as kernels of their own).
  std::unique_ptr<kernels::TimingBackend>& timing = run.timing;
  if (c.run.profile) timing = std::make_unique<kernels::TimingBackend>(device_kernels);
  kernels::Backend& kernels_backend = timing ? static_cast<kernels::Backend&>(*timing) : device_kernels;
  if (precision != kernels::Precision::kFp32) {
    run.rounded = std::make_unique<kernels::RoundedStorageBackend>(kernels_backend, precision);
  }
  kernels::Backend& compute = run.rounded ? static_cast<kernels::Backend&>(*run.rounded) : kernels_backend;

  if (leader) {
    std::printf("%s", startup_report(setup, ctx.grid(),
                                     backend->attention_scratch_size(static_cast<int>(c.train.micro_batch),
                                                                     c.train.seq_len, c.model.heads / c.parallel.tp),
                                     backend->native_16bit(), transport)
                          .c_str());
    std::printf("backend: %s per rank (%s)\n", compute.name().c_str(), device.reason.c_str());
    if (flash_too_large) {
      std::printf("note: run.attention = auto: GEMM attention, as this GPU gives a block less shared memory than the "
                  "flash kernels need (compute capability 8.0 and later give enough)\n");
    }
    // Only where the thread count came from the binding; a GPU run's host threads matter little.
    if (const std::string note = binding_note(ctx.node_local_size());
        !note.empty() && c.run.threads == 0 && device.device == kernels::Device::kCpu) {
      std::printf("%s\n", note.c_str());
    }
    if (timing) {
      std::printf("profile: run.profile = true: every kernel call of the training steps is timed alone, the device "
                  "drained around it, so the steps run slower than plain ones\n");
    }
    if (device.device != kernels::Device::kCpu) {
      std::printf("communication: %s\n", nccl ? "parallel.comm = nccl: NCCL on device memory, one stream per group"
                                              : "parallel.comm = mpi: MPI, device buffers staged through host memory");
    }
    std::printf("data: %s: %lld tokens (%lld train), vocab %lld, tokenizer %s\n", c.data.path.c_str(),
                static_cast<long long>(info.total_tokens), static_cast<long long>(info.train_tokens),
                static_cast<long long>(info.vocab_size), info.tokenizer.c_str());
    if (!std::isnan(info.entropy_rate_nats)) {
      std::printf("data: synthetic source, entropy rate (loss floor) %.4f nats/token\n", info.entropy_rate_nats);
    }
    std::fflush(stdout);
  }

  double peak = c.log.peak_tflops * 1e12;
  std::string datasheet;
  if (peak <= 0.0) peak = train::datasheet_peak_flops(backend->name(), precision, datasheet);
  // Measured on every rank or on none: the mean below is a collective, and ranks on GPUs of
  // different models (some without a datasheet peak) would otherwise disagree on entering it.
  double unknown = peak <= 0.0 ? 1.0 : 0.0;
  world.all_reduce_sum(&unknown, 1);
  if (unknown == 0.0 && !datasheet.empty() && leader) {
    std::printf("peak: %.0f TFLOP/s per rank (%s, datasheet; set log.peak_tflops to override)\n", peak / 1e12,
                datasheet.c_str());
  }
  if (unknown > 0.0) {
    peak = train::measure_matmul_flops(*backend);
    // Ranks of a node share its cores: take the mean so MFU is against the job as a whole.
    world.all_reduce_sum(&peak, 1);
    peak /= world_size;
    if (leader) std::printf("peak: %.1f GFLOP/s per rank (measured sgemm; set log.peak_tflops to override)\n", peak / 1e9);
    startup.phase_done("sgemm peak");
  }

  model::GptLayout layout = train::run_layout(c, setup.stage_layers, ctx.coord().tp_rank, ctx.coord().pp_rank);
  layout.native_16bit = compute.native_16bit();  // as Gpt sets it: the memory estimate counts the same
  const MemoryEstimate estimate = estimate_run_memory(
      c, setup.model, layout,
      backend->attention_scratch_size(static_cast<int>(c.train.micro_batch), c.train.seq_len,
                                      c.model.heads / c.parallel.tp),
      transport);
  check_run_fits(estimate, device, ctx, world);
  // Memory the trainer adds (parameters, gradients, optimizer state, activations), measured as
  // the growth of the resident high-water mark, against the estimate printed at start-up.
  const double resident_before = static_cast<double>(resident_bytes());
  run.trainer = std::make_unique<train::Trainer>(c, setup.model, layout, ctx, compute, *dataset);
  train::Trainer& trainer = *run.trainer;
  if (timing) trainer.profile_kernels(*timing);
  if (watchdog) trainer.watch(*watchdog);
  startup.phase_done("model memory");
  const auto start = std::chrono::steady_clock::now();
  trainer.record_deck(setup.deck.to_ini());
  if (watchdog) watchdog->mark({.activity = train::Activity::kLoadingCheckpoint});
  // Before the restart's choice, which reads checkpoint.dir: a file in its place would read as a
  // directory without checkpoints (a fresh start, or "a finished run" refused for the wrong reason).
  if (c.checkpoint.every > 0) {
    const std::string problem =
        parallel::agree_on_error(world, leader ? train::checkpoint_directory_problem(trainer.checkpoint_dir()) : "");
    if (!problem.empty()) throw io::UserError(problem);
  }
  const std::string restart = choose_restart(c, trainer.checkpoint_dir(), recorded_checkpoint_dir, world, ctx.world_handle());
  int64_t start_step = 0;
  if (restart.empty()) {
    trainer.initialize_parameters();
    startup.phase_done("parameters");
  } else {
    // Every rank reads the same attribute and compares the same way: the same error everywhere.
    if (const auto saved = io::read_param_file_string_attribute(restart, "deck")) {
      const io::ResolvedDeck saved_deck = io::parse_checkpoint_deck(*saved, restart);
      check_restart_compatible(saved_deck, setup.deck, restart);
      if (const std::string changes = changed_training_keys(saved_deck, setup.deck); leader && !changes.empty()) {
        std::printf("restart: note: %s: the steps after the checkpoint train with these\n", changes.c_str());
      }
      const std::string& saved_steps = saved_deck.value("train.steps");
      if (leader && c.optim.decay_steps == 0 && saved_steps != setup.deck.value("train.steps")) {
        std::printf("restart: note: optim.decay_steps = 0 follows train.steps, which changed from %s to %lld: the "
                    "learning-rate schedule differs from the checkpointed run's from here on\n",
                    saved_steps.c_str(), static_cast<long long>(c.train.steps));
      }
    }
    const auto load_start = std::chrono::steady_clock::now();
    start_step = trainer.load_checkpoint(restart);
    if (leader) {
      std::printf("restart: resuming from %s after step %lld (read in %.2f s)\n", restart.c_str(),
                  static_cast<long long>(start_step),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());
    }
    startup.phase_done("checkpoint read");
  }
  write_run_config(setup, world);
  // From here the run is not complete, whatever an earlier one of run.dir said (train.steps raised,
  // or run.restart = none): a job script must rerun it if this attempt stops early.
  if (leader && start_step < c.train.steps) {
    std::error_code ignored;
    std::filesystem::remove(c.run.dir + "/complete", ignored);
  }
  const std::string startup_line = startup.line(world);
  if (leader) {
    std::printf("%s\n", startup_line.c_str());
    std::fflush(stdout);
  }
  const train::RunSummary summary =
      trainer.run(c.run.dir + "/metrics.jsonl", peak, start_step, [] { return stop_requested(); });
  if (summary.stopped) {
    if (leader) {
      std::printf("stopped by a signal after step %lld: checkpoint written to %s; run the same command to resume\n",
                  static_cast<long long>(summary.steps_done), trainer.checkpoint_dir().c_str());
    }
    return;
  }
  {
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
    float device_mib = static_cast<float>(static_cast<double>(backend->device_bytes_high_water()) / 1048576.0);
    world.all_reduce_max(&device_mib, 1);
    if (leader && device.device != kernels::Device::kCpu) {
      std::printf("memory: device memory held by the backend at most: %.1f MiB (largest over ranks; the CUDA "
                  "context and library workspaces come on top)\n",
                  static_cast<double>(device_mib));
    }
    const std::string algorithms = backend->matmul_algorithm_report();
    if (leader && !algorithms.empty()) std::printf("%s (rank 0)\n", algorithms.c_str());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (leader && start_step >= c.train.steps) {
    // A rerun of a finished run (a requeued job): no step, so no loss to report.
    std::printf("done: nothing left to train: the checkpoint is at step %lld of train.steps = %lld (raise "
                "train.steps to train on); metrics in %s/metrics.jsonl\n",
                static_cast<long long>(start_step), static_cast<long long>(c.train.steps), c.run.dir.c_str());
  } else if (leader) {
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
    if (!std::isnan(info.entropy_rate_nats) && !std::isnan(summary.last_val_loss)) {
      std::printf(" (%.1f%% above the loss floor %.4f)",
                  100.0 * (summary.last_val_loss / info.entropy_rate_nats - 1.0), info.entropy_rate_nats);
    }
    std::printf("; metrics in %s/metrics.jsonl\n", c.run.dir.c_str());
  }
  // The step the parameters are at: train.steps, or the checkpoint's when it was past it.
  const int64_t steps_reached = std::max<int64_t>(start_step, c.train.steps);
  // The final parameters, global shapes, one file for any layout (docs/param-file.md).
  // Collective: every rank writes the slices it owns.
  if (c.run.save_final) {
    const std::string params_path = c.run.dir + "/final-params.h5";
    train::write_final_parameters(params_path, trainer.model().params(), trainer.fp32_parameters(),
                                  trainer.fp32_parameters_begin(), *backend, ctx,
                                  steps_reached, setup.model, ctx.world_handle());
    if (leader) std::printf("final parameters: %s\n", params_path.c_str());
  }
  // run.dir/complete tells job scripts that a rerun has nothing left to do. Checked: without it
  // they would rerun a finished run, each time with nothing left to train.
  std::string complete_error;
  if (leader) {
    errno = 0;
    std::ofstream complete(c.run.dir + "/complete");
    complete << steps_reached << "\n";
    complete.close();
    if (!complete) {
      complete_error = "run.dir '" + c.run.dir + "': cannot write its 'complete' marker (" + std::strerror(errno) +
                       "): the run finished, but job scripts would rerun it; free space and rerun the same command (it has "
                       "nothing left to train and writes the marker)";
    }
  }
  complete_error = parallel::agree_on_error(world, complete_error);
  if (!complete_error.empty()) throw io::UserError(complete_error);
}

}  // namespace

int train_command(const std::vector<std::string>& args) {
  if (print_help_if_asked(args, kTrainUsage)) return 0;
  StartupClock startup;
  const int world_size = mpi_support::world_size();
  parallel::MpiComm world(mpi_support::duplicate(MPI_COMM_WORLD), "world");

  install_stop_handlers();  // first: a preemption warning during start-up is not lost
  const CommandArgs command = split_command_args("train", args);
  const std::string text = read_deck_collectively(world, command.deck_path);
  const RunSetup setup = make_run_setup(text, command.deck_path, command.overrides, world_size);
  // The banner first: it heads every log, also above the line of a dataset being generated.
  if (world.rank() == 0) std::printf("%s", version_text().c_str());
  // An error of one rank alone (an allocation, a file, a device) must end the job, not leave the
  // others waiting in their next collective while it blocks in a collective destructor
  // (rank_error.h, RunObjects). Errors of the deck above are every rank's alike.
  RunObjects run;
  end_job_on_rank_error(MPI_COMM_WORLD, world.rank(), [&] { train_from_deck(setup, world, startup, run); });
  return 0;
}

}  // namespace trident::app
