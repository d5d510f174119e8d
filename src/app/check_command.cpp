// trident check DECK [--ranks N] [--section.key=value ...]: validate a deck and a layout, print
// the resolved configuration, the layout table and the memory per rank, without training.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <stdexcept>

#include "io/deck_schema.h"  // nearest_key
#include "io/path_lookup.h"
#include "io/synthetic_source.h"  // SyntheticSource, train_split_tokens
#include "io/token_dataset.h"
#include "io/user_error.h"
#include "kernels/backend.h"
#include "kernels/cuda_devices.h"  // cuda_compiled, cuda_device_count, cuda_flash_attention_fits
#include "mpi_support/mpi_process.h"  // duplicate, world_size, processor_name
#include "parallel/mpi_comm.h"
#include "src/app/backend_options.h"
#include "src/app/command_args.h"
#include "src/app/commands.h"
#include "src/app/dataset_access.h"  // missing_dataset_problem, stale_synthetic_problem
#include "src/app/run_setup.h"
#include "src/app/memory_estimate.h"
#include "src/app/memory_fit.h"        // host_memory_pool, memory_fit_error
#include "src/app/restart_choice.h"    // describe_restart
#include "src/app/run_dir_lock.h"      // RunDirLock::current_holder
#include "src/app/startup_report.h"
#include "src/train/checkpoint_files.h"  // checkpoint_directory, checkpoint_name_clash
#include "src/train/run_layout.h"

