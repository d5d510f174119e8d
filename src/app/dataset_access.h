// Making and opening the run's dataset, with failures agreed by every rank.
#pragma once

#include <memory>
#include <string>

#include "io/token_dataset.h"
#include "parallel/comm.h"
#include "src/app/run_setup.h"

namespace trident::app {

// What to say of a data.path that does not exist (and data.generate = none): one line, with what
// to do about it.
std::string missing_dataset_problem(const std::string& path);

// With data.generate = synthetic and a synthetic source already at data.path that the deck's
// data.synthetic_* and data.val_fraction would not make (io::synthetic_file_difference): one
// line saying so and what to do; else "". `info` is data.path's (io::read_token_file_info).
std::string stale_synthetic_problem(const io::RunConfig& config, const io::TokenFileInfo& info);

// When data.path is missing and data.generate = synthetic, rank 0 of `world` writes it (and
// says so); a missing one without it is refused with missing_dataset_problem, an existing one
// that differs from the deck with stale_synthetic_problem; then every rank opens the file
// collectively. Any failure on any rank becomes the same UserError on every rank.
std::unique_ptr<io::TokenDataset> open_run_dataset(const RunSetup& setup, parallel::Comm& world, MPI_Comm mpi_world);

}  // namespace trident::app
