// Who writes what in a parameter file: io/param_file_plan.h.
#include "io/param_file_plan.h"

#include <algorithm>  // std::max
#include <cstring>    // std::memcpy
#include <map>
#include <set>
#include <stdexcept>  // std::logic_error
#include <string>
#include <utility>  // std::move

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

bool boxes_overlap(const std::vector<Box>& a, const std::vector<Box>& b) {
  for (const Box& x : a) {
    for (const Box& y : b) {
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
  std::set<std::string> names;  // a checkpoint lists thousands of tensors: not pair by pair
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorSlice& t = tensors[i];
    if (t.name.empty() || t.name == "." || t.name.find('/') != std::string::npos) {
      throw UserError(where + t.name + "': not a valid dataset name (empty, '.' or containing '/')");
    }
    if (!names.insert(t.name).second) throw UserError(where + t.name + "' is listed twice by one rank");
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

std::vector<char> held_list_bytes(const std::vector<TensorSlice>& tensors) {
  std::vector<char> list;
  put<uint64_t>(list, tensors.size());
  for (const TensorSlice& t : tensors) {
    put<uint64_t>(list, t.name.size());
    list.insert(list.end(), t.name.begin(), t.name.end());
    put<uint64_t>(list, t.global_shape.size());
    for (const int64_t d : t.global_shape) put<int64_t>(list, d);
    put<int32_t>(list, t.split_axis);
    put<int64_t>(list, t.slice_begin);
    put<int64_t>(list, t.slice_extent);
  }
  return list;
}

ListKey list_key(const std::vector<char>& list_bytes) {
  uint64_t hash = 14695981039346656037ULL;  // FNV-1a 64
  for (const char c : list_bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  return {hash, list_bytes.size()};
}

std::vector<int> lowest_holders(const std::vector<ListKey>& keys) {
  std::map<ListKey, int> first;
  std::vector<int> lowest(keys.size());
  for (size_t r = 0; r < keys.size(); ++r) lowest[r] = first.emplace(keys[r], static_cast<int>(r)).first->second;
  return lowest;
}

std::vector<char> holdings_message(const std::vector<TensorSlice>& tensors, const std::vector<char>& list_bytes,
                                   bool with_list) {
  std::vector<size_t> parts;  // the tensors this rank writes elements of
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].write && written_count(tensors[i]) > 0) parts.push_back(i);
  }
  // Sized, then copied into: GCC 12 takes vector::insert after a 1-byte put for a write past
  // the buffer (-Warray-bounds), which it is not.
  const size_t list_size = with_list ? list_bytes.size() : 0;
  std::vector<char> message(1 + list_size);
  message[0] = static_cast<char>(with_list ? 1 : 0);
  if (list_size > 0) std::memcpy(message.data() + 1, list_bytes.data(), list_size);
  put<uint64_t>(message, parts.size());
  for (const size_t i : parts) {
    const TensorSlice& t = tensors[i];
    put<uint64_t>(message, i);
    put<int64_t>(message, t.write_begin);
    put<int64_t>(message, written_count(t));
  }
  return message;
}

GatheredHoldings parse_holdings(const std::vector<char>& all, const std::vector<int>& bytes,
                                const std::vector<int>& lowest) {
  GatheredHoldings gathered;
  // Where each lowest rank's list sits in gathered.held.
  std::vector<size_t> list_begin(bytes.size(), 0), list_size(bytes.size(), 0);
  size_t at = 0;
  for (size_t r = 0; r < bytes.size(); ++r) {
    const bool has_list = take<uint8_t>(all, at) != 0;
    if (has_list != (lowest[r] == static_cast<int>(r))) {
      throw std::logic_error("parse_holdings: rank " + std::to_string(r) + "'s list is not where its key says");
    }
    if (has_list) {
      list_begin[r] = gathered.held.size();
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
        h.rank = static_cast<int>(r);
        if (h.axis >= 0 && h.begin == 0 && h.extent == h.shape[static_cast<size_t>(h.axis)]) h.axis = -1;
        if (h.axis < 0) {
          h.begin = 0;
          h.extent = 0;
        }
        gathered.held.push_back(std::move(h));
      }
      list_size[r] = static_cast<size_t>(count);
    }
    const auto list = static_cast<size_t>(lowest[r]);
    const auto parts = take<uint64_t>(all, at);
    for (uint64_t k = 0; k < parts; ++k) {
      const auto index = take<uint64_t>(all, at);
      if (index >= list_size[list]) {
        throw std::logic_error("parse_holdings: rank " + std::to_string(r) + " writes past its list");
      }
      Holding h = gathered.held[list_begin[list] + index];
      h.rank = static_cast<int>(r);
      h.write = true;
      h.write_begin = take<int64_t>(all, at);
      h.write_count = take<int64_t>(all, at);
      gathered.written.push_back(std::move(h));
    }
  }
  return gathered;
}

