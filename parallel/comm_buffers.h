// The memory the gradient reductions' communicators keep for themselves, predicted from the
// layout, so that `trident check` and the start-up memory table count it before a launch.
//
// Only the gradient reductions are counted: the data group's (buckets, and ZeRO-1's parameter
// all-gather) and the embedding group's (the tied token embedding's gradient, summed between the
// first and last pipeline stages). They are the buffers that grow
// with the model: 2 to 6 bytes per parameter. Activation messages (tensor and pipeline groups)
// are in place over MPI and NCCL; staged through host memory they take one activation's copy.
//
// Each communicator's buffer_bytes() (comm.h) reports what it really holds; tests compare.
#pragma once

#include <cstddef>
#include <vector>

#include "parallel/comm.h"

namespace trident::parallel {

// How a rank's groups talk: MPI on host memory (the CPU backend), NCCL on device memory, or MPI
// on host copies of device buffers (HostStagedComm, parallel.comm = mpi on GPUs).
enum class CommTransport { kMpi, kNccl, kMpiStaged };

struct GradientReductionPlan {
  std::vector<std::size_t> tensor_ends;  // the stage's parameter table (ParamTable::tensor_ends)
  std::size_t padded_size = 0;           // the gradient arena, padded for ZeRO (zero_shard.h)
  std::size_t bucket_elems = 0;          // parallel.bucket_mb in floats
  int dp = 1;
  bool zero = false;                     // parallel.zero = 1
  bool overlap_param_gather = false;     // parallel.overlap_param_gather (ZeRO-1)
  WirePrecision wire = WirePrecision::kFp32;                // parallel.grad_reduce, resolved
  kernels::Precision parameters = kernels::Precision::kFp32;  // the parameter arena's storage
  std::size_t tied_embedding = 0;  // elements of wte summed over the embedding group (pp > 1 on
                                   // the first and last stages), else 0
};

// What the data and embedding groups' communicators hold after a step, as buffer_bytes()
// reports it.
CommBufferBytes gradient_comm_buffers(const GradientReductionPlan& plan, CommTransport transport);

}  // namespace trident::parallel
