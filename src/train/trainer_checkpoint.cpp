// Trainer checkpoints: parameters and AdamW moments of every tensor at global shapes in one
// parameter file (io/param_file.h), so a checkpoint restarts on any layout. Names: the
// parameter's global name, "optimizer.m.NAME" and "optimizer.v.NAME"; attributes: the steps
// done, tokens and samples consumed, the seed, the last learning rate, the loss scale (and, from
// fp16 runs, its clean-step count), the
// layout that wrote it, the resolved deck ("deck") and the program (docs/checkpoint-format.md),
// and under run.matmul_algorithms = timed the kernels the ranks agreed on ("matmul_algorithms").
// The data position and the learning rate follow from (seed, step) (pure functions of them),
// so nothing else is needed to resume the same stream exactly.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>  // std::strerror
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/param_file.h"
#include "io/user_error.h"
#include "kernels/choice_table.h"  // merge_choice_tables
#include "parallel/comm.h"         // all_gather_strings
#include "src/train/checkpoint_files.h"
#include "src/train/final_parameters.h"
#include "src/train/trainer.h"
#include "trident/build_info.h"

namespace trident::train {

namespace {

// Points `latest` at the new checkpoint (write-then-rename, so it always names a complete
// file) and removes all but the newest `keep` checkpoints, never the one just written (a file
// of a higher step, which choose_restart keeps out of a run's directory, must not make the run
// delete its own). Rank 0 only.
void publish(const std::string& dir, const std::string& name, int keep) {
  {
    // Each failure with the system's reason: an unchecked open on a disk out of inodes surfaced
    // as the rename's "No such file or directory".
    errno = 0;
    std::ofstream out(dir + "/latest.tmp");
    if (!out) throw std::runtime_error("cannot create latest.tmp: " + std::string(std::strerror(errno)));
    out << name << "\n";
    out.flush();
    if (!out) throw std::runtime_error("cannot write latest.tmp: " + std::string(std::strerror(errno)));
  }
  std::filesystem::rename(dir + "/latest.tmp", dir + "/latest");
  const std::vector<std::string> checkpoints = list_checkpoint_files(dir);
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < checkpoints.size(); ++i) {
    if (checkpoints[i] != name) std::filesystem::remove(dir + "/" + checkpoints[i]);
  }
}

// `count` elements of backend memory as host memory: the memory itself on the CPU backend
// (no copy of a multi-GB state), else a copy appended to `staging`, whose capacity the caller
// reserved for every call (so earlier views stay valid).
const float* host_view(kernels::Backend& backend, const float* data, std::size_t count, std::vector<float>& staging) {
  if (backend.device() == kernels::Device::kCpu || count == 0) return data;
  const std::size_t at = staging.size();
  if (at + count > staging.capacity()) throw std::logic_error("host_view: staging capacity not reserved");
  staging.resize(at + count);
  backend.copy_to_host(staging.data() + at, data, count);
  return staging.data() + at;
}

}  // namespace

std::string Trainer::checkpoint_dir() const {
  return checkpoint_directory(config_.run.dir, config_.checkpoint.dir);
}

std::string Trainer::settle_matmul_algorithms() {
  // The same deck on every rank: every rank skips the collective alike where nothing is timed.
  if (config_.run.matmul_algorithms != "timed") return {};
  const std::string table =
      kernels::merge_choice_tables(parallel::all_gather_strings(ctx_.world(), backend_.matmul_algorithm_choices()));
  if (!table.empty()) backend_.adopt_matmul_algorithm_choices(table);
  return table;
}

