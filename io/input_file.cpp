#include "io/input_file.h"

#include <cerrno>
#include <cstring>     // std::strerror
#include <filesystem>
#include <system_error>

#include "io/file_kind.h"
#include "io/user_error.h"

namespace trident::io {

int64_t open_input_file(const std::string& path, std::ifstream& file) {
  const std::string where = "input '" + path + "': ";
  // An ifstream opens a directory without complaint and fails only at the first read; a FIFO
  // blocks, and a device or a pipe has no size to plan the output by: only regular files (or
  // links to them) are inputs.
  const std::string kind = special_file_kind(path);
  if (kind == "a directory") throw UserError(where + "cannot read (Is a directory)");
  if (!kind.empty()) throw UserError(where + "is " + kind + ", not a regular file: write the data to a file first");
  std::error_code ec;
  file.open(path, std::ios::binary);
  if (!file) throw UserError(where + "cannot open (" + std::strerror(errno) + ")");
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw UserError(where + "cannot read its size (" + ec.message() + ")");
  return static_cast<int64_t>(size);
}

}  // namespace trident::io
