// The subcommands of the trident executable. Each is called on every rank after MPI_Init,
// returns the process exit status, and throws io::UserError (collectively) for user mistakes.
#pragma once

#include <string>
#include <vector>

namespace trident::app {

int train_command(const std::vector<std::string>& args);
int check_command(const std::vector<std::string>& args);
int prepare_command(const std::vector<std::string>& args);
int export_command(const std::vector<std::string>& args);

}  // namespace trident::app
