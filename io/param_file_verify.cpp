// verify_param_file: recompute every tensor's checksum from the file and compare it with the
// stored one. Each rank reads one contiguous stretch of the file, so the file is read once in
// total and the work is spread over as many ranks as run the check, whatever layout wrote it.
#include <fcntl.h>   // posix_fadvise
#include <hdf5.h>    // parallel build: H5Pset_fapl_mpio
#include <unistd.h>  // close

#include <algorithm>
#include <cinttypes>  // PRIx64
#include <cstdio>
#include <future>  // std::async: hashing beside the reads
#include <string>
#include <utility>
#include <vector>

#include "io/collective_error.h"  // agree_or_throw
#include "io/param_file.h"
#include "io/param_file_common.h"
#include "io/tensor_boxes.h"
#include "io/tensor_checksum.h"
#include "mpi_support/mpi_check.h"

namespace trident::io {

namespace {

using namespace param_file_detail;

constexpr int64_t kVerifyBufferElements = int64_t{16} << 20;  // 64 MiB of floats per read

herr_t collect_name(hid_t, const char* name, const H5L_info_t*, void* names) {
  static_cast<std::vector<std::string>*>(names)->emplace_back(name);
  return 0;
}

// One dataset, and the rows of it this rank reads.
struct Share {
  std::string name;
  int64_t rows = 0, row_elements = 0;  // a scalar: one row of one element
  int64_t first_row = 0, row_count = 0;
  haddr_t offset = HADDR_UNDEF;        // of the dataset's data in the file
};

// Asks the kernel to start reading this rank's stretch of the file now, in the background, so
// the disk streams at full speed while the rank reads and hashes piece by piece (one
// synchronous read at a time reaches about half of `dd`'s bandwidth on a cold cache).
void prefetch(const std::string& path, const std::vector<Share>& shares) {
  int64_t begin = -1, end = -1;
  for (const Share& s : shares) {
    if (s.row_count == 0 || s.offset == HADDR_UNDEF) continue;
    const int64_t first = static_cast<int64_t>(s.offset) + s.first_row * s.row_elements * 4;
    const int64_t last = first + s.row_count * s.row_elements * 4;
    begin = begin < 0 ? first : std::min(begin, first);
    end = std::max(end, last);
  }
  if (begin < 0) return;
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;  // only a hint
  ::posix_fadvise(fd, begin, end - begin, POSIX_FADV_WILLNEED);
  ::close(fd);
}

// The datasets in the order they lie in the file, and this rank's rows of each: the ranks cut
// the file's data into equal contiguous parts (at row boundaries), so each rank sweeps one
// stretch of the file front to back (the kernel's read-ahead then works; name order, or a
// band of every dataset, jumps around the file).
std::vector<Share> plan_shares(hid_t file, const std::vector<std::string>& names, int rank, int size,
                               const std::string& path) {
  std::vector<std::pair<haddr_t, Share>> placed;
  for (const std::string& name : names) {
    const Handle dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
    if (dataset.get() < 0) throw UserError(file_label(path) + ": '" + name + "' is not a dataset");
    const std::vector<int64_t> shape = dataset_shape(dataset.get(), path);
    Share share{name, shape.empty() ? 1 : shape[0], 1, 0, 0, H5Dget_offset(dataset.get())};
    for (size_t d = 1; d < shape.size(); ++d) share.row_elements *= shape[d];
    placed.emplace_back(share.offset, std::move(share));
  }
  std::stable_sort(placed.begin(), placed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  int64_t total = 0;
  for (const auto& [offset, share] : placed) total += share.rows * share.row_elements;
  // Row k of a dataset starting at element `at` belongs to the rank whose part holds its first
  // element at + k * E: k in [ceil((lo - at) / E), ceil((hi - at) / E)).
  const int64_t lo = total * rank / size, hi = total * (rank + 1) / size;
  auto first_row_from = [](int64_t elements, int64_t row_elements, int64_t rows) {
    if (row_elements == 0 || elements <= 0) return int64_t{0};
    return std::min(rows, (elements + row_elements - 1) / row_elements);
  };
  std::vector<Share> shares;
  int64_t at = 0;
  for (auto& [offset, share] : placed) {
    const int64_t begin = first_row_from(lo - at, share.row_elements, share.rows);
    const int64_t end = first_row_from(hi - at, share.row_elements, share.rows);
    at += share.rows * share.row_elements;
    share.first_row = begin;
    share.row_count = end - begin;
    shares.push_back(std::move(share));
  }
  return shares;
}

std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "%016" PRIx64, value);
  return text;
}

// Checksums of pieces read from the file, each hashed on a worker thread while the caller
// reads the next piece (reading and hashing take about as long each).
class PipelinedSums {
 public:
  explicit PipelinedSums(size_t tensors) : sums_(tensors, 0) {}
  ~PipelinedSums() { finish(); }
  PipelinedSums(const PipelinedSums&) = delete;
  PipelinedSums& operator=(const PipelinedSums&) = delete;

  // Takes `buffer` (piece `box` of tensor `index`, just read) and gives back a free one to read
  // the next piece into.
  void add(size_t index, const std::vector<int64_t>& shape, const Box& box, std::vector<float>& buffer) {
    finish();
    std::swap(buffer, busy_);
    pending_ = std::async(std::launch::async, [this, index, shape, box] {
      sums_[index] += box_checksum(shape, box, busy_.data(), /*threads=*/1);
    });
  }
  std::vector<uint64_t>& sums() {
    finish();
    return sums_;
  }

