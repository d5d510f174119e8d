// The parameter-file writer (io/param_file.h, docs/param-file.md): collective, through parallel
// HDF5, one owner per element, per-tensor checksums, bounded transfers, write-then-rename.
//
// The writer runs in stages; after each stage that can fail on one rank only, the ranks agree
// (one MPI_Allreduce) and, when any failed, every rank throws the same UserError, so no rank
// enters a collective HDF5 call the others have left.
#include <fcntl.h>   // open
#include <hdf5.h>    // parallel build: H5Pset_fapl_mpio, H5Pset_dxpl_mpio
#include <unistd.h>  // fsync, close

#include <cerrno>
#include <csignal>     // raise: the test hook below
#include <cstdio>      // snprintf
#include <cstdlib>     // getenv
#include <cstring>     // std::memcpy, std::strerror
#include <filesystem>  // rename, remove
#include <functional>  // std::cref
#include <future>      // std::async: checksums beside the writes
#include <map>
#include <stdexcept>
#include <system_error>

#include "io/collective_error.h"  // agree_or_throw
#include "io/disk_space.h"        // check_file_size_limit, check_free_space, reserve_disk_space
#include "io/param_file.h"
#include "io/param_file_common.h"
#include "io/tensor_boxes.h"
#include "io/tensor_checksum.h"

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

// ---------------------------------------------------------------------------------------------
// The union of every rank's tensors, and who writes what

// One rank's holding of one tensor, as every rank sees it after the all-gather.
struct Holding {
  std::string name;
  std::vector<int64_t> shape;
  int axis = -1;  // -1, or normalised to -1 when the slice is the whole axis
  int64_t begin = 0, extent = 0;
  bool write = false;
  int64_t write_begin = 0, write_count = 0;  // normalised: count >= 0
  int rank = 0;

  std::vector<int64_t> local_shape() const {
    std::vector<int64_t> local = shape;
    if (axis >= 0) local[static_cast<size_t>(axis)] = extent;
    return local;
  }
  // The elements it writes, as boxes of the global tensor in element order.
  std::vector<Box> global_boxes() const {
    std::vector<Box> boxes = flat_range_boxes(local_shape(), write_begin, write_count);
    shift_to_global(boxes, axis, begin);
    return boxes;
  }
  bool same_part(const Holding& o) const {
    return axis == o.axis && begin == o.begin && extent == o.extent && write_begin == o.write_begin &&
           write_count == o.write_count;
  }
};

// One dataset of the file, and this rank's part in it.
struct Plan {
  std::string name;
  std::vector<int64_t> shape;
  int local = -1;       // index into this rank's tensors, or -1 when it holds none of it
  bool writes = false;  // this rank writes its part
  size_t transfers = 0; // collective H5Dwrite calls: the most any writer needs
};

int64_t local_volume(const TensorSlice& t) {
  int64_t n = element_count(t.global_shape);
  if (t.split_axis >= 0) {
    const int64_t full = t.global_shape[static_cast<size_t>(t.split_axis)];
    n = full == 0 ? 0 : n / full * t.slice_extent;
  }
  return n;
}

int64_t written_count(const TensorSlice& t) {
  return t.write_count < 0 ? local_volume(t) - t.write_begin : t.write_count;
}

void check_local(const std::vector<TensorSlice>& tensors, const std::string& path) {
  const std::string where = file_label(path) + ": tensor '";
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorSlice& t = tensors[i];
    if (t.name.empty() || t.name == "." || t.name.find('/') != std::string::npos) {
      throw UserError(where + t.name + "': not a valid dataset name (empty, '.' or containing '/')");
    }
    for (size_t j = 0; j < i; ++j) {
      if (tensors[j].name == t.name) throw UserError(where + t.name + "' is listed twice by one rank");
    }
    for (const int64_t d : t.global_shape) {
      if (d < 0) throw UserError(where + t.name + "': negative dimension");
    }
    const int rank = static_cast<int>(t.global_shape.size());
    if (t.split_axis < -1 || t.split_axis >= rank) {
      throw UserError(where + t.name + "': split axis " + std::to_string(t.split_axis) + " out of range");
    }
    if (t.split_axis >= 0) {
      const int64_t full = t.global_shape[static_cast<size_t>(t.split_axis)];
      if (t.slice_begin < 0 || t.slice_extent < 0 || t.slice_begin + t.slice_extent > full) {
        throw UserError(where + t.name + "': slice [" + std::to_string(t.slice_begin) + ", " +
                        std::to_string(t.slice_begin + t.slice_extent) + ") outside the axis of " +
                        std::to_string(full));
      }
    }
    const int64_t count = written_count(t);
    if (t.write_begin < 0 || count < 0 || t.write_begin + count > local_volume(t)) {
      throw UserError(where + t.name + "': write range [" + std::to_string(t.write_begin) + ", " +
                      std::to_string(t.write_begin + count) + ") outside the slice of " +
                      std::to_string(local_volume(t)) + " elements");
    }
    if (t.write && t.data == nullptr && count > 0) {
      throw UserError(where + t.name + "': no data for a slice this rank writes");
    }
  }
}

