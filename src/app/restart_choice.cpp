#include "src/app/restart_choice.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <vector>

#include "io/param_file.h"
#include "io/user_error.h"
#include "src/train/checkpoint_files.h"

namespace trident::app {

namespace {

// Rank 0's listing of DIR: checkpoints newest first, one per line.
std::string list_newest_first(const std::string& dir) {
  const std::vector<std::string> names = train::list_checkpoint_files(dir);
  std::string joined;
  for (auto it = names.rbegin(); it != names.rend(); ++it) joined += *it + "\n";
  return joined;
}

// Verifies `path` collectively; prints the time on rank 0. Returns "" or the reason.
std::string verify(const std::string& path, parallel::Comm& world, MPI_Comm comm) {
  const auto start = std::chrono::steady_clock::now();
  const std::string reason = io::verify_param_file(path, comm);
  if (reason.empty() && world.rank() == 0) {
    std::printf("restart: %s verified (checksums of every tensor) in %.2f s\n", path.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    std::fflush(stdout);
  }
  return reason;
}

// Why `path`, a readable parameter file, cannot be restarted from ("" when it is a checkpoint):
// final-params.h5 and exports hold the model's weights only, without the optimizer's moments and
// the data position. A file that cannot be read is left to the verification, which says why.
std::string not_a_checkpoint(const std::string& path) {
  try {
    if (io::read_param_file_int_attributes(path).count("samples") != 0) return "";  // written by checkpoints only
    const bool exported = io::read_param_file_string_attribute(path, "source").has_value();
    return exported ? "an export of a checkpoint (trident export)" : "a parameter file such as final-params.h5";
  } catch (const io::UserError&) {
    return "";
  }
}

// The step of a checkpoint file name ("step-000000030.h5" -> 30).
int64_t step_of(const std::string& name) { return std::stoll(name.substr(name.find('-') + 1)); }

// Rank 0's reason why a run that starts after step `start` (0: a fresh start) may not use
// checkpoint_dir as it is, or "": checkpoints of later steps there belong to another line of
// training. The run would prune its own new checkpoints as the oldest, and a later
// run.restart = auto would resume the other line's newest step.
std::string later_checkpoints(const io::RunConfig& config, const std::string& checkpoint_dir, int64_t start) {
  std::vector<std::string> later;
  for (const std::string& name : train::list_checkpoint_files(checkpoint_dir)) {
    if (step_of(name) > start) later.push_back(name);
  }
  if (later.empty()) return "";
  const std::string what = std::to_string(later.size()) + " checkpoint(s) " +
                           (start == 0 ? std::string("of an earlier run") : "of later steps") + " (the newest: " +
                           later.back() + ")";
  if (start == 0) {
    return "run.restart = none, but checkpoint.dir '" + checkpoint_dir + "' holds " + what +
           ": a fresh run would mix its checkpoints with them; give another run.dir (or checkpoint.dir), or remove "
           "them";
  }
  return "run.restart = '" + config.run.restart + "' resumes after step " + std::to_string(start) +
         ", but checkpoint.dir '" + checkpoint_dir + "' holds " + what +
         ": run.restart = auto would later resume those, not this run; move them out of it, or train in another "
         "run.dir";
}

}  // namespace

std::string choose_restart(const io::RunConfig& config, const std::string& checkpoint_dir, parallel::Comm& world,
                           MPI_Comm comm) {
  const std::string& restart = config.run.restart;
  if (restart == "none") {
    const std::string error =
        parallel::agree_on_error(world, world.rank() == 0 ? later_checkpoints(config, checkpoint_dir, 0) : "");
    if (!error.empty()) throw io::UserError(error);
    return "";
  }
  if (restart != "auto") {
    std::string error;
    if (world.rank() == 0) {
      std::string kind;
      if (!std::filesystem::exists(restart)) {
        error = "run.restart = '" + restart + "': no such checkpoint file";
      } else if (std::filesystem::is_directory(restart)) {
        const std::vector<std::string> inside = train::list_checkpoint_files(restart);
        error = "run.restart = '" + restart + "' is a directory: give a checkpoint file" +
                (inside.empty() ? std::string(" (it holds none)")
                                : " in it (the newest: " + restart + "/" + inside.back() + ")") +
                ", or run.restart = auto to resume from the newest in checkpoint.dir";
      } else if (kind = not_a_checkpoint(restart); !kind.empty()) {
        error = "run.restart = '" + restart + "' is not a checkpoint but " + kind +
                ": the model's weights without the optimizer state and data position a restart needs (give a "
                "step-N.h5 file of checkpoint.dir)";
      }
    }
    error = parallel::agree_on_error(world, error);
    if (!error.empty()) throw io::UserError(error);
    const std::string reason = verify(restart, world, comm);
    if (!reason.empty()) throw io::UserError("run.restart = '" + restart + "' cannot be used: " + reason);
    if (world.rank() == 0) {
      const auto attributes = io::read_param_file_int_attributes(restart);
      const auto step = attributes.find("step");
      if (step != attributes.end()) error = later_checkpoints(config, checkpoint_dir, step->second);
    }
    error = parallel::agree_on_error(world, error);
    if (!error.empty()) throw io::UserError(error);
    return restart;
  }

  int set_aside =
      world.rank() == 0 ? static_cast<int>(train::list_set_aside_files(checkpoint_dir).size()) : 0;
  std::string listing = world.rank() == 0 ? list_newest_first(checkpoint_dir) : "";
  listing = parallel::broadcast_string(world, listing, 0);
  std::istringstream names(listing);
  std::string name, newest_reason;
  int failed = 0;
  while (std::getline(names, name)) {
    const std::string path = checkpoint_dir + "/" + name;
    const std::string reason = verify(path, world, comm);
    if (reason.empty()) return path;
    ++failed;
    if (newest_reason.empty()) newest_reason = reason;
    if (world.rank() == 0) {
      std::error_code ec;
      const std::string aside = train::set_aside_name(checkpoint_dir, name);
      std::filesystem::rename(path, checkpoint_dir + "/" + aside, ec);
      std::printf("restart: skipping %s: %s; %s\n", path.c_str(), reason.c_str(),
                  ec ? ("could not set it aside (" + ec.message() + ")").c_str()
                     : ("set aside as " + aside + "; trying the previous checkpoint").c_str());
      std::fflush(stdout);
    }
  }
  world.broadcast(&set_aside, sizeof set_aside, 0);
  if (failed > 0 || set_aside > 0) {
    throw io::UserError("run.restart = auto: no checkpoint in " + checkpoint_dir + " verifies (" +
                        std::to_string(failed + set_aside) + " set aside as *.bad" +
                        (newest_reason.empty() ? "" : "; the newest: " + newest_reason) +
                        "); give one with run.restart = PATH, or start afresh with run.restart = none");
  }
  // No checkpoint at all: a fresh start, unless run.dir holds a finished run (checkpoint.every = 0
  // writes none) whose metrics and final parameters it would overwrite.
  std::string finished;
  const std::string marker = config.run.dir + "/complete";
  if (world.rank() == 0 && std::filesystem::exists(marker)) {
    finished = "run.dir '" + config.run.dir + "' holds a finished run (" + marker +
               ") and no checkpoint to resume: training would overwrite its metrics.jsonl and final-params.h5; give "
               "another run.dir, or run.restart = none to train it again from step 0";
  }
  finished = parallel::agree_on_error(world, finished);
  if (!finished.empty()) throw io::UserError(finished);
  return "";
}

}  // namespace trident::app
