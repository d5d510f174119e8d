// trident train DECK [--section.key=value ...]
#include <algorithm>  // std::max
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <system_error>

#include "io/param_file.h"  // read_param_file_string_attribute
#include "io/user_error.h"
#include "kernels/backend.h"
#include "kernels/precision.h"
#include "mpi_support/mpi_process.h"  // duplicate, world_size
#include "parallel/mpi_comm.h"
#include "parallel/parallel_context.h"
#include "src/app/command_args.h"
#include "src/app/commands.h"
#include "src/app/dataset_access.h"
#include "src/app/memory_estimate.h"
#include "src/app/rank_error.h"  // end_job_on_rank_error
#include "src/app/resident_memory.h"
#include "src/app/restart_choice.h"
#include "src/app/restart_compatibility.h"
#include "src/app/run_device.h"
#include "src/app/run_dir_files.h"
#include "src/app/run_objects.h"
#include "src/app/run_report.h"
#include "src/app/run_setup.h"
#include "src/app/stall_exit.h"  // stall_exit_action (run.stall_timeout)
#include "src/app/startup_clock.h"
#include "src/app/stop_signal.h"
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

// The peak FLOP/s per rank that MFU is measured against: log.peak_tflops, else the device's
// datasheet figure, else a measured sgemm, averaged over the ranks.
double peak_flops_per_rank(const io::RunConfig& c, kernels::Backend& backend, kernels::Precision precision,
                           parallel::Comm& world, StartupClock& startup) {
  const bool leader = world.rank() == 0;
  double peak = c.log.peak_tflops * 1e12;
  std::string datasheet;
  if (peak <= 0.0) peak = train::datasheet_peak_flops(backend.name(), precision, datasheet);
  // Measured on every rank or on none: the mean below is a collective, and ranks on GPUs of
  // different models (some without a datasheet peak) would otherwise disagree on entering it.
  double unknown = peak <= 0.0 ? 1.0 : 0.0;
  world.all_reduce_sum(&unknown, 1);
  if (unknown == 0.0 && !datasheet.empty() && leader) {
    std::printf("peak: %.0f TFLOP/s per rank (%s, datasheet; set log.peak_tflops to override)\n", peak / 1e12,
                datasheet.c_str());
  }
  if (unknown > 0.0) {
    peak = train::measure_matmul_flops(backend);
    // Ranks of a node share its cores: take the mean so MFU is against the job as a whole.
    world.all_reduce_sum(&peak, 1);
    peak /= world.size();
    if (leader) std::printf("peak: %.1f GFLOP/s per rank (measured sgemm; set log.peak_tflops to override)\n", peak / 1e9);
    startup.phase_done("sgemm peak");
  }
  return peak;
}

// Fresh parameters when `restart` is "", else the checkpoint's, after checking that its deck
// allows this one (restart_compatibility.h) and noting what changed. Returns the step the
// parameters are at.
int64_t restart_or_initialize(const std::string& restart, const RunSetup& setup, train::Trainer& trainer, bool leader,
                              StartupClock& startup) {
  if (restart.empty()) {
    trainer.initialize_parameters();
    startup.phase_done("parameters");
    return 0;
  }
  // Every rank reads the same attribute and compares the same way: the same error everywhere.
  if (const auto saved = io::read_param_file_string_attribute(restart, "deck")) {
    const io::ResolvedDeck saved_deck = io::parse_checkpoint_deck(*saved, restart);
    check_restart_compatible(saved_deck, setup.deck, restart);
    if (const std::string changes = changed_training_keys(saved_deck, setup.deck); leader && !changes.empty()) {
      std::printf("restart: note: %s: the steps after the checkpoint train with these\n", changes.c_str());
    }
    const std::string& saved_steps = saved_deck.value("train.steps");
    if (leader && setup.config.optim.decay_steps == 0 && saved_steps != setup.deck.value("train.steps")) {
      std::printf("restart: note: optim.decay_steps = 0 follows train.steps, which changed from %s to %lld: the "
                  "learning-rate schedule differs from the checkpointed run's from here on\n",
                  saved_steps.c_str(), static_cast<long long>(setup.config.train.steps));
    }
  }
  const auto load_start = std::chrono::steady_clock::now();
  const int64_t start_step = trainer.load_checkpoint(restart);
  if (leader) {
    std::printf("restart: resuming from %s after step %lld (read in %.2f s)\n", restart.c_str(),
                static_cast<long long>(start_step),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());
  }
  startup.phase_done("checkpoint read");
  return start_step;
}

// Everything after the deck: the dataset, the device and groups, the model, the restart, the
// steps and the final files, made into `run`. Its errors may be one rank's alone (train_command
// runs it inside end_job_on_rank_error).
void train_from_deck(const RunSetup& setup, parallel::MpiComm& world, StartupClock& startup, RunObjects& run) {
  const auto& c = setup.config;
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
  const RunDevice run_device = make_device_backend(c, ctx, world, run);
  const DeviceChoice& device = run_device.choice;
  const parallel::CommTransport transport = run_device.transport;
  startup.phase_done("device and groups");
  const kernels::Precision precision = kernels::parse_precision(c.train.precision);
  kernels::Backend& compute = stack_kernels(precision, ctx.world_rank(), c.run.profile, run);

  const RunKernels run_kernels{.device = backend.get(),
                               .compute = &compute,
                               .device_choice = device,
                               .transport = transport,
                               .flash_too_large = run_device.flash_too_large,
                               .profiled = run.timing != nullptr};
  print_run_banner(setup, ctx, run_kernels, info);

  const double peak = peak_flops_per_rank(c, *backend, precision, world, startup);

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
  if (run.timing) trainer.profile_kernels(*run.timing);
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
  const int64_t start_step = restart_or_initialize(restart, setup, trainer, leader, startup);
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
  print_memory_use(estimate, resident_before, run_kernels, ctx, world);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (leader) print_done(c, start_step, seconds, summary, info.entropy_rate_nats);
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
  write_complete_marker(c.run.dir, steps_reached, world);
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