GatheredHoldings gather_holdings(MPI_Comm comm, const std::vector<TensorSlice>& tensors) {
  int size = 0, rank = 0;
  TRIDENT_MPI_CHECK(MPI_Comm_size(comm, &size));
  TRIDENT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  const std::vector<char> list = held_list_bytes(tensors);
  const ListKey key = list_key(list);
  std::vector<ListKey> keys(static_cast<size_t>(size));
  const uint64_t mine_key[2] = {key.hash, key.size};
  std::vector<uint64_t> all_keys(2 * keys.size());
  TRIDENT_MPI_CHECK(MPI_Allgather(mine_key, 2, MPI_UINT64_T, all_keys.data(), 2, MPI_UINT64_T, comm));
  for (size_t r = 0; r < keys.size(); ++r) keys[r] = {all_keys[2 * r], all_keys[2 * r + 1]};
  const std::vector<int> lowest = lowest_holders(keys);

  const std::vector<char> mine = holdings_message(tensors, list, lowest[static_cast<size_t>(rank)] == rank);
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
  return parse_holdings(all, bytes, lowest);
}

std::vector<Plan> make_plan(const GatheredHoldings& holdings, int my_rank, const std::vector<TensorSlice>& tensors,
                            int64_t max_elements, const std::string& path) {
  std::vector<Plan> plans;
  std::map<std::string, size_t> index;
  std::vector<int> first_holder;
  // Ranks that share a list add no name and no shape to the lowest one's, so the held lists
  // alone give the datasets' order and the shape check the same answer as every rank's would.
  for (const Holding& h : holdings.held) {
    auto [it, added] = index.emplace(h.name, plans.size());
    if (added) {
      plans.push_back(Plan{h.name, h.shape, -1, false, 0});
      first_holder.push_back(h.rank);
    } else if (plans[it->second].shape != h.shape) {
      throw UserError(file_label(path) + ": tensor '" + h.name + "' has different global shapes on ranks " +
                      std::to_string(first_holder[it->second]) + " and " + std::to_string(h.rank));
    }
  }
  std::vector<std::vector<const Holding*>> parts(plans.size());
  for (const Holding& h : holdings.written) parts[index.at(h.name)].push_back(&h);
  std::map<std::string, int> local;
  for (size_t i = 0; i < tensors.size(); ++i) local.emplace(tensors[i].name, static_cast<int>(i));
  for (size_t p = 0; p < plans.size(); ++p) {
    Plan& plan = plans[p];
    const auto mine = local.find(plan.name);
    if (mine != local.end()) plan.local = mine->second;
    if (element_count(plan.shape) == 0) continue;  // nothing to write
    // The owners, lowest world rank first; an owner of exactly the part a lower owner already
    // writes writes nothing.
    // Each writer's boxes are made once: a tensor split into data-parallel bands has a writer
    // per band (hundreds for the token embedding at dp = 128), each compared with every other.
    std::vector<const Holding*> writers;
    std::vector<std::vector<Box>> writer_boxes;
    for (const Holding* h : parts[p]) {
      bool duplicate = false;
      std::vector<Box> boxes = h->global_boxes();
      for (size_t k = 0; k < writers.size(); ++k) {
        const Holding* w = writers[k];
        if (h->same_part(*w)) {
          duplicate = true;
          break;
        }
        if (boxes_overlap(boxes, writer_boxes[k])) {
          throw UserError(file_label(path) + ": tensor '" + plan.name + "': ranks " + std::to_string(w->rank) +
                          " and " + std::to_string(h->rank) + " own overlapping slices (" + part_text(*w) +
                          "; " + part_text(*h) + ")");
        }
      }
      if (!duplicate) {
        writers.push_back(h);
        writer_boxes.push_back(std::move(boxes));
      }
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
