// Parameter files (io/param_file.h, docs/param-file.md): a collective parallel-HDF5 writer and
// a serial reader.
//
// The writer runs in stages; after each stage that can fail on one rank only, the ranks agree
// (one MPI_Allreduce) and, when any failed, every rank throws the same UserError, so no rank
// enters a collective HDF5 call the others have left.
#include "io/param_file.h"

#include <hdf5.h>  // parallel build: H5Pset_fapl_mpio, H5Pset_dxpl_mpio

#include <climits>     // INT_MAX
#include <cstring>     // std::memcpy
#include <filesystem>  // rename, remove
#include <stdexcept>
#include <system_error>

#include "io/collective_error.h"  // agree_or_throw
#include "io/hdf5_handle.h"  // Handle, QuietHdf5Errors
#include "io/user_error.h"  // UserError

namespace trident::io {
namespace {

constexpr const char* kFormatName = "trident-params";
constexpr int64_t kFormatVersion = 1;

std::string file_label(const std::string& path) { return "parameter file '" + path + "'"; }

void check_status(herr_t status, const char* call, const std::string& path) {
  if (status < 0) throw UserError(file_label(path) + ": HDF5 call " + call + " failed");
}

Handle make_handle(hid_t id, Handle::Closer closer, const char* call, const std::string& path) {
  if (id < 0) throw UserError(file_label(path) + ": HDF5 call " + call + " failed");
  return Handle(id, closer);
}

// ---------------------------------------------------------------------------------------------
// Agreement between ranks

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
  int rank = 0;
};

// One dataset of the file, and this rank's part in it.
struct Plan {
  std::string name;
  std::vector<int64_t> shape;
  int local = -1;       // index into this rank's tensors, or -1 when it holds none of it
  bool writes = false;  // this rank writes its slice
};

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
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
    if (t.write && t.data == nullptr && element_count(t.global_shape) > 0) {
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

// Every rank's (name, global shape, slice, write) in world-rank order, on every rank.
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

std::string slice_text(const Holding& h) {
  if (h.axis < 0) return "the whole tensor";
  std::string text = "[";  // appended piece by piece: GCC 12 warns falsely on "literal" + string&&
  text += std::to_string(h.begin);
  text += ", ";
  text += std::to_string(h.begin + h.extent);
  text += ") of axis ";
  text += std::to_string(h.axis);
  return text;
}

bool same_slice(const Holding& a, const Holding& b) {
  return a.axis == b.axis && a.begin == b.begin && a.extent == b.extent;
}

bool overlap(const Holding& a, const Holding& b) {
  if (a.axis < 0 || b.axis < 0 || a.axis != b.axis) return true;  // both non-empty here
  return a.begin < b.begin + b.extent && b.begin < a.begin + a.extent;
}

// The datasets in order of first appearance by ascending world rank, and this rank's part in
// each. The same on every rank (it only reads the gathered holdings), so every rank throws
// the same error when the slices are inconsistent.
std::vector<Plan> make_plan(const std::vector<Holding>& holdings, int my_rank,
                            const std::vector<TensorSlice>& tensors, const std::string& path) {
  std::vector<Plan> plans;
  std::map<std::string, size_t> index;
  std::vector<std::vector<const Holding*>> holders;
  for (const Holding& h : holdings) {
    auto [it, added] = index.emplace(h.name, plans.size());
    if (added) {
      plans.push_back(Plan{h.name, h.shape, -1, false});
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
    // The owners, lowest world rank first; an owner whose slice a lower owner already writes
    // writes nothing.
    std::vector<const Holding*> writers;
    for (const Holding* h : holders[p]) {
      if (!h->write || (h->axis >= 0 && h->extent == 0)) continue;
      bool duplicate = false;
      for (const Holding* w : writers) {
        if (!overlap(*h, *w)) continue;
        if (!same_slice(*h, *w)) {
          throw UserError(file_label(path) + ": tensor '" + plan.name + "': ranks " + std::to_string(w->rank) +
                          " and " + std::to_string(h->rank) + " own overlapping slices (" + slice_text(*w) +
                          ", " + slice_text(*h) + ")");
        }
        duplicate = true;
      }
      if (!duplicate) writers.push_back(h);
    }
    // Exactly one owner per element: one whole-tensor owner, or disjoint slices of one axis
    // (disjointness checked above) whose extents add up to the axis.
    bool covered = false;
    if (writers.size() == 1 && writers.front()->axis < 0) {
      covered = true;
    } else if (!writers.empty()) {
      int64_t sum = 0;
      for (const Holding* w : writers) sum += w->extent;
      covered = sum == plan.shape[static_cast<size_t>(writers.front()->axis)];
    }
    if (!covered) {
      throw UserError(file_label(path) + ": tensor '" + plan.name +
                      "': the ranks' owned slices do not cover every element");
    }
    for (const Holding* w : writers) {
      if (w->rank == my_rank) plan.writes = true;
    }
  }
  return plans;
}

// ---------------------------------------------------------------------------------------------
// Writing

void write_string_attribute(hid_t file, const char* name, const std::string& value, const std::string& path) {
  // Fixed-length, null-terminated ASCII: h5dump and h5py both show it as a plain string.
  Handle type = make_handle(H5Tcopy(H5T_C_S1), H5Tclose, "H5Tcopy", path);
  check_status(H5Tset_size(type.get(), value.size() + 1), "H5Tset_size", path);
  check_status(H5Tset_strpad(type.get(), H5T_STR_NULLTERM), "H5Tset_strpad", path);
  Handle space = make_handle(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate", path);
  Handle attribute = make_handle(H5Acreate2(file, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                                 H5Aclose, "H5Acreate2", path);
  check_status(H5Awrite(attribute.get(), type.get(), value.c_str()), "H5Awrite", path);
}

void write_int_attribute(hid_t file, const std::string& name, int64_t value, const std::string& path) {
  Handle space = make_handle(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate", path);
  Handle attribute =
      make_handle(H5Acreate2(file, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                  "H5Acreate2", path);
  check_status(H5Awrite(attribute.get(), H5T_NATIVE_INT64, &value), "H5Awrite", path);
}

std::vector<hsize_t> dims_of(const std::vector<int64_t>& shape) {
  std::vector<hsize_t> dims;
  for (const int64_t d : shape) dims.push_back(static_cast<hsize_t>(d));
  return dims;
}

Handle make_space(const std::vector<hsize_t>& dims, const std::string& path) {
  if (dims.empty()) return make_handle(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate", path);
  return make_handle(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose,
                     "H5Screate_simple", path);
}

// One collective H5Dwrite: this rank's slice when it writes, else an empty selection.
void write_dataset(hid_t dataset, const Plan& plan, const std::vector<TensorSlice>& tensors, hid_t transfer,
                   const std::string& path) {
  static const float kNothing = 0.0f;  // a valid buffer for an empty selection
  Handle file_space = make_handle(H5Dget_space(dataset), H5Sclose, "H5Dget_space", path);
  const std::vector<hsize_t> dims = dims_of(plan.shape);
  Handle memory_space;
  const void* buffer = &kNothing;
  if (!plan.writes) {
    memory_space = make_space(dims, path);
    check_status(H5Sselect_none(memory_space.get()), "H5Sselect_none", path);
    check_status(H5Sselect_none(file_space.get()), "H5Sselect_none", path);
  } else {
    const TensorSlice& t = tensors[static_cast<size_t>(plan.local)];
    buffer = t.data;
    const bool whole = t.split_axis < 0 || (t.slice_begin == 0 && t.slice_extent == plan.shape[static_cast<size_t>(
                                                                                          t.split_axis)]);
    if (whole) {
      memory_space = make_space(dims, path);
    } else {
      std::vector<hsize_t> start(dims.size(), 0), count = dims;
      const auto axis = static_cast<size_t>(t.split_axis);
      start[axis] = static_cast<hsize_t>(t.slice_begin);
      count[axis] = static_cast<hsize_t>(t.slice_extent);
      check_status(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
                   "H5Sselect_hyperslab", path);
      memory_space = make_space(count, path);
    }
  }
  check_status(H5Dwrite(dataset, H5T_NATIVE_FLOAT, memory_space.get(), file_space.get(), transfer, buffer),
               "H5Dwrite", path);
}

// Writes the whole file at `temporary` collectively; every failure is agreed by all ranks.
void write_file(const std::string& temporary, const std::string& path, MPI_Comm comm, const std::vector<Plan>& plans,
                const std::vector<TensorSlice>& tensors,
                const std::vector<std::pair<std::string, int64_t>>& int_attributes,
                const std::vector<std::pair<std::string, std::string>>& string_attributes) {
  Handle file, transfer, create;
  collective_stage(comm, path, [&] {
    Handle access = make_handle(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "H5Pcreate", path);
    check_status(H5Pset_fapl_mpio(access.get(), comm, MPI_INFO_NULL), "H5Pset_fapl_mpio", path);
    check_status(H5Pset_coll_metadata_write(access.get(), true), "H5Pset_coll_metadata_write", path);
    const hid_t id = H5Fcreate(temporary.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get());
    if (id < 0) throw UserError(file_label(path) + ": cannot create '" + temporary + "'");
    file = Handle(id, H5Fclose);
    transfer = make_handle(H5Pcreate(H5P_DATASET_XFER), H5Pclose, "H5Pcreate", path);
    check_status(H5Pset_dxpl_mpio(transfer.get(), H5FD_MPIO_COLLECTIVE), "H5Pset_dxpl_mpio", path);
    create = make_handle(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "H5Pcreate", path);
    // Every element is written by its owner: no fill pass over the file.
    check_status(H5Pset_fill_time(create.get(), H5D_FILL_TIME_NEVER), "H5Pset_fill_time", path);
    check_status(H5Pset_alloc_time(create.get(), H5D_ALLOC_TIME_EARLY), "H5Pset_alloc_time", path);
  });
  collective_stage(comm, path, [&] {
    write_string_attribute(file.get(), "format", kFormatName, path);
    write_int_attribute(file.get(), "format_version", kFormatVersion, path);
    for (const auto& [name, value] : int_attributes) write_int_attribute(file.get(), name, value, path);
    for (const auto& [name, value] : string_attributes) write_string_attribute(file.get(), name.c_str(), value, path);
  });
  for (const Plan& plan : plans) {
    Handle dataset;
    collective_stage(comm, path, [&] {
      Handle space = make_space(dims_of(plan.shape), path);
      dataset = make_handle(H5Dcreate2(file.get(), plan.name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT,
                                       create.get(), H5P_DEFAULT),
                            H5Dclose, "H5Dcreate2", path);
      write_dataset(dataset.get(), plan, tensors, transfer.get(), path);
      check_status(H5Dclose(dataset.release()), "H5Dclose", path);
    });
  }
  collective_stage(comm, path, [&] {
    transfer.reset();
    create.reset();
    if (H5Fclose(file.release()) < 0) {
      throw UserError(file_label(path) + ": cannot finish writing '" + temporary + "' (disk full?)");
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Reading

class FormatError : public UserError {
 public:
  FormatError(const std::string& path, const std::string& problem)
      : UserError(file_label(path) + ": not a Trident parameter file (" + problem + ")") {}
};

std::string read_string_attribute(hid_t file, const char* name, const std::string& path) {
  const htri_t exists = H5Aexists(file, name);
  check_status(exists, "H5Aexists", path);
  if (exists == 0) throw FormatError(path, std::string("no attribute '") + name + "'");
  Handle attribute = make_handle(H5Aopen(file, name, H5P_DEFAULT), H5Aclose, "H5Aopen", path);
  Handle type = make_handle(H5Aget_type(attribute.get()), H5Tclose, "H5Aget_type", path);
  if (H5Tget_class(type.get()) != H5T_STRING) {
    throw FormatError(path, std::string("attribute '") + name + "' is not a string");
  }
  const htri_t variable = H5Tis_variable_str(type.get());
  check_status(variable, "H5Tis_variable_str", path);
  Handle memory_type = make_handle(H5Tcopy(H5T_C_S1), H5Tclose, "H5Tcopy", path);
  if (variable > 0) {  // written by h5py, for example
    check_status(H5Tset_size(memory_type.get(), H5T_VARIABLE), "H5Tset_size", path);
    char* text = nullptr;
    check_status(H5Aread(attribute.get(), memory_type.get(), &text), "H5Aread", path);
    std::string value = text != nullptr ? text : "";
    H5free_memory(text);
    return value;
  }
  const size_t size = H5Tget_size(type.get());
  if (size == 0) check_status(-1, "H5Tget_size", path);
  check_status(H5Tset_size(memory_type.get(), size + 1), "H5Tset_size", path);
  check_status(H5Tset_strpad(memory_type.get(), H5T_STR_NULLTERM), "H5Tset_strpad", path);
  std::string buffer(size + 1, '\0');
  check_status(H5Aread(attribute.get(), memory_type.get(), buffer.data()), "H5Aread", path);
  return std::string(buffer.c_str());
}

Handle open_checked(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    throw UserError(file_label(path) + ": cannot open (no such file)");
  }
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 <= 0) throw UserError(file_label(path) + ": cannot open (not an HDF5 file)");
  Handle file = make_handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, "H5Fopen", path);
  const std::string format = read_string_attribute(file.get(), "format", path);
  if (format != kFormatName) {
    throw FormatError(path, "attribute 'format' is '" + format + "', expected '" + kFormatName + "'");
  }
  return file;
}

herr_t collect_name(hid_t, const char* name, const H5L_info_t*, void* names) {
  static_cast<std::vector<std::string>*>(names)->emplace_back(name);
  return 0;
}

herr_t collect_attribute_name(hid_t, const char* name, const H5A_info_t*, void* names) {
  static_cast<std::vector<std::string>*>(names)->emplace_back(name);
  return 0;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

void write_param_file(const std::string& path, MPI_Comm comm, const std::vector<TensorSlice>& tensors,
                      const std::vector<std::pair<std::string, int64_t>>& int_attributes,
                      const std::vector<std::pair<std::string, std::string>>& string_attributes) {
  const QuietHdf5Errors quiet;
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  collective_stage(comm, path, [&] { check_local(tensors, path); });
  const std::vector<Holding> holdings = gather_holdings(comm, tensors);
  std::vector<Plan> plans;
  collective_stage(comm, path, [&] { plans = make_plan(holdings, rank, tensors, path); });

  const std::string temporary = path + ".tmp";
  try {
    write_file(temporary, path, comm, plans, tensors, int_attributes, string_attributes);
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
    }
  }
  agree_or_throw(comm, error);
  MPI_Barrier(comm);
}

std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> read_param_file(const std::string& path) {
  const QuietHdf5Errors quiet;
  Handle file = open_checked(path);
  std::vector<std::string> names;
  check_status(H5Literate(file.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_name, &names), "H5Literate",
               path);
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> result;
  for (const std::string& name : names) {
    const hid_t id = H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT);
    if (id < 0) throw FormatError(path, "'" + name + "' is not a dataset");
    Handle dataset(id, H5Dclose);
    Handle type = make_handle(H5Dget_type(dataset.get()), H5Tclose, "H5Dget_type", path);
    if (H5Tget_class(type.get()) != H5T_FLOAT) throw FormatError(path, "dataset '" + name + "' is not float");
    Handle space = make_handle(H5Dget_space(dataset.get()), H5Sclose, "H5Dget_space", path);
    const int rank = H5Sget_simple_extent_ndims(space.get());
    check_status(rank, "H5Sget_simple_extent_ndims", path);
    std::vector<hsize_t> dims(static_cast<size_t>(rank));
    if (rank > 0) check_status(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), "H5Sget_simple_extent_dims", path);
    std::vector<int64_t> shape;
    for (const hsize_t d : dims) shape.push_back(static_cast<int64_t>(d));
    std::vector<float> values(static_cast<size_t>(element_count(shape)));
    if (!values.empty()) {
      check_status(H5Dread(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), "H5Dread",
                   path);
    }
    result.emplace(name, std::make_pair(std::move(shape), std::move(values)));
  }
  return result;
}

std::map<std::string, int64_t> read_param_file_int_attributes(const std::string& path) {
  const QuietHdf5Errors quiet;
  Handle file = open_checked(path);
  std::vector<std::string> names;
  check_status(H5Aiterate2(file.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_attribute_name, &names),
               "H5Aiterate2", path);
  std::map<std::string, int64_t> result;
  for (const std::string& name : names) {
    Handle attribute = make_handle(H5Aopen(file.get(), name.c_str(), H5P_DEFAULT), H5Aclose, "H5Aopen", path);
    Handle type = make_handle(H5Aget_type(attribute.get()), H5Tclose, "H5Aget_type", path);
    if (H5Tget_class(type.get()) != H5T_INTEGER) continue;
    Handle space = make_handle(H5Aget_space(attribute.get()), H5Sclose, "H5Aget_space", path);
    if (H5Sget_simple_extent_npoints(space.get()) != 1) continue;
    int64_t value = 0;
    check_status(H5Aread(attribute.get(), H5T_NATIVE_INT64, &value), "H5Aread", path);
    result.emplace(name, value);
  }
  return result;
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
