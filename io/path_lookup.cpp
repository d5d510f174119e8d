#include "io/path_lookup.h"

#include <filesystem>
#include <system_error>

namespace trident::io {

PathLookup look_up_path(const std::string& key, const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  // "Not found" (ENOENT, and ENOTDIR: a file where a directory should be) is an answer, not an error.
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory) {
    return {false, key + " '" + path + "': cannot look it up (" + ec.message() + ")"};
  }
  return {std::filesystem::exists(status), ""};
}

std::string uncreatable_directory(const std::string& key, const std::string& dir) {
  if (dir.empty()) return "";
  std::error_code ec;
  for (std::filesystem::path at = dir; !at.empty(); at = at.parent_path()) {
    if (!std::filesystem::exists(at, ec)) {
      if (at == at.parent_path()) break;
      continue;
    }
    if (std::filesystem::is_directory(at, ec)) return "";
    return key + " '" + dir + "': cannot be created: '" + at.string() + "' is a file, not a directory";
  }
  return "";
}

}  // namespace trident::io
