// Tensor parallelism's paired operators (Megatron-LM), over the tensor group:
//
//   copy_to_tp      forward: identity (every rank uses the same, replicated input)
//                   backward: all-reduce (each rank's input gradient is a partial sum)
//   reduce_from_tp  forward: all-reduce (each rank's output is a partial sum)
//                   backward: identity (every rank receives the same output gradient)
//
// Each is the other's dual, so model code that places them around the column- and row-parallel
// matmuls reads like the single-device model. With one tensor rank every operator is the
// identity. Buffers are the backend's device memory; MpiComm works on host memory, which is
// what the CPU backend has.
#pragma once

#include <cstddef>

#include "parallel/comm.h"

namespace trident::parallel {

class TensorParallel {
 public:
  // comm: the tensor group (may be null for a single rank).
  explicit TensorParallel(Comm* comm) : comm_(comm) {}
  int size() const { return comm_ ? comm_->size() : 1; }
  int rank() const { return comm_ ? comm_->rank() : 0; }
  bool active() const { return size() > 1; }

  void copy_to_tp_forward(float*, std::size_t) const {}
  void copy_to_tp_backward(float* grad, std::size_t count) const {
    if (active()) comm_->all_reduce_sum(grad, count);
  }
  void reduce_from_tp_forward(float* partial, std::size_t count) const {
    if (active()) comm_->all_reduce_sum(partial, count);
  }
  void reduce_from_tp_backward(float*, std::size_t) const {}

  // For the vocabulary-parallel cross-entropy: per-row statistics combined over the group.
  void all_reduce_max(float* data, std::size_t count) const {
    if (active()) comm_->all_reduce_max(data, count);
  }
  void all_reduce_sum(float* data, std::size_t count) const {
    if (active()) comm_->all_reduce_sum(data, count);
  }

 private:
  Comm* comm_;
};

// The vocabulary rows a tensor rank owns: [begin, end) of the padded vocabulary, of which the
// first `real` are real tokens (ids < vocab) and the rest padding. Requires padded_vocab to be
// a multiple of tp (the deck pads it so).
struct VocabShard {
  int begin = 0;
  int end = 0;
  int real = 0;
  int size() const { return end - begin; }
};
VocabShard vocab_shard(int padded_vocab, int vocab, int tp, int tp_rank);

}  // namespace trident::parallel
