#include "io/tensor_boxes.h"

#include <algorithm>
#include <cstddef>

namespace trident::io {

namespace {

int64_t product(const std::vector<int64_t>& v, std::size_t from) {
  int64_t p = 1;
  for (std::size_t i = from; i < v.size(); ++i) p *= v[i];
  return p;
}

// Elements [s, e) of the sub-tensor at dimension d, whose outer indices are fixed by `box`
// (start set, count 1 for dimensions < d).
void decompose(const std::vector<int64_t>& shape, std::size_t d, Box box, int64_t s, int64_t e,
               std::vector<Box>& out) {
  if (s >= e) return;
  const int64_t stride = product(shape, d + 1);
  if (s % stride == 0 && e % stride == 0) {  // whole rows of dimension d
    box.start[d] = s / stride;
    box.count[d] = (e - s) / stride;
    for (std::size_t k = d + 1; k < shape.size(); ++k) {
      box.start[k] = 0;
      box.count[k] = shape[k];
    }
    out.push_back(std::move(box));
    return;
  }
  const int64_t first = s / stride, last = (e - 1) / stride;
  auto inner = [&](int64_t index, int64_t from, int64_t to) {
    Box sub = box;
    sub.start[d] = index;
    sub.count[d] = 1;
    decompose(shape, d + 1, std::move(sub), from, to, out);
  };
  if (first == last) {
    inner(first, s - first * stride, e - first * stride);
    return;
  }
  int64_t whole_begin = first, whole_end = last + 1;
  if (s % stride != 0) {
    inner(first, s - first * stride, stride);
    whole_begin = first + 1;
  }
  if (e % stride != 0) whole_end = last;
  if (whole_end > whole_begin) decompose(shape, d, box, whole_begin * stride, whole_end * stride, out);
  if (e % stride != 0) inner(last, 0, e - last * stride);
}

void split_one(const Box& box, int64_t max_elements, std::vector<Box>& out) {
  if (box.volume() <= max_elements) {
    out.push_back(box);
    return;
  }
  std::size_t d = 0;
  while (d < box.count.size() && box.count[d] == 1) ++d;
  const int64_t inner = product(box.count, d + 1);
  if (inner <= max_elements) {
    const int64_t rows = max_elements / inner;
    for (int64_t r = 0; r < box.count[d]; r += rows) {
      Box piece = box;
      piece.start[d] = box.start[d] + r;
      piece.count[d] = std::min(rows, box.count[d] - r);
      out.push_back(std::move(piece));
    }
    return;
  }
  for (int64_t r = 0; r < box.count[d]; ++r) {
    Box row = box;
    row.start[d] = box.start[d] + r;
    row.count[d] = 1;
    split_one(row, max_elements, out);
  }
}

}  // namespace

int64_t Box::volume() const { return product(count, 0); }

std::vector<Box> flat_range_boxes(const std::vector<int64_t>& shape, int64_t begin, int64_t count) {
  std::vector<Box> out;
  if (count <= 0) return out;
  if (shape.empty()) {  // a scalar: the one element
    out.push_back(Box{});
    return out;
  }
  Box box{std::vector<int64_t>(shape.size(), 0), std::vector<int64_t>(shape.size(), 1)};
  decompose(shape, 0, std::move(box), begin, begin + count, out);
  return out;
}

void shift_to_global(std::vector<Box>& boxes, int split_axis, int64_t slice_begin) {
  if (split_axis < 0) return;
  for (Box& b : boxes) b.start[static_cast<std::size_t>(split_axis)] += slice_begin;
}

std::vector<Box> split_boxes(const std::vector<Box>& boxes, int64_t max_elements) {
  std::vector<Box> out;
  for (const Box& b : boxes) split_one(b, std::max<int64_t>(max_elements, 1), out);
  return out;
}

std::vector<std::size_t> group_transfers(const std::vector<Box>& pieces, int64_t max_elements) {
  std::vector<std::size_t> firsts;
  int64_t in_transfer = 0;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const int64_t v = pieces[i].volume();
    if (firsts.empty() || in_transfer + v > max_elements) {
      firsts.push_back(i);
      in_transfer = 0;
    }
    in_transfer += v;
  }
  firsts.push_back(pieces.size());
  return firsts;
}

bool boxes_intersect(const Box& a, const Box& b) {
  for (std::size_t d = 0; d < a.start.size(); ++d) {
    if (a.start[d] >= b.start[d] + b.count[d] || b.start[d] >= a.start[d] + a.count[d]) return false;
  }
  return a.volume() > 0 && b.volume() > 0;
}

}  // namespace trident::io
