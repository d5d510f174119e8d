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

// Every rank's holdings in world-rank order, on every rank (collective over `comm`).
std::vector<Holding> gather_holdings(MPI_Comm comm, const std::vector<TensorSlice>& tensors);

// The datasets in order of first appearance by ascending world rank, and this rank's part in
// each. The same on every rank (it only reads the gathered holdings), so every rank throws
// the same error when the slices are inconsistent.
std::vector<Plan> make_plan(const std::vector<Holding>& holdings, int my_rank,
                            const std::vector<TensorSlice>& tensors, int64_t max_elements, const std::string& path);

// This rank's pieces of one tensor, in element order (each at most max_elements).
std::vector<Box> my_pieces(const TensorSlice& t, int64_t max_elements);

}  // namespace trident::io::param_file_detail
