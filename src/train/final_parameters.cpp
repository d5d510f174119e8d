// Final parameters: the parameter table as io::TensorSlice views, with this rank's ownership.
#include "src/train/final_parameters.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "io/param_file.h"

namespace trident::train {

parallel::ArenaShard write_band(const model::ParamTable& table, const parallel::RankGrid& grid,
                                const parallel::GridCoord& coord) {
  parallel::ArenaShard band = parallel::shard_arena(table.total_count(), grid.dp(), coord.dp_rank);
  band.end = std::min(band.end, table.total_count());  // the padding is nobody's to write
  band.begin = std::min(band.begin, band.end);
  return band;
}

bool counts_for_model(const model::ParamTensor& t, int tp_rank, bool first_stage) {
  if (t.spec.split_axis < 0 && tp_rank != 0) return false;
  return t.spec.name != "wte" || first_stage;
}

std::vector<io::TensorSlice> owned_slices(const model::ParamTable& table, const float* held, std::size_t held_begin,
                                          const std::string& prefix, const parallel::GridCoord& coord,
                                          const parallel::ArenaShard& band) {
  std::vector<io::TensorSlice> slices;
  slices.reserve(table.tensors().size());
  for (const model::ParamTensor& t : table.tensors()) {
    io::TensorSlice slice;
    slice.name = prefix + t.spec.name;
    slice.global_shape = t.spec.global_shape;
    slice.split_axis = t.spec.split_axis;
    slice.slice_begin = t.spec.slice_begin;
    slice.slice_extent = t.spec.slice_extent;
    const std::size_t begin = std::max(t.offset, band.begin), end = std::min(t.offset + t.count, band.end);
    if (counts_for_model(t, coord.tp_rank, coord.pp_rank == 0) && begin < end) {
      slice.write = true;
      slice.write_begin = static_cast<int64_t>(begin - t.offset);
      slice.write_count = static_cast<int64_t>(end - begin);
      slice.data = held + (begin - held_begin);
    } else {
      slice.write_count = 0;
    }
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

void write_final_parameters(const std::string& path, const model::ParamTable& table, const float* held,
                            std::size_t held_begin, kernels::Backend& backend, const parallel::ParallelContext& ctx,
                            int64_t step, const model::GptConfig& model_config, MPI_Comm world) {
  const parallel::ArenaShard band = write_band(table, ctx.grid(), ctx.coord());
  std::vector<float> host(band.size());
  if (!host.empty()) backend.copy_to_host(host.data(), held + (band.begin - held_begin), host.size());
  io::write_param_file(path, world, owned_slices(table, host.data(), band.begin, "", ctx.coord(), band),
                       layout_attributes(ctx.grid(), step, model_config));
}

}  // namespace trident::train
