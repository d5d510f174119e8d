#include "src/app/restart_choice.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <vector>

#include "io/param_file.h"
#include "io/user_error.h"

namespace trident::app {

namespace {

bool is_checkpoint_name(const std::string& file, const std::string& suffix) {
  return file.rfind("step-", 0) == 0 && file.size() > suffix.size() &&
         file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Rank 0's listing of DIR: checkpoints newest first (zero-padded names sort by step), and how
// many were set aside earlier.
std::string list_checkpoints(const std::string& dir, int& set_aside) {
  std::vector<std::string> names;
  std::error_code ec;
  set_aside = 0;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    if (is_checkpoint_name(file, ".h5")) names.push_back(file);
    if (is_checkpoint_name(file, ".h5.bad")) ++set_aside;
  }
  std::sort(names.rbegin(), names.rend());
  std::string joined;
  for (const std::string& name : names) joined += name + "\n";
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

}  // namespace

std::string choose_restart(const io::RunConfig& config, const std::string& checkpoint_dir, parallel::Comm& world,
                           MPI_Comm comm) {
  const std::string& restart = config.run.restart;
  if (restart == "none") return "";
  if (restart != "auto") {
    std::string error;
    if (world.rank() == 0 && !std::filesystem::exists(restart)) {
      error = "run.restart = '" + restart + "': no such checkpoint file";
    }
    error = parallel::agree_on_error(world, error);
    if (!error.empty()) throw io::UserError(error);
    const std::string reason = verify(restart, world, comm);
    if (!reason.empty()) throw io::UserError("run.restart = '" + restart + "' cannot be used: " + reason);
    return restart;
  }

  int set_aside = 0;
  std::string listing = world.rank() == 0 ? list_checkpoints(checkpoint_dir, set_aside) : "";
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
      std::filesystem::rename(path, path + ".bad", ec);
      std::printf("restart: skipping %s: %s; %s\n", path.c_str(), reason.c_str(),
                  ec ? ("could not set it aside (" + ec.message() + ")").c_str()
                     : ("set aside as " + name + ".bad; trying the previous checkpoint").c_str());
      std::fflush(stdout);
    }
  }
  int earlier = set_aside;
  world.broadcast(&earlier, sizeof earlier, 0);
  if (failed > 0 || earlier > 0) {
    throw io::UserError("run.restart = auto: no checkpoint in " + checkpoint_dir + " verifies (" +
                        std::to_string(failed + earlier) + " set aside as *.bad" +
                        (newest_reason.empty() ? "" : "; the newest: " + newest_reason) +
                        "); give one with run.restart = PATH, or start afresh with run.restart = none");
  }
  return "";
}

}  // namespace trident::app
