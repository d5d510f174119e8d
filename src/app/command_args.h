// The arguments of `trident train|check DECK [--section.key=value ...]`: the deck path and the
// overrides, plus command flags (like check's --ranks) taken out by name.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace trident::app {

struct CommandArgs {
  std::string deck_path;
  std::vector<std::string> overrides;  // passed to io::parse_deck as they are
};

// Removes `--name=VALUE` or `--name VALUE` from args and returns VALUE (UserError when the
// value is missing, or when the option is given twice).
std::optional<std::string> take_flag(std::vector<std::string>& args, const std::string& name);

// Whether `--help` or `-h` is among args; if so, rank 0 of MPI_COMM_WORLD prints `usage` (the
// command then exits 0 on every rank instead of running).
bool print_help_if_asked(const std::vector<std::string>& args, const char* usage);

// The first argument not starting with "--" is the deck; the rest are overrides. UserError
// when no deck is given.
CommandArgs split_command_args(const std::string& command, const std::vector<std::string>& args);

}  // namespace trident::app
