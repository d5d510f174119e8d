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
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(status)) throw UserError(where + "cannot read (Is a directory)");
  // Opening a FIFO blocks until a writer comes (prepare hung forever), and a device or a pipe has
  // no size to plan the output by: only regular files (or links to them) are inputs.
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    const char* kind = std::filesystem::is_fifo(status)           ? "a FIFO"
                       : std::filesystem::is_character_file(status) ? "a character device"
                       : std::filesystem::is_block_file(status)     ? "a block device"
                       : std::filesystem::is_socket(status)         ? "a socket"
                                                                    : "not a regular file";
    throw UserError(where + "is " + kind + ", not a regular file: write the data to a file first");
  }
  file.open(path, std::ios::binary);
  if (!file) throw UserError(where + "cannot open (" + std::strerror(errno) + ")");
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw UserError(where + "cannot read its size (" + ec.message() + ")");
  return static_cast<int64_t>(size);
}

}  // namespace trident::io
