#include "io/hdf5_error.h"

#include <hdf5.h>

#include <cinttypes>  // SCNu64
#include <cstdint>
#include <cstdio>     // std::sscanf

#include "io/user_error.h"

namespace trident::io {

std::string readable_hdf5_error(const std::string& description) {
  // HDF5 1.10 to 1.14 (H5Fsuper.c) word a file shorter than its superblock says alike.
  uint64_t present = 0, base = 0, stored = 0;
  if (std::sscanf(description.c_str(), "truncated file: eof = %" SCNu64 ", sblock->base_addr = %" SCNu64
                                       ", stored_eof = %" SCNu64,
                  &present, &base, &stored) == 3) {
    return "truncated: " + std::to_string(present) + " of its " + std::to_string(stored) +
           " bytes are there (an interrupted copy or transfer?)";
  }
  // The POSIX driver's "file write failed: time = <ctime's line, with its newline>, filename =
  // ..., errno = 28, error message = 'No space left on device', ..." (H5FDsec2.c): the system's
  // reason is what a person can act on.
  const std::string failed = description.substr(0, description.find(':'));
  const std::string marker = "error message = '";
  if (const std::size_t at = description.find(marker);
      (failed == "file write failed" || failed == "file read failed") && at != std::string::npos) {
    const std::size_t begin = at + marker.size();
    return failed + ": " + description.substr(begin, description.find('\'', begin) - begin);
  }
  std::string one_line = description;  // an error is one line
  for (char& c : one_line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return one_line;
}

std::string hdf5_error_detail() {
  std::string detail;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* error, void* out) -> herr_t {
        if (error->desc != nullptr && error->desc[0] != '\0') *static_cast<std::string*>(out) = error->desc;
        return 0;
      },
      &detail);
  return readable_hdf5_error(detail);
}

std::string hdf5_call_failure(const std::string& label, const char* call) {
  const std::string detail = hdf5_error_detail();
  return label + ": HDF5 call " + call + " failed" + (detail.empty() ? "" : " (" + detail + ")");
}

void check_hdf5_status(herr_t status, const char* call, const std::string& label) {
  if (status < 0) throw UserError(hdf5_call_failure(label, call));
}

Handle checked_hdf5_handle(hid_t id, Handle::Closer closer, const char* call, const std::string& label) {
  if (id < 0) throw UserError(hdf5_call_failure(label, call));
  return Handle(id, closer);
}

}  // namespace trident::io
