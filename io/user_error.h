// UserError: something the user can fix (deck, files, layout). main prints its message as one
// line on rank 0 and every rank exits with status 2. Never used for programming errors.
#pragma once

#include <stdexcept>
#include <string>

namespace trident::io {

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

// A UserError agreed by every rank after a collective parallel-HDF5 write failed on some of them
// (an I/O error, a quota met meanwhile): the file's handles are left open, because closing them
// is collective and after such a failure the ranks' HDF5 states differ, so the close waits for
// good (measured with an injected EIO on one of 2 ranks: rank 0 in the metadata cache's barrier,
// rank 1 in the truncation's broadcast). HDF5 would close them in MPI_Finalize (where, after a
// failed write, it crashes even on one process: export's), so main ends the process without it:
// exit status 2 on every rank, the line printed once, no hang.
class CollectiveWriteAbandoned : public UserError {
 public:
  using UserError::UserError;
};

}  // namespace trident::io
