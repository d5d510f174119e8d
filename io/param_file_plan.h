// Who writes what in a parameter file (docs/param-file.md, "Who writes what"): the union of every
// rank's tensors, checked for consistency, and each rank's part in each dataset. Internals of
// io/param_file_write.cpp (not part of io's API).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/param_file.h"    // TensorSlice
#include "io/tensor_boxes.h"  // Box

namespace trident::io::param_file_detail {

// One rank's holding of one tensor, as every rank sees it after the all-gather.
struct Holding {
  std::string name;
  std::vector<int64_t> shape;
  int axis = -1;  // -1, or normalised to -1 when the slice is the whole axis
  int64_t begin = 0, extent = 0;
  bool write = false;
  int64_t write_begin = 0, write_count = 0;  // normalised: count >= 0
  int rank = 0;

  std::vector<int64_t> local_shape() const;
  // The elements it writes, as boxes of the global tensor in element order.
  std::vector<Box> global_boxes() const;
  bool same_part(const Holding& o) const;
};

// One dataset of the file, and this rank's part in it.
struct Plan {
  std::string name;
  std::vector<int64_t> shape;
  int local = -1;       // index into this rank's tensors, or -1 when it holds none of it
  bool writes = false;  // this rank writes its part
  size_t transfers = 0; // collective H5Dwrite calls: the most any writer needs
};

// This rank's tensors are well formed (names, shapes, slices, write ranges); UserError otherwise.
void check_local(const std::vector<TensorSlice>& tensors, const std::string& path);

// Every rank's holdings, gathered without repeating what ranks share. A rank's list (the names,
// shapes and slices of what it holds, not what it writes) travels once for all the ranks that
// hold the same list: the data-parallel replicas of one tensor and pipeline coordinate do. Then
// each rank's written parts, which are few per rank (the trainer's data-parallel bands split
// the arena). So what every rank receives grows with the distinct lists and the written parts,
// not with ranks x tensors (perf/bench_param_file_plan.cpp measures both).
struct GatheredHoldings {
  // Each distinct list once, in order of its lowest rank, as that rank holds it (rank: that
  // rank; write false).
  std::vector<Holding> held;
  // Every part a rank writes (write and at least one element), in world-rank order.
  std::vector<Holding> written;
};

// The wire form, apart from MPI, so that a benchmark or a test can make it for ranks that do
// not exist. A rank's list, the bytes two ranks compare (through list_key) to share one:
std::vector<char> held_list_bytes(const std::vector<TensorSlice>& tensors);
// The key of a list: its FNV-1a 64-bit hash and its size in bytes. Two different lists with one
// key (about 1 in 2^64 for a pair) would share one list: a wrong plan, not a crash.
struct ListKey {
  uint64_t hash = 0, size = 0;
  bool operator<(const ListKey& o) const { return hash != o.hash ? hash < o.hash : size < o.size; }
};
ListKey list_key(const std::vector<char>& list_bytes);
// For each rank, the lowest rank with the same key.
std::vector<int> lowest_holders(const std::vector<ListKey>& keys);
// What a rank sends: its list (only when it is the lowest rank holding it) and its written
// parts, each as an index into the list and a flat range.
std::vector<char> holdings_message(const std::vector<TensorSlice>& tensors, const std::vector<char>& list_bytes,
                                   bool with_list);
// Every rank's message, concatenated in rank order (bytes[r] each), read back.
GatheredHoldings parse_holdings(const std::vector<char>& all, const std::vector<int>& bytes,
                                const std::vector<int>& lowest);

// Collective over `comm`: the keys all-gathered, then the messages; the same on every rank.
GatheredHoldings gather_holdings(MPI_Comm comm, const std::vector<TensorSlice>& tensors);

// The datasets in order of first appearance by ascending world rank, and this rank's part in
// each. The same on every rank (it only reads the gathered holdings), so every rank throws
// the same error when the slices are inconsistent.
std::vector<Plan> make_plan(const GatheredHoldings& holdings, int my_rank,
                            const std::vector<TensorSlice>& tensors, int64_t max_elements, const std::string& path);

// This rank's pieces of one tensor, in element order (each at most max_elements).
std::vector<Box> my_pieces(const TensorSlice& t, int64_t max_elements);

}  // namespace trident::io::param_file_detail
