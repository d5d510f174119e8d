// ParamTable: every parameter tensor of this rank as a view into one contiguous arena.
//
// A tensor has a global name and shape, and this rank's slice of it along at most one split
// axis (tensor parallelism; the whole tensor while tp = 1). The same table drives
// initialisation, the optimiser (same offsets in the gradient and moment arenas), gradient
// buckets, the gradient norm, the memory report and, later, checkpoint hyperslabs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trident::model {

enum class InitKind { kNormal, kZeros, kOnes };

struct TensorSpec {
  std::string name;
  std::vector<int64_t> global_shape;
  int split_axis = -1;        // -1: this rank holds the whole tensor
  int64_t slice_begin = 0;    // this rank's range along split_axis
  int64_t slice_extent = 0;
  InitKind init = InitKind::kZeros;
  float init_std = 0.0f;      // for kNormal
  int64_t init_rows = -1;     // kNormal only for global rows < init_rows (axis 0), zero beyond:
                              // the padded vocabulary rows of the embedding stay zero
  bool weight_decay = false;  // true for matrices and embedding tables; false for biases, norms
};

struct ParamTensor {
  TensorSpec spec;
  std::vector<int64_t> local_shape;
  std::size_t offset = 0;  // into the arena, in elements
  std::size_t count = 0;   // local elements
};

class ParamTable {
 public:
  // Appends a tensor; returns its index. Tensors are laid out in the order added.
  std::size_t add(TensorSpec spec);
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  const ParamTensor& tensor(std::size_t index) const { return tensors_[index]; }
  const ParamTensor& find(const std::string& name) const;  // throws std::out_of_range
  std::size_t total_count() const { return total_; }
  // Arena end offset of every tensor, ascending (for bucket planning).
  std::vector<std::size_t> tensor_ends() const;
  // The global linear index of local element `local_index` of tensor `t`.
  int64_t global_index(const ParamTensor& t, std::size_t local_index) const;

 private:
  std::vector<ParamTensor> tensors_;
  std::size_t total_ = 0;
};

// Fills host_arena[total_count()] with the initial values for `seed`: element e of tensor
// NAME gets N(0, std) from the counter RNG keyed by (seed, NAME) at e's GLOBAL index, so every
// layout initialises the same model.
void initialize_parameters(const ParamTable& table, uint64_t seed, float* host_arena);
// The same values for local elements [begin, begin + count) of one tensor, into out[count]:
// lets a caller initialise a large model through a small host buffer.
void initialize_tensor_range(const ParamTable& table, const ParamTensor& t, uint64_t seed, std::size_t begin,
                             std::size_t count, float* out);

}  // namespace trident::model
