#include "src/model/param_table.h"

#include <stdexcept>

#include "kernels/counter_rng.h"

namespace trident::model {

std::size_t ParamTable::add(TensorSpec spec) {
  ParamTensor t;
  t.local_shape = spec.global_shape;
  if (spec.split_axis >= 0) {
    t.local_shape[static_cast<std::size_t>(spec.split_axis)] = spec.slice_extent;
  }
  std::size_t count = 1;
  for (int64_t extent : t.local_shape) count *= static_cast<std::size_t>(extent);
  t.spec = std::move(spec);
  t.offset = total_;
  t.count = count;
  total_ += count;
  tensors_.push_back(std::move(t));
  return tensors_.size() - 1;
}

const ParamTensor& ParamTable::find(const std::string& name) const {
  for (const auto& t : tensors_) {
    if (t.spec.name == name) return t;
  }
  throw std::out_of_range("no parameter tensor named " + name);
}

std::vector<std::size_t> ParamTable::tensor_ends() const {
  std::vector<std::size_t> ends;
  ends.reserve(tensors_.size());
  for (const auto& t : tensors_) ends.push_back(t.offset + t.count);
  return ends;
}

int64_t ParamTable::global_index(const ParamTensor& t, std::size_t local_index) const {
  if (t.spec.split_axis < 0) return static_cast<int64_t>(local_index);
  // Unravel the local index, shift the split axis by the slice start, ravel globally.
  int64_t remaining = static_cast<int64_t>(local_index);
  int64_t global = 0;
  int64_t stride = 1;
  for (std::size_t d = t.local_shape.size(); d-- > 0;) {
    int64_t coordinate = remaining % t.local_shape[d];
    remaining /= t.local_shape[d];
    if (static_cast<int>(d) == t.spec.split_axis) coordinate += t.spec.slice_begin;
    global += coordinate * stride;
    stride *= t.spec.global_shape[d];
  }
  return global;
}

void initialize_tensor_range(const ParamTable& table, const ParamTensor& t, uint64_t seed, std::size_t begin,
                             std::size_t count, float* out) {
  const TensorSpec& s = t.spec;
  if (s.init != InitKind::kNormal) {
    const float value = s.init == InitKind::kOnes ? 1.0f : 0.0f;
    for (std::size_t i = 0; i < count; ++i) out[i] = value;
    return;
  }
  const uint64_t key = seed * 0x9E3779B97F4A7C15ull ^ kernels::fnv1a64(s.name);
  int64_t row_size = 1;
  for (std::size_t d = 1; d < s.global_shape.size(); ++d) row_size *= s.global_shape[d];
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < count; ++i) {
    const int64_t g = table.global_index(t, begin + i);
    const bool padded = s.init_rows >= 0 && g / row_size >= s.init_rows;
    out[i] = padded ? 0.0f : s.init_std * kernels::counter_normal(key, static_cast<uint64_t>(g));
  }
}

void initialize_parameters(const ParamTable& table, uint64_t seed, float* host_arena) {
  for (const auto& t : table.tensors()) initialize_tensor_range(table, t, seed, 0, t.count, host_arena + t.offset);
}

}  // namespace trident::model
