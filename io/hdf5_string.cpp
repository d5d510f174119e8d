#include "io/hdf5_string.h"

#include <vector>

#include "io/hdf5_handle.h"

namespace trident::io {

std::optional<std::string> read_hdf5_string(hid_t attribute, hid_t file_type) {
  const htri_t variable = H5Tis_variable_str(file_type);
  const H5T_cset_t cset = H5Tget_cset(file_type);
  if (variable < 0 || cset < 0) return std::nullopt;
  const Handle memory_type(H5Tcopy(H5T_C_S1), H5Tclose);
  if (memory_type.get() < 0 || H5Tset_cset(memory_type.get(), cset) < 0) return std::nullopt;
  if (variable > 0) {
    if (H5Tset_size(memory_type.get(), H5T_VARIABLE) < 0) return std::nullopt;
    char* text = nullptr;
    if (H5Aread(attribute, memory_type.get(), &text) < 0) return std::nullopt;
    std::string value = text != nullptr ? text : "";
    H5free_memory(text);
    return value;
  }
  const size_t size = H5Tget_size(file_type);
  if (size == 0 || H5Tset_size(memory_type.get(), size + 1) < 0 ||
      H5Tset_strpad(memory_type.get(), H5T_STR_NULLTERM) < 0) {
    return std::nullopt;
  }
  std::vector<char> buffer(size + 1, '\0');
  if (H5Aread(attribute, memory_type.get(), buffer.data()) < 0) return std::nullopt;
  return std::string(buffer.data());
}

std::optional<std::string> read_root_string_attribute(const std::string& path, const char* name) {
  const QuietHdf5Errors quiet;
  const Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (file.get() < 0 || H5Aexists(file.get(), name) <= 0) return std::nullopt;
  const Handle attribute(H5Aopen(file.get(), name, H5P_DEFAULT), H5Aclose);
  if (attribute.get() < 0) return std::nullopt;
  const Handle type(H5Aget_type(attribute.get()), H5Tclose);
  if (type.get() < 0 || H5Tget_class(type.get()) != H5T_STRING) return std::nullopt;
  return read_hdf5_string(attribute.get(), type.get());
}

}  // namespace trident::io
