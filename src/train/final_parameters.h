// Parameter files of a run (io/param_file.h, docs/param-file.md): which elements this rank
// writes, and the final parameters written with global shapes, whatever the layout.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "io/param_file.h"

#include "kernels/backend.h"
#include "parallel/parallel_context.h"
#include "parallel/zero_shard.h"
#include "src/model/gpt_config.h"
#include "src/model/param_table.h"

namespace trident::train {

// The band of the arena that this rank writes: data rank r of dp writes block r of the arena
// (parallel::shard_arena), so the replicas of a model-parallel rank share its writing equally,
// and under ZeRO-1 that block is exactly the optimizer state the rank holds.
parallel::ArenaShard write_band(const model::ParamTable& table, const parallel::RankGrid& grid,
                                const parallel::GridCoord& coord);

// Whether this rank holds the copy of tensor t that counts for the model, so that every element
// counts once over the tensor and pipeline groups (the gradient norm, and who writes files):
// a tensor split over the tensor group on every tensor rank, a replicated one on tensor rank 0,
// and the tied embedding on the first stage (the last stage holds a copy).
bool counts_for_model(const model::ParamTensor& t, int tp_rank, bool first_stage);

// This rank's tensors of `table` as slices named prefix + global name, writing the elements of
// `band` it owns. `held` holds arena elements [held_begin, ...) on the host, covering the band.
// Ownership, one writer per element: of the tensors that count for the model on this rank (above),
// each data rank writes its band.
std::vector<io::TensorSlice> owned_slices(const model::ParamTable& table, const float* held, std::size_t held_begin,
                                          const std::string& prefix, const parallel::GridCoord& coord,
                                          const parallel::ArenaShard& band);

// The root attributes every parameter and checkpoint file carries.
std::vector<std::pair<std::string, int64_t>> layout_attributes(const parallel::RankGrid& grid, int64_t step,
                                                               const model::GptConfig& model_config);

// Collective over `world` (the communicator `ctx` was built over: every rank calls it).
// Copies this rank's band of the parameters to the host and writes every tensor of `table`
// under its global name and shape. `held` is memory of `backend` holding the fp32 values of
// arena elements [held_begin, ...), covering the band (the arena itself with held_begin 0, or
// the optimizer's master weights in mixed precision). Root attributes: step, dp, tp, pp, vocab,
// padded_vocab. Throws io::UserError naming the file on every rank when it cannot be written.
void write_final_parameters(const std::string& path, const model::ParamTable& table, const float* held,
                            std::size_t held_begin, kernels::Backend& backend, const parallel::ParallelContext& ctx,
                            int64_t step, const model::GptConfig& model_config, MPI_Comm world);

}  // namespace trident::train
