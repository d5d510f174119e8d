// Opening a raw input of `prepare` (a text file, an array of tokens) with the checks both need.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace trident::io {

// Opens `path` for binary reading into `file` and returns its size in bytes. UserError
// "input 'PATH': ..." for a directory, a file that cannot be opened (with the system's reason)
// or whose size cannot be read.
int64_t open_input_file(const std::string& path, std::ifstream& file);

}  // namespace trident::io
