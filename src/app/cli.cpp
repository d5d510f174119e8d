#include "src/app/cli.h"

#include <cstdio>
#include <cstdlib>  // std::_Exit
#include <string>
#include <vector>

#include "io/user_error.h"  // UserError, CollectiveWriteAbandoned
#include "kernels/out_of_memory.h"  // OutOfMemory
#include "mpi_support/mpi_process.h"  // start_mpi, world_rank, finish_mpi
#include "src/app/commands.h"
#include "src/app/rank_error.h"  // end_job_from_rank
#include "src/app/version_text.h"
#include "src/train/training_diverged.h"  // TrainingDiverged

namespace trident::app {

namespace {

constexpr const char* kUsage =
    "usage: trident COMMAND [ARGS]\n"
    "\n"
    "Trains GPT-2 family language models with data, tensor and pipeline parallelism over MPI\n"
    "ranks, on CPU cores or one GPU per rank (run.device). Launch with mpirun/srun: every rank\n"
    "runs the same command.\n"
    "\n"
    "commands:\n"
    "  train DECK [--section.key=value ...]   train as the input deck says (keys may be overridden;\n"
    "                                         train --help)\n"
    "  check DECK [--ranks N] [--section.key=value ...]\n"
    "                                         validate a deck for N ranks (default: this job's), print\n"
    "                                         the resolved deck, the rank layout and memory per rank\n"
    "                                         (check --help)\n"
    "  prepare synthetic|text|tokens --output FILE ...\n"
    "                                         make an HDF5 token dataset: a synthetic source, bytes\n"
    "                                         of text, or GPT-2 tokens from llm.c or nanoGPT\n"
    "                                         (prepare --help)\n"
    "  export CHECKPOINT OUT                  write a checkpoint's model weights (no optimizer state)\n"
    "                                         to OUT, whole tensors, real vocabulary (export --help)\n"
    "  --help                                 this text\n"
    "  --version                              version, commit, MPI, HDF5, BLAS, CUDA\n"
    "\n"
    "examples:\n"
    "  mpirun -np 2 trident train inputs/quickstart.ini\n"
    "  trident check inputs/gpt2-124m.ini --ranks 8\n"
    "  trident prepare text --output data/book.h5 book.txt\n"
    "  trident export run/checkpoints/step-000001000.h5 model.h5\n"
    "\n"
    "Deck keys: docs/input-deck.md. Exit status: 0 success, 2 user error (deck, files, layout),\n"
    "3 training diverged (an inf or NaN gradient; the message names the checkpoint to restart from),\n"
    "4 a rank stalled (run.stall_timeout; rerun to resume), 1 an internal error (docs/running.md).\n";

int dispatch(int rank, const std::vector<std::string>& args) {
  if (args.empty()) {  // a usage error: a job script that lost its arguments must not pass
    if (rank == 0) std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    if (rank == 0) std::printf("%s", kUsage);
    return 0;
  }
  if (args[0] == "--version") {
    if (rank == 0) std::printf("%s", version_text().c_str());
    return 0;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "train") return train_command(rest);
  if (args[0] == "check") return check_command(rest);
  if (args[0] == "prepare") return prepare_command(rest);
  if (args[0] == "export") return export_command(rest);
  throw io::UserError("unknown command '" + args[0] +
                      "' (commands: train, check, prepare, export; see trident --help)");
}

}  // namespace

int run_cli(int argc, char** argv) {
  mpi_support::start_mpi(&argc, &argv);
  const int rank = mpi_support::world_rank();
  const std::vector<std::string> args(argv + 1, argv + argc);
  int status = 0;
  try {
    status = dispatch(rank, args);
  } catch (const io::UserError& e) {
    // What stdout holds goes out first: where stdout and stderr share a file (a Slurm log), the
    // error follows the report it ends instead of landing inside a buffered line of it.
    std::fflush(stdout);
    // User errors are raised identically on every rank (decks are parsed everywhere, file
    // checks are agreed), so every rank gets here and no rank waits for another.
    if (rank == 0) std::fprintf(stderr, "trident: error: %s\n", e.what());
    // A parameter file whose write failed is left open (io/user_error.h): MPI_Finalize would
    // close it, waiting for good on ranks whose HDF5 states differ, or crashing HDF5.
    if (dynamic_cast<const io::CollectiveWriteAbandoned*>(&e) != nullptr) {
      std::fflush(stderr);
      std::_Exit(2);
    }
    status = 2;
  } catch (const train::TrainingDiverged& e) {
    std::fflush(stdout);
    // Agreed over the world before the update (src/train/trainer.cpp): every rank is here.
    if (rank == 0) std::fprintf(stderr, "trident: error: %s\n", e.what());
    status = 3;
  } catch (const kernels::OutOfMemory& e) {
    // One rank short of memory after the check before allocation passed (memory the estimate
    // leaves out, or taken by another process since): the others cannot know, so end the job,
    // saying what ran out rather than calling it an internal error.
    end_job_from_rank(rank, "error", e.what(), 1);
  } catch (const std::exception& e) {
    // Anything else is a fault of one rank that the others cannot know about: end the job.
    end_job_from_rank(rank, "internal error", e.what(), 1);
  }
  std::fflush(stdout);
  mpi_support::finish_mpi();
  return status;
}

}  // namespace trident::app
