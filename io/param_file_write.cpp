// The parameter-file writer (io/param_file.h, docs/param-file.md): collective, through parallel
// HDF5, one owner per element, per-tensor checksums, bounded transfers, write-then-rename.
//
// Who writes which elements is planned in io/param_file_plan.cpp. The writer runs in stages; after each stage that can fail on one rank only, the ranks agree
// (one MPI_Allreduce) and, when any failed, every rank throws the same UserError, so no rank
// enters a collective HDF5 call the others have left.
#include <fcntl.h>   // open
#include <hdf5.h>    // parallel build: H5Pset_fapl_mpio, H5Pset_dxpl_mpio
#include <unistd.h>  // fsync, close

#include <algorithm>   // std::max
#include <cerrno>
#include <cstdio>      // snprintf
#include <cstring>     // std::strerror
#include <filesystem>  // rename, remove
#include <functional>  // std::cref
#include <future>      // std::async: checksums beside the writes
#include <stdexcept>
#include <system_error>

#include "io/collective_error.h"  // agree_or_throw
#include "io/disk_space.h"        // check_file_size_limit, check_free_space, reserve_disk_space
#include "io/param_file.h"
#include "io/param_file_common.h"
#include "io/param_file_plan.h"  // Plan, check_local, gather_holdings, make_plan, my_pieces
#include "io/tensor_boxes.h"
#include "io/tensor_checksum.h"
#include "mpi_support/mpi_check.h"

