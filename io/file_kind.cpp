#include "io/file_kind.h"

#include <filesystem>
#include <system_error>

namespace trident::io {

std::string special_file_kind(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status) || std::filesystem::is_regular_file(status)) return "";
  if (std::filesystem::is_directory(status)) return "a directory";
  if (std::filesystem::is_fifo(status)) return "a FIFO";
  if (std::filesystem::is_character_file(status)) return "a character device";
  if (std::filesystem::is_block_file(status)) return "a block device";
  if (std::filesystem::is_socket(status)) return "a socket";
  return "not a regular file";
}

}  // namespace trident::io
