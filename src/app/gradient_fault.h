// Test hook for tests/mpi/diverged_test.sh, a backend wrapped around the real one (faults of
// files and MPI calls come from preload libraries instead: tests/tools/io_faults.c, mpi_faults.c):
// TRIDENT_TEST_NAN_GRADIENT=R:N makes world rank R write a NaN into the token embedding's
// gradient at its N-th embedding backward (one a micro-batch, on the first pipeline stage), as
// a diverging step or a faulty GPU would leave one on a single rank, before the data-parallel
// sums spread it. TRIDENT_TEST_STALL=R:N (tests/mpi/stall_test.sh) makes rank R hang there
// instead, sleeping until it is killed, as a stuck kernel or a lost collective would leave it:
// the stall watchdog's case (src/train/stall_watchdog.h). TRIDENT_TEST_RANK_ERROR=R:N
// (tests/mpi/rank_error_test.sh) makes rank R throw a user error there, as a read of its share
// of the dataset would (src/app/rank_error.h), or with N = 0 at start-up, when this is called
// (the device chosen, the dataset open, the model not yet made). Unset, nothing is wrapped and nothing changes.
#pragma once

#include <memory>

#include "kernels/backend.h"

namespace trident::app {

// The backend to train on in place of `inner` when a variable names this rank, else null. A
// malformed value is an io::UserError naming the variable.
std::unique_ptr<kernels::Backend> gradient_fault_from_environment(kernels::Backend& inner, int world_rank);

}  // namespace trident::app
