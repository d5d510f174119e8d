// Whether a path the deck names exists, with a reason a person can act on when that cannot be told.
#pragma once

#include <string>

namespace trident::io {

// What look_up_path found: `problem` is "" when `exists` could be told.
struct PathLookup {
  bool exists = false;
  std::string problem;
};

// Whether `path` exists (a link to nothing does not), as std::filesystem::exists, but an error in
// finding out (a directory on the way that cannot be searched, a loop of links, a name too long)
// is returned as "KEY 'PATH': cannot look it up (REASON)". std::filesystem::exists throws those,
// and checks that rank 0 makes alone then ended the job as an internal error.
PathLookup look_up_path(const std::string& key, const std::string& path);

// Why directory `dir` could not be created or used as one ("" when it exists as one or could be
// made): it, or the nearest of its parents that exists, is not a directory. "KEY 'DIR': cannot be
// created: 'PATH' is a file, not a directory". trident check and train refuse with the same line.
std::string uncreatable_directory(const std::string& key, const std::string& dir);

}  // namespace trident::io
