// Boxes of flat ranges (io/tensor_boxes.h) against a brute-force enumeration, and checksums
// (io/tensor_checksum.h) that do not depend on how a tensor is tiled.
#include "io/tensor_boxes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "io/tensor_checksum.h"

namespace trident::io {
namespace {

// Every element of `boxes` as a linear index of `shape`, in the boxes' order.
std::vector<int64_t> linear_indices(const std::vector<int64_t>& shape, const std::vector<Box>& boxes) {
  std::vector<int64_t> out;
  for (const Box& b : boxes) {
    std::vector<int64_t> index(shape.size(), 0);
    for (int64_t n = 0; n < b.volume(); ++n) {
      int64_t linear = 0;
      for (size_t d = 0; d < shape.size(); ++d) linear = linear * shape[d] + b.start[d] + index[d];
      out.push_back(linear);
      for (size_t d = shape.size(); d-- > 0;) {
        if (++index[d] < b.count[d]) break;
        index[d] = 0;
      }
    }
  }
  return out;
}

TEST(TensorBoxes, EveryFlatRangeIsItsElementsInOrderInFewBoxes) {
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{7}, {3, 5}, {2, 3, 4}, {3, 1, 4, 2}}) {
    int64_t volume = 1;
    for (const int64_t d : shape) volume *= d;
    for (int64_t begin = 0; begin <= volume; ++begin) {
      for (int64_t count = 0; begin + count <= volume; ++count) {
        const std::vector<Box> boxes = flat_range_boxes(shape, begin, count);
        std::vector<int64_t> expected;
        for (int64_t i = begin; i < begin + count; ++i) expected.push_back(i);
        ASSERT_EQ(linear_indices(shape, boxes), expected) << "range " << begin << "+" << count;
        EXPECT_LE(boxes.size(), 2 * shape.size() - 1);
      }
    }
  }
}

TEST(TensorBoxes, SplittingKeepsOrderAndBoundsEveryPieceAndTransfer) {
  const std::vector<int64_t> shape{5, 6, 7};
  const std::vector<Box> boxes = flat_range_boxes(shape, 11, 150);
  for (const int64_t limit : {1, 3, 7, 10, 42, 1000}) {
    const std::vector<Box> pieces = split_boxes(boxes, limit);
    EXPECT_EQ(linear_indices(shape, pieces), linear_indices(shape, boxes)) << limit;
    for (const Box& p : pieces) EXPECT_LE(p.volume(), limit);
    const std::vector<size_t> firsts = group_transfers(pieces, limit);
    ASSERT_GE(firsts.size(), 2u);
    EXPECT_EQ(firsts.front(), 0u);
    EXPECT_EQ(firsts.back(), pieces.size());
    for (size_t t = 0; t + 1 < firsts.size(); ++t) {
      int64_t elements = 0;
      for (size_t i = firsts[t]; i < firsts[t + 1]; ++i) elements += pieces[i].volume();
      EXPECT_LE(elements, limit);
      EXPECT_GT(elements, 0);
    }
  }
}

TEST(TensorBoxes, ShiftedSliceBoxesLandOnTheSliceInTheGlobalTensor) {
  // A [4, 6] tensor split along axis 1 into columns [2, 5): local [4, 3].
  std::vector<Box> boxes = flat_range_boxes({4, 3}, 1, 7);
  shift_to_global(boxes, 1, 2);
  EXPECT_EQ(linear_indices({4, 6}, boxes), (std::vector<int64_t>{3, 4, 8, 9, 10, 14, 15}));
}

TEST(TensorChecksum, AnyTilingGivesTheSameSumAndOneChangedElementChangesIt) {
  const std::vector<int64_t> shape{4, 6};
  std::vector<float> values(24);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * static_cast<float>(i) - 1.0f;
  const Box whole{{0, 0}, {4, 6}};
  const uint64_t reference = box_checksum(shape, whole, values.data());
  // Column slices [0, 2) and [2, 6), each hashed from its own row-major copy.
  uint64_t tiled = 0;
  for (const auto& [begin, extent] : {std::pair<int64_t, int64_t>{0, 2}, {2, 4}}) {
    std::vector<float> local;
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t c = begin; c < begin + extent; ++c) local.push_back(values[static_cast<size_t>(r * 6 + c)]);
    tiled += box_checksum(shape, Box{{0, begin}, {4, extent}}, local.data());
  }
  EXPECT_EQ(tiled, reference);
  // Moving a value to another index, or flipping one bit, changes the sum.
  std::vector<float> swapped = values;
  std::swap(swapped[3], swapped[4]);
  EXPECT_NE(box_checksum(shape, whole, swapped.data()), reference);
  for (int bit = 0; bit < 32; ++bit) {
    std::vector<float> flipped = values;
    uint32_t bits = 0;
    std::memcpy(&bits, &flipped[17], sizeof bits);
    bits ^= 1u << bit;
    std::memcpy(&flipped[17], &bits, sizeof bits);
    EXPECT_NE(box_checksum(shape, whole, flipped.data()), reference) << bit;
  }
}

}  // namespace
}  // namespace trident::io
