// Who writes what in a parameter file: io/param_file_plan.h.
#include "io/param_file_plan.h"

#include <algorithm>  // std::max
#include <cstring>    // std::memcpy
#include <map>

#include "io/param_file_common.h"  // file_label, element_count
#include "io/user_error.h"
#include "mpi_support/mpi_check.h"

namespace trident::io::param_file_detail {
namespace {

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

}  // namespace

std::vector<int64_t> Holding::local_shape() const {
  std::vector<int64_t> local = shape;
  if (axis >= 0) local[static_cast<size_t>(axis)] = extent;
  return local;
}

std::vector<Box> Holding::global_boxes() const {
  std::vector<Box> boxes = flat_range_boxes(local_shape(), write_begin, write_count);
  shift_to_global(boxes, axis, begin);
  return boxes;
}

bool Holding::same_part(const Holding& o) const {
  return axis == o.axis && begin == o.begin && extent == o.extent && write_begin == o.write_begin &&
         write_count == o.write_count;
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
  TRIDENT_MPI_CHECK(MPI_Comm_size(comm, &size));
  const int my_bytes = static_cast<int>(mine.size());
  std::vector<int> bytes(static_cast<size_t>(size)), displacements(static_cast<size_t>(size));
  TRIDENT_MPI_CHECK(MPI_Allgather(&my_bytes, 1, MPI_INT, bytes.data(), 1, MPI_INT, comm));
  int total = 0;
  for (size_t r = 0; r < bytes.size(); ++r) {
    displacements[r] = total;
    total += bytes[r];
  }
  std::vector<char> all(static_cast<size_t>(total));
  TRIDENT_MPI_CHECK(MPI_Allgatherv(mine.data(), my_bytes, MPI_CHAR, all.data(), bytes.data(), displacements.data(),
                                   MPI_CHAR, comm));

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

std::vector<Box> my_pieces(const TensorSlice& t, int64_t max_elements) {
  std::vector<int64_t> local = t.global_shape;
  if (t.split_axis >= 0) local[static_cast<size_t>(t.split_axis)] = t.slice_extent;
  std::vector<Box> boxes = flat_range_boxes(local, t.write_begin, written_count(t));
  shift_to_global(boxes, t.split_axis, t.slice_begin);
  return split_boxes(boxes, max_elements);
}

}  // namespace trident::io::param_file_detail
