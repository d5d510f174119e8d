#include "src/app/command_args.h"

#include <algorithm>
#include <cstdio>

#include "io/user_error.h"
#include "mpi_support/mpi_process.h"  // world_rank

namespace trident::app {

namespace {

// The first occurrence of --NAME VALUE or --NAME=VALUE, removed from args.
std::optional<std::string> take_one_flag(std::vector<std::string>& args, const std::string& flag) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag) {
      if (i + 1 >= args.size()) throw io::UserError("option " + flag + " needs a value");
      std::string value = args[i + 1];
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i), args.begin() + static_cast<std::ptrdiff_t>(i + 2));
      return value;
    }
    if (args[i].rfind(flag + "=", 0) == 0) {
      std::string value = args[i].substr(flag.size() + 1);
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i));
      return value;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> take_flag(std::vector<std::string>& args, const std::string& name) {
  const std::string flag = "--" + name;
  std::optional<std::string> value = take_one_flag(args, flag);
  // A second one would otherwise reach the deck overrides as "unknown key".
  if (value) {
    if (const auto again = take_one_flag(args, flag)) {
      throw io::UserError("option " + flag + " given twice ('" + *value + "' and '" + *again + "')");
    }
  }
  return value;
}

bool print_help_if_asked(const std::vector<std::string>& args, const char* usage) {
  const bool asked = std::any_of(args.begin(), args.end(), [](const std::string& a) { return a == "--help" || a == "-h"; });
  if (asked && mpi_support::world_rank() == 0) std::printf("%s", usage);
  return asked;
}

CommandArgs split_command_args(const std::string& command, const std::vector<std::string>& args) {
  CommandArgs result;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (result.deck_path.empty() && a.rfind("--", 0) != 0) {
      // A value following "--key" (space-separated override) is not the deck.
      const bool follows_bare_key = i > 0 && args[i - 1].rfind("--", 0) == 0 &&
                                    args[i - 1].find('=') == std::string::npos;
      if (!follows_bare_key) {
        result.deck_path = a;
        continue;
      }
    }
    result.overrides.push_back(a);
  }
  if (result.deck_path.empty()) {
    throw io::UserError("trident " + command + ": no input deck given (usage: trident " + command +
                        " DECK [--section.key=value ...]; trident " + command + " --help has the rest)");
  }
  return result;
}

}  // namespace trident::app
