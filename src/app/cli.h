// The trident command line: initialises MPI, dispatches to a subcommand, and turns a user
// error into one line on rank 0 and exit status 2 on every rank.
#pragma once

namespace trident::app {

int run_cli(int argc, char** argv);

}  // namespace trident::app
