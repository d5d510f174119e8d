// What a path names when it is there but is not a regular file. Opening a FIFO blocks until a
// writer comes (check, train and prepare hung forever on one), and a device or a socket is no
// file to read a dataset from or to write one into: such paths are refused, naming the kind.
#pragma once

#include <string>

namespace trident::io {

// "a directory", "a FIFO", "a character device", "a block device", "a socket" or "not a regular
// file" where `path` (followed through links) is one; "" for a regular file, and for a path that
// does not exist or cannot be looked up (the caller's open then says why).
std::string special_file_kind(const std::string& path);

}  // namespace trident::io
