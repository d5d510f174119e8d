// The final parameters of a run, written to one parameter file (io/param_file.h,
// docs/param-file.md) with global shapes, whatever the layout.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "io/param_file.h"

#include "kernels/backend.h"
#include "parallel/parallel_context.h"
#include "src/model/gpt_config.h"
#include "src/model/param_table.h"

namespace trident::train {

// Collective over `world` (the communicator `ctx` was built over: every rank calls it).
// Copies this rank's parameters (arena `params` of `backend`, at least table.total_count()
// elements; a ZeRO-padded tail is not written) to the host and writes every tensor of `table`
// under its global name and shape. Ownership, one writer per element:
//   - only data rank 0 writes (the other data ranks hold replicas);
//   - a tensor split over the tensor group: every tensor rank writes its slice;
//   - a replicated tensor: tensor rank 0 only;
//   - a tensor held by several pipeline stages (the tied embedding): the lowest world rank
//     among its owners (io::write_param_file's rule).
// Root attributes: step, dp, tp, pp, vocab, padded_vocab. Throws io::UserError naming the file
// on every rank when it cannot be written.
// This rank's tensors of `table` as slices of `host` (a host copy of the arena), named
// prefix + global name, with the ownership rule above.
std::vector<io::TensorSlice> owned_slices(const model::ParamTable& table, const float* host, const std::string& prefix,
                                          const parallel::GridCoord& coord);

// The root attributes every parameter and checkpoint file carries.
std::vector<std::pair<std::string, int64_t>> layout_attributes(const parallel::RankGrid& grid, int64_t step,
                                                               const model::GptConfig& model_config);

void write_final_parameters(const std::string& path, const model::ParamTable& table, const float* params,
                            kernels::Backend& backend, const parallel::ParallelContext& ctx, int64_t step,
                            const model::GptConfig& model_config, MPI_Comm world);

}  // namespace trident::train
