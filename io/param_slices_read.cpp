// read_param_slices: every rank reads the hyperslabs of a parameter file it holds, whatever
// layout wrote the file (design.md section 7: tensors are stored by global shape).
#include <hdf5.h>  // parallel build: H5Pset_fapl_mpio

#include <algorithm>
#include <string>

#include "io/collective_error.h"  // agree_or_throw
#include "io/hdf5_handle.h"  // Handle, QuietHdf5Errors
#include "io/param_file.h"

namespace trident::io {

namespace {

// Reads one slice; returns "" or what is wrong (for the collective agreement).
std::string read_slice(hid_t file, const TensorSliceRead& s, hid_t transfer) {
  const Handle dataset(H5Dopen2(file, s.name.c_str(), H5P_DEFAULT), H5Dclose);
  if (dataset.get() < 0) return "tensor '" + s.name + "' is missing";
  const Handle space(H5Dget_space(dataset.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank != static_cast<int>(s.global_shape.size())) return "tensor '" + s.name + "' has another rank";
  std::vector<hsize_t> stored(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), stored.data(), nullptr);
  for (int d = 1; d < rank; ++d) {
    if (static_cast<int64_t>(stored[static_cast<std::size_t>(d)]) != s.global_shape[static_cast<std::size_t>(d)]) {
      return "tensor '" + s.name + "' has another shape";
    }
  }
  // This rank's block in global coordinates, then its overlap with the stored rows.
  std::vector<hsize_t> start(static_cast<std::size_t>(rank), 0), count(static_cast<std::size_t>(rank));
  for (int d = 0; d < rank; ++d) {
    const auto u = static_cast<std::size_t>(d);
    count[u] = static_cast<hsize_t>(d == s.split_axis ? s.slice_extent : s.global_shape[u]);
    if (d == s.split_axis) start[u] = static_cast<hsize_t>(s.slice_begin);
  }
  std::size_t local = 1;
  for (hsize_t c : count) local *= static_cast<std::size_t>(c);
  std::fill(s.data, s.data + local, 0.0f);
  const hsize_t first_row = start[0];
  const hsize_t rows = first_row >= stored[0] ? 0 : std::min(count[0], stored[0] - first_row);
  const Handle memory(H5Screate_simple(rank, count.data(), nullptr), H5Sclose);
  std::vector<hsize_t> file_count = count;
  file_count[0] = rows;
  if (rows == 0) {
    H5Sselect_none(space.get());
    H5Sselect_none(memory.get());
  } else {
    H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, file_count.data(), nullptr);
    std::vector<hsize_t> zero(static_cast<std::size_t>(rank), 0);
    H5Sselect_hyperslab(memory.get(), H5S_SELECT_SET, zero.data(), nullptr, file_count.data(), nullptr);
  }
  if (H5Dread(dataset.get(), H5T_NATIVE_FLOAT, memory.get(), space.get(), transfer, s.data) < 0) {
    return "tensor '" + s.name + "' could not be read";
  }
  return "";
}

}  // namespace

void read_param_slices(const std::string& path, MPI_Comm comm, const std::vector<TensorSliceRead>& slices) {
  const QuietHdf5Errors quiet;
  std::string error;
  const Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_fapl_mpio(access.get(), comm, MPI_INFO_NULL);
  const Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, access.get()), H5Fclose);
  if (file.get() < 0) error = "cannot open it";
  const Handle transfer(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
  H5Pset_dxpl_mpio(transfer.get(), H5FD_MPIO_INDEPENDENT);
  for (const TensorSliceRead& s : slices) {
    if (!error.empty()) break;
    error = read_slice(file.get(), s, transfer.get());
  }
  // A failure on one rank fails every rank with the lowest failing rank's text.
  agree_or_throw(comm, error.empty() ? "" : "checkpoint '" + path + "': " + error);
}

}  // namespace trident::io