namespace trident::io {
namespace {

using namespace param_file_detail;

// Runs one stage on this rank, then agrees on its outcome.
template <class Stage>
void collective_stage(MPI_Comm comm, const std::string& path, Stage&& stage) {
  std::string error;
  try {
    stage();
  } catch (const UserError& e) {
    error = e.what();
  } catch (const std::exception& e) {
    error = file_label(path) + ": " + e.what();
  }
  agree_or_throw(comm, error);
}

// This rank's partial checksum of every plan it writes (0 elsewhere). Single-threaded: it runs
// beside the main thread's writes (write_file), which keep the other core busy.
std::vector<uint64_t> partial_checksums(const std::vector<Plan>& plans, const std::vector<TensorSlice>& tensors,
                                        int64_t max_elements) {
  std::vector<uint64_t> sums(plans.size(), 0);
  for (size_t p = 0; p < plans.size(); ++p) {
    if (!plans[p].writes) continue;
    const TensorSlice& t = tensors[static_cast<size_t>(plans[p].local)];
    int64_t offset = 0;
    for (const Box& piece : my_pieces(t, max_elements)) {
      sums[p] += box_checksum(plans[p].shape, piece, t.data + offset, /*threads=*/1);
      offset += piece.volume();
    }
  }
  return sums;
}

// ---------------------------------------------------------------------------------------------
// Writing

void write_string_attribute(hid_t object, const char* name, const std::string& value, const std::string& path) {
  // Fixed-length, null-terminated ASCII: h5dump and h5py both show it as a plain string.
  Handle type = make_handle(H5Tcopy(H5T_C_S1), H5Tclose, "H5Tcopy", path);
  check_status(H5Tset_size(type.get(), value.size() + 1), "H5Tset_size", path);
  check_status(H5Tset_strpad(type.get(), H5T_STR_NULLTERM), "H5Tset_strpad", path);
  Handle space = make_handle(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate", path);
  Handle attribute = make_handle(H5Acreate2(object, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                                 H5Aclose, "H5Acreate2", path);
  check_status(H5Awrite(attribute.get(), type.get(), value.c_str()), "H5Awrite", path);
}

template <class T>
void write_scalar_attribute(hid_t object, const std::string& name, T value, hid_t file_type, hid_t memory_type,
                            const std::string& path) {
  Handle space = make_handle(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate", path);
  Handle attribute = make_handle(H5Acreate2(object, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                                 H5Aclose, "H5Acreate2", path);
  check_status(H5Awrite(attribute.get(), memory_type, &value), "H5Awrite", path);
}

Handle make_space(const std::vector<int64_t>& shape, const std::string& path) {
  if (shape.empty()) return make_handle(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate", path);
  const std::vector<hsize_t> dims(shape.begin(), shape.end());
  return make_handle(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose,
                     "H5Screate_simple", path);
}

// Selects the union of `pieces` in `space` (a scalar space: the whole of it).
void select_pieces(hid_t space, const Box* pieces, size_t count, const std::string& path) {
  if (count == 1 && pieces[0].start.empty()) {
    check_status(H5Sselect_all(space), "H5Sselect_all", path);
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    const std::vector<hsize_t> start(pieces[i].start.begin(), pieces[i].start.end());
    const std::vector<hsize_t> extent(pieces[i].count.begin(), pieces[i].count.end());
    check_status(H5Sselect_hyperslab(space, i == 0 ? H5S_SELECT_SET : H5S_SELECT_OR, start.data(), nullptr,
                                     extent.data(), nullptr),
                 "H5Sselect_hyperslab", path);
  }
}

// plan.transfers collective H5Dwrite calls: this rank's pieces grouped into transfers of at
// most max_elements, then empty selections while other ranks still write.
void write_dataset(hid_t dataset, const Plan& plan, const std::vector<TensorSlice>& tensors, hid_t transfer,
                   int64_t max_elements, const std::string& path) {
  static const float kNothing = 0.0f;  // a valid buffer for an empty selection
  std::vector<Box> pieces;
  const float* data = &kNothing;
  if (plan.writes) {
    const TensorSlice& t = tensors[static_cast<size_t>(plan.local)];
    pieces = my_pieces(t, max_elements);
    data = t.data;
  }
  const std::vector<size_t> firsts = group_transfers(pieces, max_elements);
  int64_t offset = 0;
  for (size_t call = 0; call < plan.transfers; ++call) {
    Handle file_space = make_handle(H5Dget_space(dataset), H5Sclose, "H5Dget_space", path);
    Handle memory_space;
    const float* buffer = &kNothing;
    if (call + 1 < firsts.size()) {
      int64_t elements = 0;
      for (size_t i = firsts[call]; i < firsts[call + 1]; ++i) elements += pieces[i].volume();
      select_pieces(file_space.get(), pieces.data() + firsts[call], firsts[call + 1] - firsts[call], path);
      memory_space = make_space({elements}, path);
      buffer = data + offset;
      offset += elements;
    } else {
      memory_space = make_space({1}, path);
      check_status(H5Sselect_none(memory_space.get()), "H5Sselect_none", path);
      check_status(H5Sselect_none(file_space.get()), "H5Sselect_none", path);
    }
    if (H5Dwrite(dataset, H5T_NATIVE_FLOAT, memory_space.get(), file_space.get(), transfer, buffer) < 0) {
      const std::string detail = hdf5_error_detail();
      throw UserError(file_label(path) + ": writing tensor '" + plan.name + "' failed" +
                      (detail.empty() ? "" : " (" + detail + ")"));
    }
  }
}


// The file's size: the tensors plus room for HDF5's metadata and the attributes.
int64_t expected_file_bytes(const std::vector<Plan>& plans,
                            const std::vector<std::pair<std::string, std::string>>& string_attributes) {
  int64_t bytes = 64 << 10;
  for (const Plan& plan : plans) bytes += element_count(plan.shape) * 4 + 1024 + static_cast<int64_t>(plan.name.size());
  for (const auto& attribute : string_attributes) bytes += static_cast<int64_t>(attribute.second.size()) + 512;
  return bytes;
}

// The system's reason why `temporary` cannot be created, for the error line: HDF5 on MPI-IO
// reports only "MPI_ERR_NO_SUCH_FILE" or "MPI_ERR_ACCESS", whether the directory is missing, a
// file, or read-only. "" when a plain open() succeeds (the reason is then HDF5's own).
std::string creation_failure_reason(const std::string& temporary) {
  const std::filesystem::path directory = std::filesystem::path(temporary).parent_path();
  std::error_code ec;
  if (!directory.empty()) {
    if (!std::filesystem::exists(directory, ec)) return "its directory '" + directory.string() + "' does not exist";
    if (!std::filesystem::is_directory(directory, ec)) return "its directory '" + directory.string() + "' is a file";
  }
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return errno == EEXIST ? std::string() : std::string(std::strerror(errno));
  ::close(fd);
  ::unlink(temporary.c_str());
  return "";
}

// The attributes, datasets and checksums of the created file, then its flush and close; every
// failure is agreed by all ranks. A failure leaves the datasets' handles open (see write_file).
void write_contents(Handle& file, Handle& create, Handle& transfer, const std::string& temporary,
                    const std::string& path, MPI_Comm comm,
                    const std::vector<Plan>& plans, const std::vector<TensorSlice>& tensors,
                    const std::vector<std::pair<std::string, int64_t>>& int_attributes,
                    const std::vector<std::pair<std::string, std::string>>& string_attributes,
                    const WriteOptions& options, int64_t max_elements) {
  collective_stage(comm, path, [&] {
    write_string_attribute(file.get(), "format", kFormatName, path);
    write_scalar_attribute<int64_t>(file.get(), "format_version", kFormatVersion, H5T_STD_I64LE, H5T_NATIVE_INT64,
                                    path);
    write_string_attribute(file.get(), "checksum_algorithm", kChecksumAlgorithm, path);
    for (const auto& [name, value] : int_attributes) {
      write_scalar_attribute<int64_t>(file.get(), name, value, H5T_STD_I64LE, H5T_NATIVE_INT64, path);
    }
    for (const auto& [name, value] : options.double_attributes) {
      write_scalar_attribute<double>(file.get(), name, value, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, path);
    }
    for (const auto& [name, value] : string_attributes) write_string_attribute(file.get(), name.c_str(), value, path);
  });
  // The checksums are computed while the data is written (they read the same const buffers):
  // hashing 1.5 GB takes about as long as writing it.
  std::future<std::vector<uint64_t>> partial_sums =
      std::async(std::launch::async, partial_checksums, std::cref(plans), std::cref(tensors), max_elements);
  std::vector<Handle> datasets;
  try {
    for (size_t p = 0; p < plans.size(); ++p) {
      const Plan& plan = plans[p];
      collective_stage(comm, path, [&] {
        Handle space = make_space(plan.shape, path);
        datasets.push_back(make_handle(H5Dcreate2(file.get(), plan.name.c_str(), H5T_IEEE_F32LE, space.get(),
                                                  H5P_DEFAULT, create.get(), H5P_DEFAULT),
                                       H5Dclose, "H5Dcreate2", path));
        write_dataset(datasets.back().get(), plan, tensors, transfer.get(), max_elements, path);
      });
    }
  } catch (...) {
    partial_sums.wait();  // the thread reads the tensors: it must end before they can go
    for (Handle& dataset : datasets) dataset.release();
    throw;
  }
  std::vector<uint64_t> sums = partial_sums.get();
  TRIDENT_MPI_CHECK(
      MPI_Allreduce(MPI_IN_PLACE, sums.data(), static_cast<int>(sums.size()), MPI_UINT64_T, MPI_SUM, comm));
  try {
    collective_stage(comm, path, [&] {
      for (size_t p = 0; p < plans.size(); ++p) {
        write_scalar_attribute<uint64_t>(datasets[p].get(), "checksum", sums[p], H5T_STD_U64LE, H5T_NATIVE_UINT64,
                                         path);
        check_status(H5Dclose(datasets[p].release()), "H5Dclose", path);
      }
    });
  } catch (...) {
    for (Handle& dataset : datasets) dataset.release();
    throw;
  }
  collective_stage(comm, path, [&] {
    transfer.reset();
    create.reset();
    // H5Fflush calls MPI_File_sync: the data is on the disk before the rename makes it the
    // checkpoint (H5Fclose alone does not sync).
    if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0 || H5Fclose(file.release()) < 0) {
      const std::string detail = hdf5_error_detail();
      throw UserError(file_label(path) + ": cannot finish writing '" + temporary + "'" +
                      (detail.empty() ? " (disk full?)" : " (" + detail + ")"));
    }
  });
}

// Writes the whole file at `temporary` collectively; every failure is agreed by all ranks.
void write_file(const std::string& temporary, const std::string& path, MPI_Comm comm, const std::vector<Plan>& plans,
                const std::vector<TensorSlice>& tensors,
                const std::vector<std::pair<std::string, int64_t>>& int_attributes,
                const std::vector<std::pair<std::string, std::string>>& string_attributes,
                const WriteOptions& options, int64_t max_elements) {
  Handle file, transfer, create;
  // Before HDF5 holds the file: a superblock it cannot flush leaves it a half-closed file that
  // crashes MPI_Finalize (io/disk_space.h).
  collective_stage(comm, path, [&] {
    int rank = 0;
    TRIDENT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    const int64_t bytes = expected_file_bytes(plans, string_attributes);
    // Each rank's own file size limit (each writes up to the file's end); the disk's, once.
    check_file_size_limit(file_label(path), bytes);
    if (rank == 0) check_free_space(temporary, file_label(path), bytes);
  });
  collective_stage(comm, path, [&] {
    Handle access = make_handle(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "H5Pcreate", path);
    check_status(H5Pset_fapl_mpio(access.get(), comm, MPI_INFO_NULL), "H5Pset_fapl_mpio", path);
    check_status(H5Pset_coll_metadata_write(access.get(), true), "H5Pset_coll_metadata_write", path);
    const hid_t id = H5Fcreate(temporary.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get());
    if (id < 0) {
      const std::string hdf5_detail = hdf5_error_detail();
      const std::string system_reason = creation_failure_reason(temporary);
      const std::string& detail = system_reason.empty() ? hdf5_detail : system_reason;
      throw UserError(file_label(path) + ": cannot create '" + temporary + "'" +
                      (detail.empty() ? "" : " (" + detail + ")"));
    }
    file = Handle(id, H5Fclose);
    transfer = make_handle(H5Pcreate(H5P_DATASET_XFER), H5Pclose, "H5Pcreate", path);
    check_status(H5Pset_dxpl_mpio(transfer.get(), H5FD_MPIO_COLLECTIVE), "H5Pset_dxpl_mpio", path);
    create = make_handle(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "H5Pcreate", path);
    // Every element is written by its owner: no fill pass over the file.
    check_status(H5Pset_fill_time(create.get(), H5D_FILL_TIME_NEVER), "H5Pset_fill_time", path);
    check_status(H5Pset_alloc_time(create.get(), H5D_ALLOC_TIME_EARLY), "H5Pset_alloc_time", path);
  });
  collective_stage(comm, path, [&] {
    int rank = 0;
    TRIDENT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    // The whole file's blocks, before any data is written, so that a disk too full for it fails
    // here, on every rank alike, and not inside HDF5's collective writes and flushes, where an
    // error on one rank leaves the others waiting in a barrier (HDF5 1.10 does that on ENOSPC).
    if (rank == 0) reserve_disk_space(temporary, file_label(path), expected_file_bytes(plans, string_attributes));
  });
  try {
    write_contents(file, create, transfer, temporary, path, comm, plans, tensors, int_attributes, string_attributes,
                   options, max_elements);
  } catch (const UserError& e) {
    // Agreed on every rank (each stage is): leave every HDF5 handle of the file open rather than
    // close it collectively from diverged states (io/user_error.h).
    file.release();
    throw CollectiveWriteAbandoned(e.what());
  }
}

// Makes a rename in `directory` durable.
void sync_directory(const std::string& directory) {
  const int fd = ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;  // the rename happened; only its durability across a power cut is at stake
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

void write_param_file(const std::string& path, MPI_Comm comm, const std::vector<TensorSlice>& tensors,
                      const std::vector<std::pair<std::string, int64_t>>& int_attributes,
                      const std::vector<std::pair<std::string, std::string>>& string_attributes,
                      const WriteOptions& options) {
  const QuietHdf5Errors quiet;
  int rank = 0;
  TRIDENT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  const int64_t max_elements = std::max<int64_t>(1, options.max_bytes_per_call / static_cast<int64_t>(sizeof(float)));
  collective_stage(comm, path, [&] { check_local(tensors, path); });
  const GatheredHoldings holdings = gather_holdings(comm, tensors);
  std::vector<Plan> plans;
  collective_stage(comm, path, [&] { plans = make_plan(holdings, rank, tensors, max_elements, path); });

  const std::string temporary = path + ".tmp";
  try {
    write_file(temporary, path, comm, plans, tensors, int_attributes, string_attributes, options, max_elements);
  } catch (const UserError&) {
    if (rank == 0) {
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);
    }
    throw;
  }
  std::string error;
  if (rank == 0) {
    std::error_code code;
    std::filesystem::rename(temporary, path, code);
    if (code) {
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);
      error = file_label(path) + ": cannot rename '" + temporary + "' to it (" + code.message() + ")";
    } else {
      sync_directory(std::filesystem::path(path).parent_path().string());
    }
  }
  agree_or_throw(comm, error);
  TRIDENT_MPI_CHECK(MPI_Barrier(comm));
}

}  // namespace trident::io
