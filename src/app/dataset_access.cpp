#include "src/app/dataset_access.h"

#include <cstdio>
#include <filesystem>

#include "io/path_lookup.h"
#include "io/synthetic_source.h"
#include "io/user_error.h"

namespace trident::app {

std::string missing_dataset_problem(const std::string& path) {
  return "data.path '" + path + "': no such file (make one with `trident prepare`, or set data.generate = synthetic)";
}

std::string stale_synthetic_problem(const io::RunConfig& config, const io::TokenFileInfo& info) {
  const auto& d = config.data;
  if (d.generate != "synthetic") return "";
  if (info.tokenizer != "synthetic") return "";  // a prepared dataset: generate applies to a missing one only
  const std::string difference = io::synthetic_file_difference(info, d.synthetic_vocab, d.synthetic_order,
                                                               d.synthetic_branching, d.synthetic_tokens, d.val_fraction);
  if (difference.empty()) return "";
  return "data.path '" + d.path + "' holds a synthetic source made with other settings (" + difference +
         "): data.generate = synthetic makes the file only where it is missing; delete it to make it anew, or set "
         "data.path to another file";
}

std::unique_ptr<io::TokenDataset> open_run_dataset(const RunSetup& setup, parallel::Comm& world, MPI_Comm mpi_world) {
  const auto& d = setup.config.data;
  // Rank 0 looks (an exception here, of rank 0 alone, would leave the others in the agreement).
  const io::PathLookup lookup = world.rank() == 0 ? io::look_up_path("data.path", d.path) : io::PathLookup{};
  std::string error = lookup.problem;
  if (error.empty() && world.rank() == 0 && d.generate == "synthetic" && !lookup.exists) {
    // A file in the way of its directory: trident check's line.
    error = io::uncreatable_directory("data.path's directory", std::filesystem::path(d.path).parent_path().string());
  }
  if (error.empty() && world.rank() == 0 && d.generate == "synthetic" && !lookup.exists) {
    try {
      std::printf("data: %s is missing; generating the synthetic source (data.generate = synthetic)\n",
                  d.path.c_str());
      std::fflush(stdout);
      io::make_synthetic_file(d.path, d.synthetic_vocab, d.synthetic_order, d.synthetic_branching,
                              d.synthetic_tokens, d.val_fraction, setup.config.run.seed);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (error.empty() && world.rank() == 0 && !io::look_up_path("data.path", d.path).exists) {  // after generating
    error = missing_dataset_problem(d.path);
  }
  if (error.empty() && world.rank() == 0) {
    try {
      if (d.generate == "synthetic") error = stale_synthetic_problem(setup.config, io::read_token_file_info(d.path));
    } catch (const std::exception&) {  // an unreadable file: the collective open below says why
    }
  }
  error = parallel::agree_on_error(world, error);
  if (!error.empty()) throw io::UserError(error);

  std::unique_ptr<io::TokenDataset> dataset;
  try {
    dataset = std::make_unique<io::TokenDataset>(d.path, mpi_world);
  } catch (const std::exception& e) {
    error = e.what();
  }
  error = parallel::agree_on_error(world, error);
  if (!error.empty()) throw io::UserError(error);
  return dataset;
}

}  // namespace trident::app
