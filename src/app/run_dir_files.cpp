#include "src/app/run_dir_files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>  // std::strerror
#include <filesystem>
#include <fstream>
#include <system_error>

#include "io/path_lookup.h"  // uncreatable_directory
#include "io/user_error.h"

namespace trident::app {

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

void write_complete_marker(const std::string& run_dir, int64_t steps_reached, parallel::Comm& world) {
  std::string error;
  if (world.rank() == 0) {
    errno = 0;
    std::ofstream complete(run_dir + "/complete");
    complete << steps_reached << "\n";
    complete.close();
    if (!complete) {
      error = "run.dir '" + run_dir + "': cannot write its 'complete' marker (" + std::strerror(errno) +
              "): the run finished, but job scripts would rerun it; free space and rerun the same command (it has "
              "nothing left to train and writes the marker)";
    }
  }
  error = parallel::agree_on_error(world, error);
  if (!error.empty()) throw io::UserError(error);
}

}  // namespace trident::app
