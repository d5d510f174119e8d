// Internals shared by the parameter-file writer, readers and verifier (not part of io's API).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "io/hdf5_error.h"   // hdf5_error_detail, for the files that include this one
#include "io/hdf5_handle.h"
#include "io/user_error.h"

namespace trident::io::param_file_detail {

inline constexpr const char* kFormatName = "trident-params";
inline constexpr int64_t kFormatVersion = 2;  // 2: per-tensor checksums

inline std::string file_label(const std::string& path) { return "parameter file '" + path + "'"; }

// io's HDF5 checks (io/hdf5_error.h) with this file kind's label.
inline void check_status(herr_t status, const char* call, const std::string& path) {
  check_hdf5_status(status, call, file_label(path));
}
inline Handle make_handle(hid_t id, Handle::Closer closer, const char* call, const std::string& path) {
  return checked_hdf5_handle(id, closer, call, file_label(path));
}

inline int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

class FormatError : public UserError {
 public:
  FormatError(const std::string& path, const std::string& problem)
      : UserError(file_label(path) + ": not a Trident parameter file (" + problem + ")") {}
};

// A string attribute of `object` (fixed or variable length); FormatError when absent.
std::string read_string_attribute(hid_t object, const char* name, const std::string& path);

// Opens PATH read-only (serially, or with `access` a parallel file-access list) and checks the
// format attribute; UserError naming the file and the reason otherwise.
Handle open_checked(const std::string& path, hid_t access = H5P_DEFAULT);

// A dataset's global shape.
std::vector<int64_t> dataset_shape(hid_t dataset, const std::string& path);

}  // namespace trident::io::param_file_detail
