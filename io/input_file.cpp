#include "io/input_file.h"

#include <cerrno>
#include <cstring>     // std::strerror
#include <filesystem>
#include <system_error>

#include "io/user_error.h"

namespace trident::io {

int64_t open_input_file(const std::string& path, std::ifstream& file) {
  const std::string where = "input '" + path + "': ";
  std::error_code ec;
  // An ifstream opens a directory without complaint and fails only at the first read.
  if (std::filesystem::is_directory(path, ec)) throw UserError(where + "cannot read (Is a directory)");
  file.open(path, std::ios::binary);
  if (!file) throw UserError(where + "cannot open (" + std::strerror(errno) + ")");
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw UserError(where + "cannot read its size (" + ec.message() + ")");
  return static_cast<int64_t>(size);
}

}  // namespace trident::io
