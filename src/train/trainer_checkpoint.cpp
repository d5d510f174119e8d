// Trainer checkpoints: parameters and AdamW moments of every tensor at global shapes in one
// parameter file (io/param_file.h), so a checkpoint restarts on any layout. Names: the
// parameter's global name, "optimizer.m.NAME" and "optimizer.v.NAME"; attributes: the steps
// done, the tokens consumed, the layout that wrote it and the resolved deck ("deck"). The data position and the learning
// rate follow from the step (both are pure functions of it), so nothing else is needed to
// resume the same stream exactly.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/param_file.h"
#include "io/user_error.h"
#include "src/train/final_parameters.h"
#include "src/train/trainer.h"

namespace trident::train {

namespace {

std::string checkpoint_name(int64_t steps_done) {
  char name[64];
  std::snprintf(name, sizeof name, "step-%09lld.h5", static_cast<long long>(steps_done));
  return name;
}

// Points `latest` at the new checkpoint (write-then-rename, so it always names a complete
// file) and removes all but the newest `keep` checkpoints. Rank 0 only.
void publish(const std::string& dir, const std::string& name, int keep) {
  {
    std::ofstream out(dir + "/latest.tmp");
    out << name << "\n";
  }
  std::filesystem::rename(dir + "/latest.tmp", dir + "/latest");
  std::vector<std::string> checkpoints;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("step-", 0) == 0 && file.size() > 3 && file.substr(file.size() - 3) == ".h5") {
      checkpoints.push_back(file);
    }
  }
  std::sort(checkpoints.begin(), checkpoints.end());  // zero-padded step numbers sort in order
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < checkpoints.size(); ++i) {
    std::filesystem::remove(dir + "/" + checkpoints[i]);
  }
}

}  // namespace

std::string Trainer::checkpoint_dir() const {
  const std::string& dir = config_.checkpoint.dir;
  return !dir.empty() && dir.front() == '/' ? dir : config_.run.dir + "/" + dir;
}

void Trainer::save_checkpoint(int64_t steps_done) {
  const model::ParamTable& table = model_.params();
  const std::size_t n = table.total_count();
  std::vector<float> params(n);
  backend_.copy_to_host(params.data(), model_.parameters(), n);
  // The moments of this rank's block, made whole over the data group under ZeRO-1 (every
  // writer then holds its tensors entirely, as for the parameters).
  std::vector<float> m(shard_.padded_size, 0.0f), v(shard_.padded_size, 0.0f);
  backend_.copy_to_host(m.data() + optimizer_.shard_begin(), optimizer_.first_moment(), optimizer_.state_count());
  backend_.copy_to_host(v.data() + optimizer_.shard_begin(), optimizer_.second_moment(), optimizer_.state_count());
  if (zero_) {
    ctx_.data().all_gather_in_place(m.data(), shard_.block);
    ctx_.data().all_gather_in_place(v.data(), shard_.block);
  }
  const parallel::GridCoord coord = ctx_.coord();
  std::vector<io::TensorSlice> slices = owned_slices(table, params.data(), "", coord);
  for (auto& s : owned_slices(table, m.data(), "optimizer.m.", coord)) slices.push_back(std::move(s));
  for (auto& s : owned_slices(table, v.data(), "optimizer.v.", coord)) slices.push_back(std::move(s));

  const std::string dir = checkpoint_dir();
  std::string error;
  if (ctx_.world_rank() == 0) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) error = "checkpoint.dir '" + dir + "': cannot create it (" + ec.message() + ")";
  }
  error = parallel::agree_on_error(ctx_.world(), error);
  if (!error.empty()) throw io::UserError(error);

  auto attributes = layout_attributes(ctx_.grid(), steps_done, model_.config());
  attributes.emplace_back("tokens", static_cast<int64_t>(tokens_per_step_) * steps_done);
  const std::string name = checkpoint_name(steps_done);
  io::write_param_file(dir + "/" + name, ctx_.world_handle(), slices, attributes, {{"deck", deck_text_}});
  if (ctx_.world_rank() == 0) {
    try {
      publish(dir, name, config_.checkpoint.keep);
    } catch (const std::exception& e) {
      error = "checkpoint.dir '" + dir + "': cannot update latest (" + e.what() + ")";
    }
  }
  error = parallel::agree_on_error(ctx_.world(), error);
  if (!error.empty()) throw io::UserError(error);
}

int64_t Trainer::load_checkpoint(const std::string& path) {
  const auto attributes = io::read_param_file_int_attributes(path);
  const auto step = attributes.find("step");
  if (step == attributes.end()) throw io::UserError("checkpoint '" + path + "': no step attribute");
  const model::ParamTable& table = model_.params();
  const std::size_t n = table.total_count();
  std::vector<float> params(n), m(n), v(n);
  std::vector<io::TensorSliceRead> reads;
  for (const auto& [prefix, data] : {std::pair<std::string, float*>{"", params.data()}, {"optimizer.m.", m.data()},
                                     {"optimizer.v.", v.data()}}) {
    for (const model::ParamTensor& t : table.tensors()) {
      reads.push_back({prefix + t.spec.name, t.spec.global_shape, t.spec.split_axis, t.spec.slice_begin,
                       t.spec.slice_extent, data + t.offset});
    }
  }
  io::read_param_slices(path, ctx_.world_handle(), reads);
  backend_.copy_to_device(model_.parameters(), params.data(), n);
  backend_.copy_to_device(optimizer_.first_moment(), m.data() + optimizer_.shard_begin(), optimizer_.state_count());
  backend_.copy_to_device(optimizer_.second_moment(), v.data() + optimizer_.shard_begin(), optimizer_.state_count());
  return step->second;
}

}  // namespace trident::train
