// Boxes (HDF5 hyperslabs) of a row-major tensor: the pieces a rank reads or writes.
//
// A rank holds a slice of a tensor (one split axis) and reads or writes a contiguous flat range
// of its local elements (a ZeRO-1 shard, or its band of a data-parallel replica). A flat range
// is not one hyperslab, but it is a few: a partial first row, whole rows, a partial last row,
// recursively per dimension (at most 2 * rank - 1 boxes). Listed in order, the boxes' elements
// are the range's elements in order, so one contiguous buffer maps onto them.
#pragma once

#include <cstdint>
#include <vector>

namespace trident::io {

struct Box {
  std::vector<int64_t> start;  // per dimension
  std::vector<int64_t> count;
  int64_t volume() const;
};

// The boxes of local elements [begin, begin + count) of a row-major tensor of `shape`, in the
// tensor's own coordinates, in element order. Requires 0 <= begin, begin + count <= volume.
std::vector<Box> flat_range_boxes(const std::vector<int64_t>& shape, int64_t begin, int64_t count);

// Moves boxes of a slice's local coordinates to the global tensor: + slice_begin on split_axis
// (split_axis -1: unchanged). Element order is kept: a slice's row-major order is the order
// of its elements in the global tensor.
void shift_to_global(std::vector<Box>& boxes, int split_axis, int64_t slice_begin);

// Cuts boxes into pieces of at most max_elements each (rows of the outermost dimension with
// more than one index first, recursively), keeping element order.
std::vector<Box> split_boxes(const std::vector<Box>& boxes, int64_t max_elements);

// Groups consecutive pieces (each <= max_elements) into transfers of at most max_elements:
// the result is the index of the first piece of each transfer, plus pieces.size() at the end.
std::vector<std::size_t> group_transfers(const std::vector<Box>& pieces, int64_t max_elements);

// Whether two boxes of one tensor share an element.
bool boxes_intersect(const Box& a, const Box& b);

}  // namespace trident::io
