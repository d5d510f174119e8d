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
  return description;
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
