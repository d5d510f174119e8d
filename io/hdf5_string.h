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

// The root string attribute `name` of the HDF5 file at `path`, opened read-only; empty when the
// file cannot be opened or has no such string attribute (HDF5's error stack kept quiet).
std::optional<std::string> read_root_string_attribute(const std::string& path, const char* name);

}  // namespace trident::io