 private:
  void finish() {
    if (pending_.valid()) pending_.get();
  }
  std::vector<uint64_t> sums_;
  std::vector<float> busy_;
  std::future<void> pending_;
};

// Reads this rank's band of one dataset into `sums` (tensor `index`) and its stored checksum;
// returns what went wrong, or "".
std::string hash_band(hid_t file, const Share& share, size_t index, uint64_t& stored, PipelinedSums& sums,
                      std::vector<float>& buffer, const std::string& path) {
  const std::string& name = share.name;
  const Handle dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (dataset.get() < 0) return "'" + name + "' is not a dataset";
  if (H5Aexists(dataset.get(), "checksum") <= 0) return "tensor '" + name + "' has no checksum";
  const Handle attribute(H5Aopen(dataset.get(), "checksum", H5P_DEFAULT), H5Aclose);
  if (attribute.get() < 0 || H5Aread(attribute.get(), H5T_NATIVE_UINT64, &stored) < 0) {
    return "tensor '" + name + "': its checksum cannot be read";
  }
  const std::vector<int64_t> shape = dataset_shape(dataset.get(), path);
  if (shape.empty()) {  // a scalar: one row
    if (share.row_count == 0) return "";
    buffer.resize(1);
    if (H5Dread(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()) < 0) {
      return "tensor '" + name + "' cannot be read";
    }
    sums.add(index, shape, Box{}, buffer);
    return "";
  }
  Box band{std::vector<int64_t>(shape.size(), 0), shape};
  band.start[0] = share.first_row;
  band.count[0] = share.row_count;
  if (band.volume() == 0) return "";
  for (const Box& piece : split_boxes({band}, kVerifyBufferElements)) {
    const std::vector<hsize_t> start(piece.start.begin(), piece.start.end());
    const std::vector<hsize_t> count(piece.count.begin(), piece.count.end());
    const Handle space(H5Dget_space(dataset.get()), H5Sclose);
    const Handle memory(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), H5Sclose);
    buffer.resize(static_cast<size_t>(piece.volume()));
    if (H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0 ||
        H5Dread(dataset.get(), H5T_NATIVE_FLOAT, memory.get(), space.get(), H5P_DEFAULT, buffer.data()) < 0) {
      const std::string detail = hdf5_error_detail();
      return "tensor '" + name + "' cannot be read" + (detail.empty() ? "" : " (" + detail + ")");
    }
    sums.add(index, shape, piece, buffer);
  }
  return "";
}

void verify(const std::string& path, MPI_Comm comm) {
  int rank = 0, size = 1;
  TRIDENT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  TRIDENT_MPI_CHECK(MPI_Comm_size(comm, &size));
  std::string error;
  Handle file;
  try {
    const Handle access = make_handle(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "H5Pcreate", path);
    check_status(H5Pset_fapl_mpio(access.get(), comm, MPI_INFO_NULL), "H5Pset_fapl_mpio", path);
    file = open_checked(path, access.get());
    const htri_t has_version = H5Aexists(file.get(), "checksum_algorithm");
    if (has_version <= 0) {
      error = file_label(path) + ": has no checksums (written by format version 1); it cannot be verified";
    } else if (const std::string algorithm = read_string_attribute(file.get(), "checksum_algorithm", path);
               algorithm != kChecksumAlgorithm) {
      error = file_label(path) + ": unknown checksum algorithm '" + algorithm + "'";
    }
  } catch (const UserError& e) {
    error = e.what();
  }
  agree_or_throw(comm, error);

  std::vector<std::string> names;
  if (H5Literate(file.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_name, &names) < 0) {
    error = file_label(path) + ": its datasets cannot be listed";
  }
  agree_or_throw(comm, error);
  std::vector<Share> shares;
  try {
    shares = plan_shares(file.get(), names, rank, size, path);
  } catch (const UserError& e) {
    error = e.what();
  }
  agree_or_throw(comm, error);
  prefetch(path, shares);
  std::vector<uint64_t> stored(shares.size(), 0);
  PipelinedSums pipeline(shares.size());
  std::vector<float> buffer;
  for (size_t i = 0; i < shares.size() && error.empty(); ++i) {
    try {
      const std::string problem = hash_band(file.get(), shares[i], i, stored[i], pipeline, buffer, path);
      if (!problem.empty()) error = file_label(path) + ": " + problem;
    } catch (const UserError& e) {
      error = e.what();
    }
  }
  agree_or_throw(comm, error);
  std::vector<uint64_t>& sums = pipeline.sums();
  TRIDENT_MPI_CHECK(
      MPI_Allreduce(MPI_IN_PLACE, sums.data(), static_cast<int>(sums.size()), MPI_UINT64_T, MPI_SUM, comm));
  for (size_t i = 0; i < shares.size(); ++i) {
    if (sums[i] != stored[i]) {
      throw UserError(file_label(path) + ": tensor '" + shares[i].name + "' fails its checksum (stored " + hex(stored[i]) +
                      ", computed " + hex(sums[i]) + ")");
    }
  }
}

}  // namespace

std::string verify_param_file(const std::string& path, MPI_Comm comm) {
  const QuietHdf5Errors quiet;
  try {
    verify(path, comm);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace trident::io