void Trainer::save_checkpoint(int64_t steps_done) {
  const auto started = std::chrono::steady_clock::now();
  finish_parameter_gather();
  const model::ParamTable& table = model_.params();
  // Each data rank writes its band of the arena: its ZeRO-1 block of the moments, and the same
  // block of the replicated parameters (src/train/final_parameters.h).
  const parallel::ArenaShard band = write_band(table, ctx_.grid(), ctx_.coord());
  const std::size_t held = band.begin - optimizer_.shard_begin();  // the band lies in the held state
  std::vector<float> staging;
  if (backend_.device() != kernels::Device::kCpu) staging.reserve(3 * band.size());
  // The fp32 values: the master weights in mixed precision (the model holds a rounded copy).
  const float* params = host_view(backend_, fp32_parameters() + held, band.size(), staging);
  const float* m = host_view(backend_, optimizer_.first_moment() + held, band.size(), staging);
  const float* v = host_view(backend_, optimizer_.second_moment() + held, band.size(), staging);
  const parallel::GridCoord coord = ctx_.coord();
  std::vector<io::TensorSlice> slices = owned_slices(table, params, band.begin, "", coord, band);
  for (auto& s : owned_slices(table, m, band.begin, "optimizer.m.", coord, band)) slices.push_back(std::move(s));
  for (auto& s : owned_slices(table, v, band.begin, "optimizer.v.", coord, band)) slices.push_back(std::move(s));

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
  attributes.emplace_back("samples", config_.train.global_batch * steps_done);  // = the data cursor
  attributes.emplace_back("seed", static_cast<int64_t>(config_.run.seed));
  io::WriteOptions options;
  const bool fp16 = precision_ == kernels::Precision::kFp16;
  options.double_attributes = {{"lr", steps_done > 0 ? schedule_.at(steps_done - 1) : 0.0},
                               {"loss_scale", fp16 ? scaler_.scale() : 1.0}};  // 1: no loss scaling
  // The scaler's other state; present only when an fp16 run wrote the file.
  if (fp16) attributes.emplace_back("loss_scale_clean_steps", scaler_.clean_steps());
  std::vector<std::pair<std::string, std::string>> strings = {
      {"deck", deck_text_}, {"program", std::string("trident ") + build::kVersion}, {"commit", build::kGitCommit}};
  // Shapes first met since the last settling (an evaluation's) are agreed on here too.
  const std::string algorithms = settle_matmul_algorithms();
  if (!algorithms.empty()) strings.emplace_back("matmul_algorithms", algorithms);
  const std::string name = checkpoint_name(steps_done);
  const auto writing = std::chrono::steady_clock::now();
  io::write_param_file(dir + "/" + name, ctx_.world_handle(), slices, attributes, strings, options);
  const double write_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - writing).count();
  if (ctx_.world_rank() == 0) {
    try {
      publish(dir, name, config_.checkpoint.keep);
    } catch (const std::exception& e) {
      error = "checkpoint.dir '" + dir + "': cannot update latest (" + e.what() + ")";
    }
  }
  error = parallel::agree_on_error(ctx_.world(), error);
  if (!error.empty()) throw io::UserError(error);
  if (ctx_.world_rank() == 0) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::error_code ec;
    const double bytes = static_cast<double>(std::filesystem::file_size(dir + "/" + name, ec));
    // The file's bandwidth (from the first byte to the durable rename), and the whole pause of
    // training (with the host views, the directory and pruning the old checkpoints).
    std::printf("checkpoint: %s/%s, %.1f MB written in %.2f s (%.0f MB/s); %.2f s in all\n", dir.c_str(),
                name.c_str(), bytes / 1e6, write_seconds, bytes / 1e6 / write_seconds, seconds);
    std::fflush(stdout);
  }
}

