// Making and opening the run's dataset, with failures agreed by every rank.
#pragma once

#include <memory>

#include "io/token_dataset.h"
#include "parallel/comm.h"
#include "src/app/run_setup.h"

namespace trident::app {

// When data.path is missing and data.generate = synthetic, rank 0 of `world` writes it (and
// says so); then every rank opens the file collectively. Any failure on any rank becomes the
// same UserError on every rank.
std::unique_ptr<io::TokenDataset> open_run_dataset(const RunSetup& setup, parallel::Comm& world, MPI_Comm mpi_world);

}  // namespace trident::app