template <class T>
void put(std::vector<char>& buffer, const T& value) {
  const size_t at = buffer.size();
  buffer.resize(at + sizeof(T));
  std::memcpy(buffer.data() + at, &value, sizeof(T));
}

template <class T>
T take(const std::vector<char>& buffer, size_t& at) {
  T value{};
  std::memcpy(&value, buffer.data() + at, sizeof(T));
  at += sizeof(T);
  return value;
}

// Every rank's holdings in world-rank order, on every rank.
std::vector<Holding> gather_holdings(MPI_Comm comm, const std::vector<TensorSlice>& tensors) {
  std::vector<char> mine;
  put<uint64_t>(mine, tensors.size());
  for (const TensorSlice& t : tensors) {
    put<uint64_t>(mine, t.name.size());
    mine.insert(mine.end(), t.name.begin(), t.name.end());
    put<uint64_t>(mine, t.global_shape.size());
    for (const int64_t d : t.global_shape) put<int64_t>(mine, d);
    put<int32_t>(mine, t.split_axis);
    put<int64_t>(mine, t.slice_begin);
    put<int64_t>(mine, t.slice_extent);
    put<uint8_t>(mine, t.write ? 1 : 0);
    put<int64_t>(mine, t.write_begin);
    put<int64_t>(mine, written_count(t));
  }
  int size = 0;
  MPI_Comm_size(comm, &size);
  const int my_bytes = static_cast<int>(mine.size());
  std::vector<int> bytes(static_cast<size_t>(size)), displacements(static_cast<size_t>(size));
  MPI_Allgather(&my_bytes, 1, MPI_INT, bytes.data(), 1, MPI_INT, comm);
  int total = 0;
  for (size_t r = 0; r < bytes.size(); ++r) {
    displacements[r] = total;
    total += bytes[r];
  }
  std::vector<char> all(static_cast<size_t>(total));
  MPI_Allgatherv(mine.data(), my_bytes, MPI_CHAR, all.data(), bytes.data(), displacements.data(), MPI_CHAR, comm);

  std::vector<Holding> holdings;
  size_t at = 0;
  for (int r = 0; r < size; ++r) {
    const auto count = take<uint64_t>(all, at);
    for (uint64_t i = 0; i < count; ++i) {
      Holding h;
      const auto name_size = take<uint64_t>(all, at);
      h.name.assign(all.data() + at, name_size);
      at += name_size;
      const auto dims = take<uint64_t>(all, at);
      for (uint64_t d = 0; d < dims; ++d) h.shape.push_back(take<int64_t>(all, at));
      h.axis = take<int32_t>(all, at);
      h.begin = take<int64_t>(all, at);
      h.extent = take<int64_t>(all, at);
      h.write = take<uint8_t>(all, at) != 0;
      h.write_begin = take<int64_t>(all, at);
      h.write_count = take<int64_t>(all, at);
      h.rank = r;
      if (h.axis >= 0 && h.begin == 0 && h.extent == h.shape[static_cast<size_t>(h.axis)]) h.axis = -1;
      if (h.axis < 0) {
        h.begin = 0;
        h.extent = 0;
      }
      holdings.push_back(std::move(h));
    }
  }
  return holdings;
}

std::string part_text(const Holding& h) {
  std::string text;  // appended piece by piece: GCC 12 warns falsely on "literal" + string&&
  if (h.axis < 0) {
    text = "the whole tensor";
  } else {
    text = "[";
    text += std::to_string(h.begin);
    text += ", ";
    text += std::to_string(h.begin + h.extent);
    text += ") of axis ";
    text += std::to_string(h.axis);
  }
  text += ", elements [";
  text += std::to_string(h.write_begin);
  text += ", ";
  text += std::to_string(h.write_begin + h.write_count);
  text += ")";
  return text;
}

bool parts_overlap(const Holding& a, const Holding& b) {
  for (const Box& x : a.global_boxes()) {
    for (const Box& y : b.global_boxes()) {
      if (boxes_intersect(x, y)) return true;
    }
  }
  return false;
}

