#include "src/app/restart_choice.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "io/deck.h"
#include "io/param_file.h"
#include "io/path_lookup.h"
#include "io/user_error.h"
#include "src/app/restart_compatibility.h"
#include "src/train/checkpoint_files.h"

namespace trident::app {

namespace {

// Why run.restart = PATH is refused once the file is looked at (train: its verification; check:
// its metadata).
std::string unusable_restart(const std::string& restart, const std::string& reason) {
  return "run.restart = '" + restart + "' cannot be used: " + reason;
}

// Why run.restart = auto stops: `set_aside` checkpoints of checkpoint_dir are set aside as *.bad
// (by this attempt or earlier ones) and none is left that verifies; newest_reason is the newest's.
std::string no_checkpoint_verifies(const std::string& checkpoint_dir, int set_aside, const std::string& newest_reason) {
  return "run.restart = auto: no checkpoint in " + checkpoint_dir + " verifies (" + std::to_string(set_aside) +
         " set aside as *.bad" + (newest_reason.empty() ? "" : "; the newest: " + newest_reason) +
         "); give one with run.restart = PATH, or start afresh with run.restart = none";
}

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
  std::string reason = io::verify_param_file(path, comm);
  // Rank 0 reads it and tells the others: a file it then sets aside must not vanish under
  // another rank's read.
  if (reason.empty()) reason = parallel::broadcast_string(world, world.rank() == 0 ? train::checkpoint_metadata_problem(path) : "", 0);
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

// Rank 0's reason why a run that starts after step `start` (0: a fresh start) may not use
// checkpoint_dir as it is, or "": checkpoints of later steps there belong to another line of
// training. The run would prune its own new checkpoints as the oldest, and a later
// run.restart = auto would resume the other line's newest step.
std::string later_checkpoints(const io::RunConfig& config, const std::string& checkpoint_dir, int64_t start) {
  std::vector<std::string> later;
  for (const std::string& name : train::list_checkpoint_files(checkpoint_dir)) {
    if (train::checkpoint_step_of_name(name) > start) later.push_back(name);
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

// Rank 0's reason why `restart`, a path given as run.restart, cannot be resumed from before its
// checksums are read, or "".
std::string explicit_checkpoint_problem(const std::string& restart) {
  const io::PathLookup lookup = io::look_up_path("run.restart", restart);
  if (!lookup.problem.empty()) return lookup.problem;
  if (!lookup.exists) return "run.restart = '" + restart + "': no such checkpoint file";
  std::error_code ec;
  if (std::filesystem::is_directory(restart, ec)) {
    const std::vector<std::string> inside = train::list_checkpoint_files(restart);
    return "run.restart = '" + restart + "' is a directory: give a checkpoint file" +
           (inside.empty() ? std::string(" (it holds none)") : " in it (the newest: " + restart + "/" + inside.back() + ")") +
           ", or run.restart = auto to resume from the newest in checkpoint.dir";
  }
  if (const std::string kind = not_a_checkpoint(restart); !kind.empty()) {
    return "run.restart = '" + restart + "' is not a checkpoint but " + kind +
           ": the model's weights without the optimizer state and data position a restart needs (give a step-N.h5 "
           "file of checkpoint.dir)";
  }
  return "";
}

// Rank 0's reason not to start afresh where checkpoint_dir holds no checkpoint: run.dir holds a
// finished run (checkpoint.every = 0 writes none), or its last run kept its checkpoints in another
// checkpoint.dir (recorded_dir, from its config.ini), which a changed checkpoint.dir would silently
// leave behind; either way training would overwrite its metrics and final parameters.
std::string earlier_run_problem(const io::RunConfig& config, const std::string& checkpoint_dir,
                                const std::string& recorded_dir) {
  const std::string marker = config.run.dir + "/complete";
  const io::PathLookup lookup = io::look_up_path("run.dir", marker);
  if (!lookup.problem.empty()) return lookup.problem;
  if (lookup.exists) {
    return "run.dir '" + config.run.dir + "' holds a finished run (" + marker +
           ") and no checkpoint to resume: training would overwrite its metrics.jsonl and final-params.h5; give "
           "another run.dir, or run.restart = none to train it again from step 0";
  }
  std::error_code ec;
  if (recorded_dir.empty() || recorded_dir == checkpoint_dir || std::filesystem::equivalent(recorded_dir, checkpoint_dir, ec)) {
    return "";
  }
  const std::vector<std::string> earlier = train::list_checkpoint_files(recorded_dir);
  if (earlier.empty()) return "";
  return "run.dir '" + config.run.dir + "' was last trained with its checkpoints in '" + recorded_dir + "' (" +
         std::to_string(earlier.size()) + " there, the newest: " + earlier.back() + "), but this run's checkpoint.dir '" +
         checkpoint_dir + "' holds none: a fresh start would overwrite its metrics.jsonl and final-params.h5; resume " +
         "with that checkpoint.dir (or run.restart = " + recorded_dir + "/" + earlier.back() +
         "), give another run.dir, or run.restart = none to train it again from step 0";
}

// The step attribute of a checkpoint file (-1 when it has none).
int64_t checkpoint_step(const std::string& path) {
  const auto attributes = io::read_param_file_int_attributes(path);
  const auto step = attributes.find("step");
  return step == attributes.end() ? -1 : step->second;
}

// A checkpoint's saved deck against this run's (check_restart_compatible); the note train prints
// for a changed learning-rate schedule, or "". A checkpoint without one is damaged
// (checkpoint_metadata_problem): a UserError saying so.
std::string check_saved_deck(const std::string& path, const io::ResolvedDeck& deck) {
  const auto saved = io::read_param_file_string_attribute(path, "deck");
  if (!saved) throw io::UserError(train::checkpoint_metadata_problem(path));  // train refuses it, or sets it aside
  const io::ResolvedDeck saved_deck = io::parse_checkpoint_deck(*saved, path);
  check_restart_compatible(saved_deck, deck, path);
  const std::string changes = changed_training_keys(saved_deck, deck);
  return changes.empty() ? "" : "restart: note: " + changes + ": the steps after the checkpoint would train with these\n";
}

}  // namespace

std::string recorded_checkpoint_directory(const std::string& run_dir) {
  std::ifstream in(run_dir + "/config.ini");
  if (!in) return "";
  std::ostringstream text;
  text << in.rdbuf();
  try {
    const io::ResolvedDeck recorded = io::parse_deck(text.str(), run_dir + "/config.ini", {});
    return train::checkpoint_directory(run_dir, recorded.value("checkpoint.dir"));
  } catch (const std::exception&) {
    return "";  // a config.ini of another version, or edited: nothing to compare with
  }
}

std::string describe_restart(const io::RunConfig& config, const io::ResolvedDeck& deck,
                             const std::string& checkpoint_dir, const std::string& recorded_checkpoint_dir) {
  const std::string& restart = config.run.restart;
  auto refuse = [](const std::string& error) {
    if (!error.empty()) throw io::UserError(error);
  };
  if (restart == "none") {
    refuse(later_checkpoints(config, checkpoint_dir, 0));
    return "restart: none: a fresh start\n";
  }
  if (restart != "auto") {
    refuse(explicit_checkpoint_problem(restart));
    // What train's verification would say of it, but for the checksums (not read here).
    if (const std::string problem = train::checkpoint_metadata_problem(restart); !problem.empty()) {
      refuse(unusable_restart(restart, problem));
    }
    const int64_t step = checkpoint_step(restart);
    refuse(later_checkpoints(config, checkpoint_dir, step));
    const std::string note = check_saved_deck(restart, deck);
    return "restart: from " + restart + " after step " + std::to_string(step) +
           " (its checksums are verified at start-up)\n" + note;
  }
  const std::vector<std::string> names = train::list_checkpoint_files(checkpoint_dir);
  const int set_aside = static_cast<int>(train::list_set_aside_files(checkpoint_dir).size());
  if (names.empty()) {
    if (set_aside > 0) refuse(no_checkpoint_verifies(checkpoint_dir, set_aside, ""));
    refuse(earlier_run_problem(config, checkpoint_dir, recorded_checkpoint_dir));
    return "restart: auto: no checkpoint in " + checkpoint_dir + ": a fresh start\n";
  }
  const std::string newest = checkpoint_dir + "/" + names.back();
  // The only checkpoint damaged: train sets it aside and stops.
  if (const std::string problem = train::checkpoint_metadata_problem(newest); !problem.empty() && names.size() == 1) {
    refuse(no_checkpoint_verifies(checkpoint_dir, set_aside + 1, problem));
  }
  try {
    const std::string note = check_saved_deck(newest, deck);
    return "restart: auto: would resume from " + newest + " after step " + std::to_string(checkpoint_step(newest)) +
           " (if its checksums verify at start-up; else the one before it)\n" + note;
  } catch (const io::UserError& e) {
    const std::string what = e.what();
    // The deck differs, or does not read back: train would refuse either, not set the file aside.
    if (what.rfind("run.restart: ", 0) == 0 || what.find("its saved deck does not read back") != std::string::npos) {
      throw;
    }
    return "warning: restart: the newest checkpoint " + newest + " cannot be read (" + e.what() +
           "): train would set it aside and try the one before it\n";
  }
}

std::string choose_restart(const io::RunConfig& config, const std::string& checkpoint_dir,
                           const std::string& recorded_checkpoint_dir, parallel::Comm& world, MPI_Comm comm) {
  const std::string& restart = config.run.restart;
  if (restart == "none") {
    const std::string error =
        parallel::agree_on_error(world, world.rank() == 0 ? later_checkpoints(config, checkpoint_dir, 0) : "");
    if (!error.empty()) throw io::UserError(error);
    return "";
  }
  if (restart != "auto") {
    std::string error = parallel::agree_on_error(world, world.rank() == 0 ? explicit_checkpoint_problem(restart) : "");
    if (!error.empty()) throw io::UserError(error);
    const std::string reason = verify(restart, world, comm);
    if (!reason.empty()) throw io::UserError(unusable_restart(restart, reason));
    if (world.rank() == 0) error = later_checkpoints(config, checkpoint_dir, checkpoint_step(restart));
    error = parallel::agree_on_error(world, error);
    if (!error.empty()) throw io::UserError(error);
    return restart;
  }

  int set_aside =
      world.rank() == 0 ? static_cast<int>(train::list_set_aside_files(checkpoint_dir).size()) : 0;
  std::string listing = world.rank() == 0 ? list_newest_first(checkpoint_dir) : "";
  listing = parallel::broadcast_string(world, listing, 0);
  std::istringstream lines(listing);
  std::vector<std::string> names;
  for (std::string line; std::getline(lines, line);) names.push_back(line);
  std::string newest_reason;
  int failed = 0;
  for (const std::string& name : names) {
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
                     : ("set aside as " + aside + (name == names.back() ? std::string("; no earlier checkpoint")
                                                                         : "; trying the previous checkpoint"))
                           .c_str());
      std::fflush(stdout);
    }
  }
  world.broadcast(&set_aside, sizeof set_aside, 0);
  if (failed > 0 || set_aside > 0) throw io::UserError(no_checkpoint_verifies(checkpoint_dir, failed + set_aside, newest_reason));
  // No checkpoint at all: a fresh start, unless run.dir holds a finished run or its checkpoints
  // elsewhere.
  const std::string earlier = parallel::agree_on_error(
      world, world.rank() == 0 ? earlier_run_problem(config, checkpoint_dir, recorded_checkpoint_dir) : "");
  if (!earlier.empty()) throw io::UserError(earlier);
  return "";
}

}  // namespace trident::app
