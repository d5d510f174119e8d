// read_param_slices: every rank reads the hyperslabs of a parameter file it holds, whatever
// layout wrote the file (design.md section 7: tensors are stored by global shape).
#include <hdf5.h>  // parallel build: H5Pset_fapl_mpio

#include <algorithm>
#include <string>
#include <vector>

#include "io/collective_error.h"  // agree_or_throw
#include "io/param_file.h"
#include "io/param_file_common.h"
#include "io/tensor_boxes.h"

namespace trident::io {

namespace {

using namespace param_file_detail;

// "[64, 64]"
std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
  return text + "]";
}

// Reads one piece (a box of the global tensor, stored rows `stored_rows` on axis 0) into `out`
// (its row-major order): the rows the file has, zeros beyond.
bool read_piece(hid_t dataset, const Box& piece, int64_t stored_rows, hid_t transfer, float* out) {
  const int64_t rows = std::clamp<int64_t>(stored_rows - piece.start[0], 0, piece.count[0]);
  // Rows beyond the stored ones (a vocabulary padded for another tp) read as zeros.
  const int64_t row_volume = piece.count[0] == 0 ? 0 : piece.volume() / piece.count[0];
  std::fill(out + rows * row_volume, out + piece.volume(), 0.0f);
  if (rows == 0) return true;
  const int rank = static_cast<int>(piece.start.size());
  const std::vector<hsize_t> count(piece.count.begin(), piece.count.end());
  std::vector<hsize_t> file_count = count, start(piece.start.begin(), piece.start.end());
  file_count[0] = static_cast<hsize_t>(rows);
  const Handle space(H5Dget_space(dataset), H5Sclose);
  const Handle memory(H5Screate_simple(rank, count.data(), nullptr), H5Sclose);
  const std::vector<hsize_t> zero(static_cast<size_t>(rank), 0);
  if (H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, file_count.data(), nullptr) < 0 ||
      H5Sselect_hyperslab(memory.get(), H5S_SELECT_SET, zero.data(), nullptr, file_count.data(), nullptr) < 0) {
    return false;
  }
  return H5Dread(dataset, H5T_NATIVE_FLOAT, memory.get(), space.get(), transfer, out) >= 0;
}

// Reads one slice; returns "" or what is wrong (for the collective agreement).
std::string read_slice(hid_t file, const TensorSliceRead& s, hid_t transfer, int64_t max_elements) {
  const Handle dataset(H5Dopen2(file, s.name.c_str(), H5P_DEFAULT), H5Dclose);
  if (dataset.get() < 0) return "tensor '" + s.name + "' is missing";
  const Handle space(H5Dget_space(dataset.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) return "tensor '" + s.name + "': its shape cannot be read";
  std::vector<hsize_t> stored(static_cast<std::size_t>(rank));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), stored.data(), nullptr);
  if (std::string problem = stored_shape_problem(s, std::vector<int64_t>(stored.begin(), stored.end()));
      !problem.empty()) {
    return problem;
  }
  if (rank == 0) {  // a scalar: nothing to clip or split
    return H5Dread(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, transfer, s.data) >= 0
               ? ""
               : "tensor '" + s.name + "' could not be read";
  }
  std::vector<int64_t> local = s.global_shape;
  if (s.split_axis >= 0) local[static_cast<std::size_t>(s.split_axis)] = s.slice_extent;
  int64_t volume = 1;
  for (const int64_t d : local) volume *= d;
  const int64_t count = s.read_count < 0 ? volume - s.read_begin : s.read_count;
  if (s.read_begin < 0 || count < 0 || s.read_begin + count > volume) {
    return "tensor '" + s.name + "': read range outside the slice";
  }
  std::vector<Box> boxes = flat_range_boxes(local, s.read_begin, count);
  shift_to_global(boxes, s.split_axis, s.slice_begin);
  float* out = s.data;
  for (const Box& piece : split_boxes(boxes, max_elements)) {
    if (!read_piece(dataset.get(), piece, static_cast<int64_t>(stored[0]), transfer, out)) {
      const std::string detail = hdf5_error_detail();
      return "tensor '" + s.name + "' could not be read" + (detail.empty() ? "" : " (" + detail + ")");
    }
    out += piece.volume();
  }
  return "";
}

}  // namespace

std::string stored_shape_problem(const TensorSliceRead& s, const std::vector<int64_t>& stored) {
  // The stored shape must be the model's, up to padding rows of a vocabulary (rows_required).
  bool fits = stored.size() == s.global_shape.size();
  for (std::size_t d = 0; fits && d < stored.size(); ++d) {
    fits = d == 0 && s.rows_required >= 0 ? stored[d] >= s.rows_required : stored[d] == s.global_shape[d];
  }
  if (fits) return "";
  return "tensor '" + s.name + "' has shape " + shape_text(stored) + " in the file, where the model's is " +
         shape_text(s.global_shape) +
         (s.rows_required >= 0 ? " (at least " + std::to_string(s.rows_required) + " rows)" : "") +
         ": a file of another model";
}

void read_param_slices(const std::string& path, MPI_Comm comm, const std::vector<TensorSliceRead>& slices,
                       int64_t max_bytes_per_call) {
  const QuietHdf5Errors quiet;
  const int64_t max_elements = std::max<int64_t>(1, max_bytes_per_call / static_cast<int64_t>(sizeof(float)));
  std::string error;
  const Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_fapl_mpio(access.get(), comm, MPI_INFO_NULL);
  const Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, access.get()), H5Fclose);
  if (file.get() < 0) {
    const std::string reason = hdf5_error_detail();
    error = "cannot open it" + (reason.empty() ? "" : " (" + reason + ")");
  }
  const Handle transfer(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
  H5Pset_dxpl_mpio(transfer.get(), H5FD_MPIO_INDEPENDENT);
  for (const TensorSliceRead& s : slices) {
    if (!error.empty()) break;
    error = read_slice(file.get(), s, transfer.get(), max_elements);
  }
  // A failure on one rank fails every rank with the lowest failing rank's text.
  agree_or_throw(comm, error.empty() ? "" : "checkpoint '" + path + "': " + error);
}

}  // namespace trident::io
