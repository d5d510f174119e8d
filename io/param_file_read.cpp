// Serial readers of parameter files (io/param_file.h) for tools, tests and the restart checks,
// and the helpers the parallel reader and the verifier share.
#include <hdf5.h>

#include <filesystem>
#include <system_error>

#include "io/file_kind.h"    // special_file_kind
#include "io/hdf5_string.h"  // read_hdf5_string
#include "io/param_file.h"
#include "io/param_file_common.h"

namespace trident::io {

namespace param_file_detail {

std::string read_string_attribute(hid_t object, const char* name, const std::string& path) {
  const htri_t exists = H5Aexists(object, name);
  check_status(exists, "H5Aexists", path);
  if (exists == 0) throw FormatError(path, std::string("no attribute '") + name + "'");
  Handle attribute = make_handle(H5Aopen(object, name, H5P_DEFAULT), H5Aclose, "H5Aopen", path);
  Handle type = make_handle(H5Aget_type(attribute.get()), H5Tclose, "H5Aget_type", path);
  if (H5Tget_class(type.get()) != H5T_STRING) {
    throw FormatError(path, std::string("attribute '") + name + "' is not a string");
  }
  if (const auto value = read_hdf5_string(attribute.get(), type.get())) return *value;
  const std::string reason = hdf5_error_detail();
  throw UserError(file_label(path) + ": attribute '" + name + "' cannot be read" +
                  (reason.empty() ? "" : " (" + reason + ")"));
}

namespace {

// The root's format_version: a scalar integer; FormatError when absent or of another kind.
int64_t read_format_version(hid_t file, const std::string& path) {
  const htri_t exists = H5Aexists(file, "format_version");
  check_status(exists, "H5Aexists", path);
  if (exists == 0) throw FormatError(path, "no attribute 'format_version'");
  Handle attribute = make_handle(H5Aopen(file, "format_version", H5P_DEFAULT), H5Aclose, "H5Aopen", path);
  Handle type = make_handle(H5Aget_type(attribute.get()), H5Tclose, "H5Aget_type", path);
  Handle space = make_handle(H5Aget_space(attribute.get()), H5Sclose, "H5Aget_space", path);
  if (H5Tget_class(type.get()) != H5T_INTEGER || H5Sget_simple_extent_npoints(space.get()) != 1) {
    throw FormatError(path, "attribute 'format_version' is not an integer");
  }
  int64_t version = 0;
  check_status(H5Aread(attribute.get(), H5T_NATIVE_INT64, &version), "H5Aread", path);
  return version;
}

}  // namespace

Handle open_checked(const std::string& path, hid_t access) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    const std::string kind = special_file_kind(path);
    const std::string why = !kind.empty()                                 ? kind + ", not a regular file"
                            : error && error != std::errc::no_such_file_or_directory ? error.message()
                                                                                     : "no such file";
    throw UserError(file_label(path) + ": cannot open (" + why + ")");
  }
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 <= 0) throw UserError(file_label(path) + ": cannot open (not an HDF5 file)");
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, access);
  if (id < 0) {
    const std::string detail = hdf5_error_detail();
    throw UserError(file_label(path) + ": cannot open" + (detail.empty() ? "" : " (" + detail + ")"));
  }
  Handle file(id, H5Fclose);
  const std::string format = read_string_attribute(file.get(), "format", path);
  if (format != kFormatName) {
    throw FormatError(path, "attribute 'format' is '" + format + "', expected '" + kFormatName + "'");
  }
  // A later version may lay out or checksum its tensors otherwise: refused, not read as this one.
  // Version 1 (no checksums) is still read; verification refuses it (param_file_verify.cpp).
  const int64_t version = read_format_version(file.get(), path);
  if (version < 1 || version > kFormatVersion) {
    throw UserError(file_label(path) + ": unsupported format_version " + std::to_string(version) +
                    " (this Trident reads versions 1 to " + std::to_string(kFormatVersion) +
                    (version > kFormatVersion ? "; a newer Trident wrote it)" : ")"));
  }
  return file;
}

std::vector<int64_t> dataset_shape(hid_t dataset, const std::string& path) {
  Handle space = make_handle(H5Dget_space(dataset), H5Sclose, "H5Dget_space", path);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  check_status(rank, "H5Sget_simple_extent_ndims", path);
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0) {
    check_status(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), "H5Sget_simple_extent_dims", path);
  }
  return std::vector<int64_t>(dims.begin(), dims.end());
}

}  // namespace param_file_detail

