// RunObjects: what a training run is made of, owned outside its error handling.
#pragma once

#include <memory>

#include "io/token_dataset.h"
#include "kernels/backend.h"
#include "kernels/rounded_storage_backend.h"
#include "kernels/timing_backend.h"
#include "parallel/host_staged_comm.h"  // BackendMemory
#include "parallel/parallel_context.h"
#include "src/app/run_dir_lock.h"
#include "src/train/stall_watchdog.h"
#include "src/train/trainer.h"

namespace trident::app {

// The objects of a run that train_from_deck makes, owned by train_command outside
// end_job_on_rank_error, so that a rank's error is handled (rank_error.h) while they are alive.
// Some of their destructors are collective or wait for peers (the dataset's parallel HDF5 close, a
// pending reduction's request in the trainer, an NCCL stream): run while a failing rank unwinds,
// they would block it while the others wait in their next collective. Members go in the reverse
// order of declaration, so the order here is chosen for that, not for their making (the backend
// is made after the groups, which choose the device): the groups go before the backend whose
// memory and stream they use.
struct RunObjects {
  std::unique_ptr<io::TokenDataset> dataset;
  RunDirLock run_dir_lock;
  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<parallel::BackendMemory> backend_memory;
  std::unique_ptr<parallel::ParallelContext> ctx;
  std::unique_ptr<train::StallWatchdog> watchdog;
  std::unique_ptr<kernels::Backend> fault;
  std::unique_ptr<kernels::TimingBackend> timing;
  std::unique_ptr<kernels::RoundedStorageBackend> rounded;
  std::unique_ptr<train::Trainer> trainer;
};

}  // namespace trident::app
