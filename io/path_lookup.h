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

}  // namespace trident::io
