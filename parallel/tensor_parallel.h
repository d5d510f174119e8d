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
//
// Sequence parallelism (Megatron-LM's second pair) replaces them where the activations outside
// the matmuls are split by rows: a full [N, C] buffer is tp consecutive blocks of `count` =
// (N / tp) * C floats, and tensor rank r owns block r (rows [r N/tp, (r+1) N/tp)).
//
//   gather_from_sp  forward: all-gather (every rank's rows to every rank; replaces copy_to_tp)
//                   backward: reduce-scatter (each rank's gradient of the full rows is partial;
//                   it keeps the sum over the group of its own rows)
//   scatter_to_sp   forward: reduce-scatter (each rank's output of the full rows is partial; it
//                   keeps the sum of its own rows; replaces reduce_from_tp)
//                   backward: all-gather
//
// A reduce-scatter and an all-gather move the same bytes as one all-reduce. The sequence-
// parallel operators need a tensor group (a Comm, of any size).
#pragma once

#include <cstddef>
#include <stdexcept>

#include "kernels/act_ptr.h"
#include "parallel/comm.h"

namespace trident::parallel {

class TensorParallel {
 public:
  // comm: the tensor group (may be null for a single rank).
  explicit TensorParallel(Comm* comm) : comm_(comm) {}
  int size() const { return comm_ ? comm_->size() : 1; }
  int rank() const { return comm_ ? comm_->rank() : 0; }
  bool active() const { return size() > 1; }

  // The activations are ActPtr (kernels/act_ptr.h) and move in their storage precision: 16-bit
  // buffers travel and sum as 16 bits (comm.h), as Megatron-LM's bf16 all-reduces do. Counts
  // are elements.
  void copy_to_tp_forward(kernels::ActPtr, std::size_t) const {}
  void copy_to_tp_backward(kernels::ActPtr grad, std::size_t count) const {
    if (active()) comm_->all_reduce_sum(grad, count);
  }
  void reduce_from_tp_forward(kernels::ActPtr partial, std::size_t count) const {
    if (active()) comm_->all_reduce_sum(partial, count);
  }
  void reduce_from_tp_backward(kernels::ActPtr, std::size_t) const {}

  // This rank's block of a full buffer of tp blocks of `count` elements.
  kernels::ActPtr own_block(kernels::ActPtr full, std::size_t count) const {
    return full + static_cast<std::size_t>(rank()) * count;
  }

  // In place over full[count * size]: the own block, filled by the caller, is copied to all.
  void gather_from_sp_forward(kernels::ActPtr full, std::size_t count) const {
    group().all_gather_in_place(full, count);
  }
  // In place over full_grad[count * size]: afterwards the own block holds the group's sum of
  // that block; the other blocks are unspecified.
  void gather_from_sp_backward(kernels::ActPtr full_grad, std::size_t count) const {
    group().reduce_scatter_sum_in_place(full_grad, count, full_grad.storage());
  }
  // own[count] = the group's sum of the own block of partial_full[count * size].
  void scatter_to_sp_forward(kernels::ConstActPtr partial_full, kernels::ActPtr own, std::size_t count) const {
    group().reduce_scatter_sum(partial_full, own, count);
  }
  // full_grad[count * size] = every rank's own_grad[count], in rank order.
  void scatter_to_sp_backward(kernels::ConstActPtr own_grad, kernels::ActPtr full_grad, std::size_t count) const {
    group().all_gather(own_grad, full_grad, count);
  }

  // In place over data[count * size]: the own block, filled by the caller, is copied to all (the
  // vocabulary-parallel cross-entropy's row statistics).
  void all_gather_in_place(float* data, std::size_t count) const {
    if (active()) comm_->all_gather_in_place(data, count);
  }
  // In-place sum over the group (partial gradients of the parameters that sequence parallelism
  // replicates).
  void all_reduce_sum(float* data, std::size_t count) const {
    if (active()) comm_->all_reduce_sum(data, count);
  }

 private:
  Comm& group() const {
    if (comm_ == nullptr) throw std::logic_error("TensorParallel: sequence parallelism needs a tensor group");
    return *comm_;
  }
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
