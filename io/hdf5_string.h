// Reading an HDF5 string attribute whatever wrote it: fixed- or variable-length, ASCII or UTF-8
// (h5py writes `f.attrs["x"] = "text"` as a variable-length UTF-8 string; HDF5 converts
// between strings only when the memory type has the file's character set).
#pragma once

#include <hdf5.h>

#include <optional>
#include <string>

namespace trident::io {

// The value of `attribute`, whose type `file_type` is of class H5T_STRING; empty when an HDF5
// call failed (hdf5_error_detail() then says why).
std::optional<std::string> read_hdf5_string(hid_t attribute, hid_t file_type);

}  // namespace trident::io
