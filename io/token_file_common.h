// Internals shared by the token-file writer and reader (not part of io's API): the format's
// name and limits, and the HDF5 result checks that turn a failure into one UserError line.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>

#include "io/hdf5_error.h"  // check_hdf5_status, checked_hdf5_handle
#include "io/hdf5_handle.h"
#include "io/user_error.h"

namespace trident::io::token_file_detail {

inline constexpr const char* kFormatName = "trident-tokens";
inline constexpr int64_t kFormatVersion = 1;
inline constexpr hsize_t kChunkTokens = hsize_t{1} << 20;  // 1 Mi tokens: 2-4 MiB per chunk
inline constexpr int64_t kMaxUint16Vocab = 65536;

inline std::string file_label(const std::string& path) { return "dataset '" + path + "'"; }

// io's HDF5 checks (io/hdf5_error.h) with this file kind's label.
inline void check_status(herr_t status, const char* call, const std::string& path) {
  check_hdf5_status(status, call, file_label(path));
}
inline Handle make_handle(hid_t id, Handle::Closer closer, const char* call, const std::string& path) {
  return checked_hdf5_handle(id, closer, call, file_label(path));
}

}  // namespace trident::io::token_file_detail