namespace {

using namespace param_file_detail;

herr_t collect_name(hid_t, const char* name, const H5L_info_t*, void* names) {
  static_cast<std::vector<std::string>*>(names)->emplace_back(name);
  return 0;
}

herr_t collect_attribute_name(hid_t, const char* name, const H5A_info_t*, void* names) {
  static_cast<std::vector<std::string>*>(names)->emplace_back(name);
  return 0;
}

std::vector<std::string> dataset_names(hid_t file, const std::string& path) {
  std::vector<std::string> names;
  check_status(H5Literate(file, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_name, &names), "H5Literate", path);
  return names;
}

Handle open_float_dataset(hid_t file, const std::string& name, const std::string& path) {
  const hid_t id = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  if (id < 0) throw FormatError(path, "'" + name + "' is not a dataset");
  Handle dataset(id, H5Dclose);
  Handle type = make_handle(H5Dget_type(dataset.get()), H5Tclose, "H5Dget_type", path);
  if (H5Tget_class(type.get()) != H5T_FLOAT) throw FormatError(path, "dataset '" + name + "' is not float");
  return dataset;
}

// The root's scalar attributes of one HDF5 class, read as T.
template <class T>
std::map<std::string, T> scalar_attributes(const std::string& path, H5T_class_t wanted, hid_t memory_type) {
  const QuietHdf5Errors quiet;
  Handle file = open_checked(path);
  std::vector<std::string> names;
  check_status(H5Aiterate2(file.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_attribute_name, &names),
               "H5Aiterate2", path);
  std::map<std::string, T> result;
  for (const std::string& name : names) {
    Handle attribute = make_handle(H5Aopen(file.get(), name.c_str(), H5P_DEFAULT), H5Aclose, "H5Aopen", path);
    Handle type = make_handle(H5Aget_type(attribute.get()), H5Tclose, "H5Aget_type", path);
    if (H5Tget_class(type.get()) != wanted) continue;
    Handle space = make_handle(H5Aget_space(attribute.get()), H5Sclose, "H5Aget_space", path);
    if (H5Sget_simple_extent_npoints(space.get()) != 1) continue;
    T value{};
    check_status(H5Aread(attribute.get(), memory_type, &value), "H5Aread", path);
    result.emplace(name, value);
  }
  return result;
}

}  // namespace

std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> read_param_file(const std::string& path) {
  const QuietHdf5Errors quiet;
  Handle file = open_checked(path);
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> result;
  for (const std::string& name : dataset_names(file.get(), path)) {
    Handle dataset = open_float_dataset(file.get(), name, path);
    std::vector<int64_t> shape = dataset_shape(dataset.get(), path);
    std::vector<float> values(static_cast<size_t>(element_count(shape)));
    if (!values.empty()) {
      check_status(H5Dread(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), "H5Dread",
                   path);
    }
    result.emplace(name, std::make_pair(std::move(shape), std::move(values)));
  }
  return result;
}

std::map<std::string, std::vector<int64_t>> list_param_file(const std::string& path) {
  const QuietHdf5Errors quiet;
  Handle file = open_checked(path);
  std::map<std::string, std::vector<int64_t>> result;
  for (const std::string& name : dataset_names(file.get(), path)) {
    Handle dataset = open_float_dataset(file.get(), name, path);
    result.emplace(name, dataset_shape(dataset.get(), path));
  }
  return result;
}

std::map<std::string, int64_t> read_param_file_int_attributes(const std::string& path) {
  return scalar_attributes<int64_t>(path, H5T_INTEGER, H5T_NATIVE_INT64);
}

std::map<std::string, double> read_param_file_double_attributes(const std::string& path) {
  return scalar_attributes<double>(path, H5T_FLOAT, H5T_NATIVE_DOUBLE);
}

std::optional<std::string> read_param_file_string_attribute(const std::string& path, const std::string& name) {
  const QuietHdf5Errors quiet;
  Handle file = open_checked(path);
  const htri_t exists = H5Aexists(file.get(), name.c_str());
  check_status(exists, "H5Aexists", path);
  if (exists == 0) return std::nullopt;
  return read_string_attribute(file.get(), name.c_str(), path);
}

}  // namespace trident::io