size_t transfers_of(const Holding& h, int64_t max_elements) {
  return group_transfers(split_boxes(h.global_boxes(), max_elements), max_elements).size() - 1;
}

// The datasets in order of first appearance by ascending world rank, and this rank's part in
// each. The same on every rank (it only reads the gathered holdings), so every rank throws
// the same error when the slices are inconsistent.
std::vector<Plan> make_plan(const std::vector<Holding>& holdings, int my_rank,
                            const std::vector<TensorSlice>& tensors, int64_t max_elements, const std::string& path) {
  std::vector<Plan> plans;
  std::map<std::string, size_t> index;
  std::vector<std::vector<const Holding*>> holders;
  for (const Holding& h : holdings) {
    auto [it, added] = index.emplace(h.name, plans.size());
    if (added) {
      plans.push_back(Plan{h.name, h.shape, -1, false, 0});
      holders.emplace_back();
    } else if (plans[it->second].shape != h.shape) {
      throw UserError(file_label(path) + ": tensor '" + h.name + "' has different global shapes on ranks " +
                      std::to_string(holders[it->second].front()->rank) + " and " + std::to_string(h.rank));
    }
    holders[it->second].push_back(&h);
  }
  for (size_t p = 0; p < plans.size(); ++p) {
    Plan& plan = plans[p];
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].name == plan.name) plan.local = static_cast<int>(i);
    }
    if (element_count(plan.shape) == 0) continue;  // nothing to write
    // The owners, lowest world rank first; an owner of exactly the part a lower owner already
    // writes writes nothing.
    std::vector<const Holding*> writers;
    for (const Holding* h : holders[p]) {
      if (!h->write || h->write_count == 0) continue;
      bool duplicate = false;
      for (const Holding* w : writers) {
        if (h->same_part(*w)) {
          duplicate = true;
          break;
        }
        if (parts_overlap(*h, *w)) {
          throw UserError(file_label(path) + ": tensor '" + plan.name + "': ranks " + std::to_string(w->rank) +
                          " and " + std::to_string(h->rank) + " own overlapping slices (" + part_text(*w) +
                          "; " + part_text(*h) + ")");
        }
      }
      if (!duplicate) writers.push_back(h);
    }
    // Disjoint parts (checked above) cover every element when their sizes add up.
    int64_t covered = 0;
    for (const Holding* w : writers) covered += w->write_count;
    if (covered != element_count(plan.shape)) {
      throw UserError(file_label(path) + ": tensor '" + plan.name +
                      "': the ranks' owned slices do not cover every element");
    }
    for (const Holding* w : writers) {
      if (w->rank == my_rank) plan.writes = true;
      plan.transfers = std::max(plan.transfers, transfers_of(*w, max_elements));
    }
  }
  return plans;
}

// This rank's pieces of one tensor, in element order (each at most max_elements).
std::vector<Box> my_pieces(const TensorSlice& t, int64_t max_elements) {
  std::vector<int64_t> local = t.global_shape;
  if (t.split_axis >= 0) local[static_cast<size_t>(t.split_axis)] = t.slice_extent;
  std::vector<Box> boxes = flat_range_boxes(local, t.write_begin, written_count(t));
  shift_to_global(boxes, t.split_axis, t.slice_begin);
  return split_boxes(boxes, max_elements);
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

// Test hook for tests/mpi/checkpoint_faults_test.sh: TRIDENT_TEST_KILL_RANK_DURING_WRITE=R makes
// world rank R of the writing communicator kill itself with SIGKILL halfway through the
// datasets, as `kill -9` would, to show that the previous checkpoint survives.
void maybe_die_midway(MPI_Comm comm) {
  const char* value = std::getenv("TRIDENT_TEST_KILL_RANK_DURING_WRITE");
  if (value == nullptr) return;
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (std::to_string(rank) == value) std::raise(SIGKILL);
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
      if (p == plans.size() / 2) maybe_die_midway(comm);
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
  MPI_Allreduce(MPI_IN_PLACE, sums.data(), static_cast<int>(sums.size()), MPI_UINT64_T, MPI_SUM, comm);
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
    MPI_Comm_rank(comm, &rank);
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
    MPI_Comm_rank(comm, &rank);
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
  MPI_Comm_rank(comm, &rank);
  const int64_t max_elements = std::max<int64_t>(1, options.max_bytes_per_call / static_cast<int64_t>(sizeof(float)));
  collective_stage(comm, path, [&] { check_local(tensors, path); });
  const std::vector<Holding> holdings = gather_holdings(comm, tensors);
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
  MPI_Barrier(comm);
}

}  // namespace trident::io