int64_t Trainer::load_checkpoint(const std::string& path) {
  finish_parameter_gather();  // loading overwrites the arena
  const auto attributes = io::read_param_file_int_attributes(path);
  const auto step = attributes.find("step");
  if (step == attributes.end()) throw io::UserError("checkpoint '" + path + "': no step attribute");
  const model::ParamTable& table = model_.params();
  // Every parameter this rank holds, and the moments of the arena block it holds (all of them
  // without ZeRO-1): straight into the arenas on the CPU backend, else through host staging. The
  // parameters also go through staging under mixed precision: the file holds fp32 values, which
  // become the master weights and, rounded, the 16-bit arena.
  const std::size_t state_begin = optimizer_.shard_begin(), state_end = state_begin + optimizer_.state_count();
  const bool host = backend_.device() == kernels::Device::kCpu;
  const bool params_direct = host && model_.parameters().is_fp32();
  std::vector<float> staging((params_direct ? 0 : table.total_count()) + (host ? 0 : 2 * optimizer_.state_count()));
  float* params = params_direct ? model_.parameters().f32() : staging.data();
  float* m = host ? optimizer_.first_moment() : staging.data() + (params_direct ? 0 : table.total_count());
  float* v = host ? optimizer_.second_moment() : m + optimizer_.state_count();
  std::vector<io::TensorSliceRead> reads;
  for (const model::ParamTensor& t : table.tensors()) {
    reads.push_back({t.spec.name, t.spec.global_shape, t.spec.split_axis, t.spec.slice_begin, t.spec.slice_extent,
                     params + t.offset});
  }
  for (const auto& [prefix, state] : {std::pair<std::string, float*>{"optimizer.m.", m}, {"optimizer.v.", v}}) {
    for (const model::ParamTensor& t : table.tensors()) {
      const std::size_t begin = std::max(t.offset, state_begin), end = std::min(t.offset + t.count, state_end);
      if (begin >= end) continue;
      reads.push_back({prefix + t.spec.name, t.spec.global_shape, t.spec.split_axis, t.spec.slice_begin,
                       t.spec.slice_extent, state + (begin - state_begin), static_cast<int64_t>(begin - t.offset),
                       static_cast<int64_t>(end - begin)});
    }
  }
  // The token embedding (and its moments) may be stored padded for another tensor-parallel size:
  // the real vocabulary's rows must be there, the padding rows may differ.
  for (io::TensorSliceRead& r : reads) {
    if (r.name == "wte" || r.name == "optimizer.m.wte" || r.name == "optimizer.v.wte") {
      r.rows_required = model_.config().vocab;
    }
  }
  io::read_param_slices(path, ctx_.world_handle(), reads);
  if (!params_direct) {
    model_.set_parameters(0, params, table.total_count());
    optimizer_.adopt_parameters(0, params, table.total_count());
  }
  if (!host) {
    backend_.copy_to_device(optimizer_.first_moment(), m, optimizer_.state_count());
    backend_.copy_to_device(optimizer_.second_moment(), v, optimizer_.state_count());
  }
  // The kernels the run chose by timing (run.matmul_algorithms = timed): the same ones again, so
  // that the restart gives the uninterrupted run's bits. Not taken when this run does not time, or
  // another cuBLASLt or GPU made them (their indices number other kernels): then it times anew.
  if (const auto algorithms = io::read_param_file_string_attribute(path, "matmul_algorithms")) {
    const bool taken = backend_.adopt_matmul_algorithm_choices(*algorithms);
    if (!taken && ctx_.world_rank() == 0 && config_.run.matmul_algorithms == "timed" &&
        backend_.device() != kernels::Device::kCpu) {
      std::printf("restart: the checkpoint's cuBLASLt kernel choices were made with another cuBLASLt or GPU "
                  "(%s): timing again, so this restart matches the uninterrupted run to rounding only\n",
                  algorithms->substr(0, algorithms->find('\n')).c_str());
    }
  }
  // fp16 resumes its loss scale when an fp16 run wrote the checkpoint; from another precision it
  // starts at train.loss_scale.
  const auto clean = attributes.find("loss_scale_clean_steps");
  if (precision_ == kernels::Precision::kFp16 && clean != attributes.end()) {
    const auto doubles = io::read_param_file_double_attributes(path);
    const auto scale = doubles.find("loss_scale");
    if (scale == doubles.end()) throw io::UserError("checkpoint '" + path + "': loss_scale_clean_steps without loss_scale");
    scaler_.restore(scale->second, clean->second);
    // The start-up report's "dynamic loss scale from" names train.loss_scale, where a fresh run starts.
    if (ctx_.world_rank() == 0 && scale->second != config_.train.loss_scale) {
      std::printf("restart: fp16 loss scale %.10g from the checkpoint (%lld clean steps), not train.loss_scale = %.10g\n",
                  scale->second, static_cast<long long>(clean->second), config_.train.loss_scale);
    }
  }
  return step->second;
}

}  // namespace trident::train
