// Final parameters: the parameter table as io::TensorSlice views, with this rank's ownership.
#include "src/train/final_parameters.h"

#include <utility>
#include <vector>

#include "io/param_file.h"

namespace trident::train {

std::vector<io::TensorSlice> owned_slices(const model::ParamTable& table, const float* host, const std::string& prefix,
                                          const parallel::GridCoord& coord) {
  const bool data_leader = coord.dp_rank == 0;
  std::vector<io::TensorSlice> slices;
  slices.reserve(table.tensors().size());
  for (const model::ParamTensor& t : table.tensors()) {
    io::TensorSlice slice;
    slice.name = prefix + t.spec.name;
    slice.global_shape = t.spec.global_shape;
    slice.split_axis = t.spec.split_axis;
    slice.slice_begin = t.spec.slice_begin;
    slice.slice_extent = t.spec.slice_extent;
    slice.data = host + t.offset;
    const bool split = t.spec.split_axis >= 0;
    slice.write = data_leader && (split || coord.tp_rank == 0);
    slices.push_back(std::move(slice));
  }
  return slices;
}

std::vector<std::pair<std::string, int64_t>> layout_attributes(const parallel::RankGrid& grid, int64_t step,
                                                               const model::GptConfig& model_config) {
  return {{"step", step},
          {"dp", grid.dp()},
          {"tp", grid.tp()},
          {"pp", grid.pp()},
          {"vocab", model_config.vocab},
          {"padded_vocab", model_config.padded_vocab}};
}

void write_final_parameters(const std::string& path, const model::ParamTable& table, const float* params,
                            kernels::Backend& backend, const parallel::ParallelContext& ctx, int64_t step,
                            const model::GptConfig& model_config, MPI_Comm world) {
  std::vector<float> host(table.total_count());
  if (!host.empty()) backend.copy_to_host(host.data(), params, host.size());
  io::write_param_file(path, world, owned_slices(table, host.data(), "", ctx.coord()),
                       layout_attributes(ctx.grid(), step, model_config));
}

}  // namespace trident::train