namespace trident::app {

namespace {

constexpr const char* kCheckUsage =
    "usage: trident check DECK [--ranks N] [--get KEY] [--section.key=value ...]\n"
    "\n"
    "Validates the input deck DECK for a job of N ranks (default: this job's) without training,\n"
    "as train would at start-up: every key and value, the layout (dp x tp x pp = N), the batch\n"
    "split, and the dataset if it exists (a missing one is a warning). Prints the resolved deck,\n"
    "the rank layout, the model's size and the memory per rank (also under ZeRO-1 and\n"
    "recomputation). Runs on one process, e.g. on a login node without a GPU (add\n"
    "--run.device=cuda for the GPU's memory figure). Overrides are written as for train:\n"
    "--optim.lr=3e-4 or --train.steps 1000. With --get KEY it prints only KEY's resolved value\n"
    "(for job scripts: trident check DECK \"$@\" --get run.dir).\n"
    "\n"
    "examples:\n"
    "  trident check inputs/gpt2-124m.ini --ranks 8\n"
    "  trident check inputs/gpt2-350m.ini --ranks 16 --parallel.tp=4 --parallel.pp=2\n"
    "  trident check inputs/gpt2-124m.ini --ranks 8 --run.dir=runs/a --get run.dir\n"
    "\n"
    "Deck keys: docs/input-deck.md; layouts: docs/parallelism.md. Exit status: 0 valid (warnings\n"
    "included), 2 a user error, one line naming the key or file.\n";

// The largest per-rank total over the stages for the four combinations of ZeRO-1 and
// recomputation, so a user sees what each option would save before choosing.
// The kernels whose 16-bit families the memory table counts (GptLayout::native_16bit), and a
// line saying which. trident check runs where the deck is written, often a login node without a
// GPU: run.device = cuda (or flash attention, which only CUDA has) counts the CUDA backend's
// kernels anyway; auto counts what this machine would choose, the CPU's widening, an upper
// bound, where it has no GPU.
struct CountedKernels {
  kernels::Native16BitKernels native;
  std::string note;
  bool cuda = false;  // counted for the CUDA backend (also how its groups talk: comm_transport)
  kernels::BackendOptions options;  // the kernels chosen on that backend (run.attention = auto resolved)
};

CountedKernels counted_kernels(const io::RunConfig& c) {
  const bool gpu_here = kernels::cuda_compiled() && kernels::cuda_device_count() > 0;
  const bool cuda = c.run.device == "cuda" || c.run.attention == "flash" || (c.run.device == "auto" && gpu_here);
  // Without a GPU here (a login node) the run's GPU is not known: counted as one the flash kernels
  // fit (compute capability 8.0 and later).
  const bool flash_fits = !gpu_here || kernels::cuda_flash_attention_fits(0);
  const kernels::BackendOptions options =
      backend_options(c, cuda ? kernels::Device::kCuda : kernels::Device::kCpu, flash_fits);
  std::string why = "run.device = " + c.run.device;
  if (c.run.device != "cuda" && c.run.attention == "flash") {
    why += ", run.attention = flash";
  } else if (c.run.device == "auto") {
    why += gpu_here ? " and a GPU here" : " and no GPU here";
  }
  if (cuda) {
    return {kernels::native_16bit_kernels(kernels::Device::kCuda, options),
            "16-bit kernels: memory counted for the CUDA backend (" + why +
                "): 16-bit logits, nothing widened to fp32\n",
            true, options};
  }
  return {kernels::native_16bit_kernels(kernels::Device::kCpu, options),
          "16-bit kernels: memory counted for the CPU backend (" + why +
              "): fp32 logits, every 16-bit operand widened to fp32" +
              (c.run.device == "auto" ? "; an upper bound for a GPU run (--run.device=cuda counts the GPU's)\n"
                                      : std::string("\n")),
          false, options};
}

// The estimate of the rank of the hungriest stage under `config` (src/app/memory_estimate.h).
std::size_t largest_stage_bytes(const io::RunConfig& config, const RunSetup& setup, const parallel::RankGrid& grid,
                                std::size_t attention_scratch, const CountedKernels& counted) {
  const parallel::CommTransport transport = comm_transport(counted.cuda, config.parallel.comm);
  std::size_t largest = 0;
  for (int s = 0; s < grid.pp(); ++s) {
    model::GptLayout layout = train::run_layout(config, setup.stage_layers, 0, s);
    layout.native_16bit = counted.native;
    largest = std::max(largest, estimate_run_memory(config, setup.model, layout, attention_scratch, transport).total());
  }
  return largest;
}

std::string memory_alternatives(const RunSetup& setup, const parallel::RankGrid& grid, std::size_t attention_scratch,
                                const CountedKernels& counted) {
  const auto& t = setup.config.train;
  std::string out = "memory per rank with other options (largest stage):\n";
  for (int zero = 0; zero <= 1; ++zero) {
    for (const char* recompute : {"none", "full"}) {
      io::RunConfig variant = setup.config;
      variant.parallel.zero = zero;
      variant.train.recompute = recompute;
      const std::size_t largest = largest_stage_bytes(variant, setup, grid, attention_scratch, counted);
      char line[128];
      std::snprintf(line, sizeof line, "  parallel.zero = %d, train.recompute = %-4s  %12s%s\n", zero, recompute,
                    format_bytes(static_cast<double>(largest)).c_str(),
                    zero == setup.config.parallel.zero && t.recompute == recompute ? "   (this deck)" : "");
      out += line;
    }
  }
  return out;
}

// What train would refuse on this machine but may accept on another (check often runs on a login
// node): flash attention where run.device = auto finds no GPU, and a rank larger than this
// machine's free memory. Warnings, one line each, so that the deck stays valid for the machine
// it is meant for. Several ranks that each fit get a note of how many share a node of this size,
// as train adds up the ranks of a node and refuses more than fit.
std::string machine_warnings(const io::RunConfig& c, int ranks, std::size_t rank_bytes,
                             const CountedKernels& counted) {
  std::string out;
  const bool gpu_here = kernels::cuda_compiled() && kernels::cuda_device_count() > 0;
  if (c.run.device == "cuda" && !gpu_here) {
    out += "warning: run.device = cuda, and this machine has no GPU (or this build no CUDA): train would stop here "
           "(it trains where a GPU is; the memory above is counted for one)\n";
  }
  if (c.run.attention == "flash" && c.run.device == "auto" && !gpu_here) {
    out += "warning: run.attention = flash needs the CUDA backend, and run.device = auto finds no GPU on this machine: "
           "train would stop here (it trains where a GPU is)\n";
  }
  if (!counted.cuda) {
    const MemoryPool pool = host_memory_pool(mpi_support::processor_name());
    const std::string error = memory_fit_error(rank_bytes, 1, pool, false);
    if (!error.empty()) {
      out += "warning: on this machine even one rank does not fit: " + error + "\n";
    } else if (ranks > 1 && pool.total_bytes > 0 && rank_bytes > 0 &&
               static_cast<double>(rank_bytes) * ranks > static_cast<double>(pool.free_bytes)) {
      const auto fit = static_cast<long long>(pool.free_bytes / rank_bytes);
      out += "note: memory: " + std::to_string(fit) + " of the " + std::to_string(ranks) + " ranks fit in the " +
             format_bytes(static_cast<double>(pool.free_bytes)) + " available on a node like this one (" +
             format_bytes(static_cast<double>(rank_bytes)) + " each, largest stage): on such nodes start at most " +
             std::to_string(fit) + " rank(s) per node, as train refuses more\n";
    }
  }
  return out;
}

}  // namespace

int check_command(const std::vector<std::string>& raw_args) {
  if (print_help_if_asked(raw_args, kCheckUsage)) return 0;
  std::vector<std::string> args = raw_args;
  const int world_size = mpi_support::world_size();
  parallel::MpiComm world(mpi_support::duplicate(MPI_COMM_WORLD), "world");

  int ranks = world_size;
  if (auto value = take_flag(args, "ranks")) {
    try {
      std::size_t used = 0;
      ranks = std::stoi(*value, &used);
      if (used != value->size() || ranks < 1) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw io::UserError("--ranks = '" + *value + "' is not a positive integer");
    }
  }
  const std::optional<std::string> get = take_flag(args, "get");
  const CommandArgs command = split_command_args("check", args);
  const std::string text = read_deck_collectively(world, command.deck_path);
  const RunSetup setup = make_run_setup(text, command.deck_path, command.overrides, ranks);
  if (get) {
    // For job scripts (jobs/slurm-train.sbatch reads run.dir): the resolved value alone.
    try {
      const std::string& value = setup.deck.value(*get);
      if (world.rank() == 0) std::printf("%s\n", value.c_str());
      return 0;
    } catch (const std::out_of_range&) {
      const std::string nearest = io::nearest_key(*get);
      throw io::UserError("--get " + *get + ": no such deck key" +
                          (nearest.empty() ? " (the keys are listed in docs/input-deck.md)" : " (did you mean " + nearest + "?)"));
    }
  }
  if (world.rank() != 0) return 0;  // the rest is reporting: one rank is enough

  const auto& c = setup.config;
  const int64_t seq = c.train.seq_len;
  auto samples = [seq](int64_t tokens) { return tokens > 1 ? (tokens - 1) / seq : int64_t{0}; };
  std::string data_note;
  const io::PathLookup data_lookup = io::look_up_path("data.path", c.data.path);
  if (!data_lookup.problem.empty()) throw io::UserError(data_lookup.problem);
  // First, as train generates the file before it checks anything of it.
  if (!data_lookup.exists && c.data.generate == "synthetic") {
    const std::string parent = std::filesystem::path(c.data.path).parent_path().string();
    if (const std::string problem = io::uncreatable_directory("data.path's directory", parent); !problem.empty()) {
      throw io::UserError(problem);
    }
  }
  if (data_lookup.exists) {
    const io::TokenFileInfo info = io::read_token_file_info(c.data.path);
    if (const std::string stale = stale_synthetic_problem(c, info); !stale.empty()) throw io::UserError(stale);
    const int64_t train_samples = samples(info.train_tokens);
    check_dataset_fits(setup, info.vocab_size, train_samples, samples(info.total_tokens - info.train_tokens),
                       c.data.path);
    data_note = "data: " + c.data.path + ": vocab " + std::to_string(info.vocab_size) + ", " +
                std::to_string(train_samples) + " training samples of " + std::to_string(seq) + " tokens\n";
  } else if (c.data.generate == "synthetic") {
    // The file train would generate, checked as train checks it once made: its parameters (the
    // source's constructor), its vocabulary (the source's and end-of-text) and its splits.
    const auto& d = c.data;
    const io::SyntheticSource source(d.synthetic_vocab, d.synthetic_order, d.synthetic_branching, c.run.seed);
    const int64_t train_tokens = io::train_split_tokens(d.synthetic_tokens, d.val_fraction);
    check_dataset_fits(setup, source.vocab() + 1, samples(train_tokens), samples(d.synthetic_tokens - train_tokens),
                       d.path);
    data_note = "data: " + d.path + " is missing and will be generated (data.generate = synthetic): vocab " +
                std::to_string(source.vocab() + 1) + ", " + std::to_string(samples(train_tokens)) +
                " training samples of " + std::to_string(seq) + " tokens\n";
  } else {
    // The layout and the memory below do not depend on the data: check them anyway (docs/running.md).
    data_note = "warning: " + missing_dataset_problem(c.data.path) + ": the run would stop at start-up\n";
  }
  // The attention workspace the run's kernels will ask for: the GEMM path's (every backend's
  // the same size; the CPU one answers), or the flash kernels' (run.attention = auto: on the
  // backend the memory is counted for).
  const int micro_batch = static_cast<int>(c.train.micro_batch), local_heads = c.model.heads / c.parallel.tp;
  const CountedKernels counted = counted_kernels(c);
  const std::size_t attention_scratch =
      counted.options.attention == kernels::AttentionKernel::kFlash
          ? kernels::flash_attention_scratch_floats(micro_batch, c.train.seq_len, local_heads,
                                                    counted.options.flash_dq)
          : kernels::make_backend(kernels::Device::kCpu, 1)->attention_scratch_size(micro_batch, c.train.seq_len,
                                                                                   local_heads);
  const parallel::RankGrid grid(c.parallel.tp, c.parallel.dp, c.parallel.pp);
  std::printf("%s", startup_report(setup, grid, attention_scratch, counted.native,
                                   comm_transport(counted.cuda, c.parallel.comm)).c_str());
  if (c.train.precision != "fp32") std::printf("%s", counted.note.c_str());
  std::printf("%s", memory_alternatives(setup, grid, attention_scratch, counted).c_str());
  std::printf("%s", data_note.c_str());
  // Directories train would create: one under a file (or a file in a directory's place) is
  // refused as train would refuse it, without creating anything here.
  if (const std::string problem = io::uncreatable_directory("run.dir", c.run.dir); !problem.empty()) {
    throw io::UserError(problem);
  }
  if (c.checkpoint.every > 0) {
    const std::string dir = train::checkpoint_directory(c.run.dir, c.checkpoint.dir);
    if (const std::string problem = io::uncreatable_directory("checkpoint.dir", dir); !problem.empty()) {
      throw io::UserError(problem);
    }
    if (const std::string clash = train::checkpoint_name_clash(dir); !clash.empty()) throw io::UserError(clash);
  }
  std::printf("%s", describe_restart(c, setup.deck, train::checkpoint_directory(c.run.dir, c.checkpoint.dir),
                                     recorded_checkpoint_directory(c.run.dir))
                        .c_str());
  if (const std::string holder = RunDirLock::current_holder(c.run.dir); !holder.empty()) {
    std::printf("warning: run.dir '%s' is in use by another training (%s): train would stop at start-up until "
                "it ends\n",
                c.run.dir.c_str(), holder.c_str());
  }
  std::printf("%s", machine_warnings(c, ranks, largest_stage_bytes(c, setup, grid, attention_scratch, counted), counted).c_str());
  std::printf("check: deck '%s' is valid for %d rank(s)\n", command.deck_path.c_str(), ranks);
  return 0;
}

}  // namespace trident::app
