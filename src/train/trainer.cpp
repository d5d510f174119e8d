#include "src/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "kernels/timing_backend.h"
#include "src/train/checkpoint_files.h"  // list_checkpoint_files
#include "src/train/final_parameters.h"  // counts_for_model
#include "src/train/progress_line.h"

namespace trident::train {

namespace {

// What the stall watchdog calls a pipeline action.
Activity watched_activity(parallel::ActionKind kind) {
  switch (kind) {
    case parallel::ActionKind::kRecvForward: return Activity::kReceiveActivations;
    case parallel::ActionKind::kForward: return Activity::kForward;
    case parallel::ActionKind::kSendForward: return Activity::kSendActivations;
    case parallel::ActionKind::kRecvBackward: return Activity::kReceiveGradient;
    case parallel::ActionKind::kBackward: return Activity::kBackward;
    case parallel::ActionKind::kSendBackward: return Activity::kSendGradient;
  }
  return Activity::kForward;
}

io::BatchGeometry geometry_of(const io::RunConfig& c, const parallel::ParallelContext& ctx) {
  io::BatchGeometry g;
  g.global_batch = c.train.global_batch;
  g.micro_batch = c.train.micro_batch;
  g.dp_size = ctx.grid().dp();
  g.dp_rank = ctx.coord().dp_rank;
  g.seq_len = c.train.seq_len;
  return g;
}

AdamWSettings adamw_settings(const io::OptimSection& o) {
  return {o.beta1, o.beta2, o.eps, o.weight_decay};
}

LrSchedule schedule_of(const io::RunConfig& c) {
  LrSchedule s;
  s.peak = c.optim.lr;
  s.floor = c.optim.min_lr;
  s.warmup_steps = c.optim.warmup_steps;
  s.decay_steps = c.optim.decay_steps > 0 ? c.optim.decay_steps : c.train.steps;
  return s;
}

parallel::ArenaShard shard_of(const io::RunConfig& c, const model::GptConfig& model_config,
                             const model::GptLayout& layout, const parallel::ParallelContext& ctx) {
  const std::size_t n = model::build_gpt_param_table(model_config, layout).total_count();
  if (c.parallel.zero == 0) return parallel::shard_arena(n, 1, 0);
  return parallel::shard_arena(n, ctx.grid().dp(), ctx.coord().dp_rank);
}

// The parts of this rank's gradient block that count towards the global norm, so that every
// element of the model is counted once: tensor-parallel slices on every tensor rank, replicated
// tensors (norms, row-parallel biases, positions) on tensor rank 0 only, and the tied embedding
// on the first stage only (the last stage holds a copy).
std::vector<NormSegment> norm_segments_of(const model::ParamTable& table, const parallel::ArenaShard& shard,
                                          int tp_rank, const model::StageLayout& stage) {
  std::vector<NormSegment> segments;
  for (const auto& t : table.tensors()) {
    if (!counts_for_model(t, tp_rank, stage.first)) continue;
    const std::size_t begin = std::max(t.offset, shard.begin);
    const std::size_t end = std::min(t.offset + t.count, shard.end);
    if (begin >= end) continue;
    if (!segments.empty() && segments.back().offset + segments.back().count == begin) {
      segments.back().count += end - begin;  // adjacent: one longer pass
    } else {
      segments.push_back({begin, end - begin});
    }
  }
  return segments;
}

LossScalerSettings scaler_settings(const io::TrainSection& t) {
  LossScalerSettings s;
  // A scale above the ceiling would only be clamped at its first growth: start at most there.
  s.initial_scale = std::min(t.loss_scale, s.max_scale);
  s.growth_interval = t.loss_scale_window;
  return s;
}

}  // namespace

Trainer::Trainer(const io::RunConfig& config, const model::GptConfig& model_config, const model::GptLayout& layout,
                 parallel::ParallelContext& ctx, kernels::Backend& backend, const io::TokenDataset& dataset)
    : config_(config),
      ctx_(ctx),
      backend_(backend),
      precision_(kernels::parse_precision(config.train.precision)),
      grad_reduce_(kernels::parse_precision(config.parallel.grad_reduce)),
      scaler_(scaler_settings(config.train)),
      zero_(config.parallel.zero == 1),
      shard_(shard_of(config, model_config, layout, ctx)),
      model_(model_config, backend, static_cast<int>(config.train.micro_batch), config.train.seq_len,
             {.layout = layout, .arena_size = shard_.padded_size,
              .tensor_parallel = parallel::TensorParallel(&ctx.tensor())}),
      optimizer_(model_.params(), backend, adamw_settings(config.optim), shard_.begin, shard_.end, precision_),
      norm_segments_(norm_segments_of(model_.params(), shard_, ctx.coord().tp_rank, model_.stage())),
      schedule_(schedule_of(config)),
      loader_(dataset, geometry_of(config, ctx), config.run.seed),
      buckets_(ctx.data(), model_.gradients(),
               parallel::plan_buckets(model_.params().tensor_ends(),
                                      parallel::bucket_elems_of_mib(config.parallel.bucket_mb), zero_ ? shard_.block : 0),
               grad_reduce_) {
  // ZeRO-1 sums each bucket to one rank only. The two pipeline stages that hold the tied
  // embedding may give its elements different owners (their arenas differ), so its buckets wait for
  // the embedding group's sum (reduce_embedding_gradient). wte lies at the start of the arena:
  // on the first stage its gradient is the last to be made anyway.
  if (zero_ && ctx.embedding() != nullptr && ctx.embedding()->size() > 1) {
    const auto& wte = model_.params().find("wte");
    buckets_.hold_below(wte.offset + wte.count);
  }
  if (zero_ && config.parallel.overlap_param_gather) {
    gather_.emplace(ctx.data(), model_.parameters(), buckets_.buckets());
    model_.set_parameter_wait([this](std::size_t offset) { gather_->wait_below(offset); });
  }
  micro_batches_ = geometry_of(config, ctx).micro_batches_per_step();
  plan_ = plan_pipeline(config.parallel.schedule, ctx.grid().pp(), ctx.coord().pp_rank, micro_batches_,
                        layout.chunks);
  for (int c = 0; c < layout.chunks; ++c) {
    if (plan_.slots[static_cast<std::size_t>(c)] > layout.slots_of(c)) {
      throw std::logic_error("Trainer: the layout holds fewer slots than the schedule needs");
    }
  }
  tokens_per_step_ = static_cast<double>(config.train.global_batch) * config.train.seq_len;
  const std::size_t n = static_cast<std::size_t>(config.train.micro_batch * config.train.seq_len);
  tokens_.resize(n);
  targets_.resize(n);
}

void Trainer::initialize_parameters() {
  // Every rank generates the same initial model from the counter RNG: no broadcast needed.
  // Chunks of at most 1M elements keep the host buffer small beside the model's arenas.
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  std::vector<float> host;
  for (const auto& t : model_.params().tensors()) {
    for (std::size_t begin = 0; begin < t.count; begin += kChunk) {
      const std::size_t count = std::min(kChunk, t.count - begin);
      host.resize(count);
      model::initialize_tensor_range(model_.params(), t, config_.run.seed, begin, count, host.data());
      model_.set_parameters(t.offset + begin, host.data(), count);
      optimizer_.adopt_parameters(t.offset + begin, host.data(), count);
    }
  }
}

StepResult Trainer::step(int64_t step_index) {
  const auto start = std::chrono::steady_clock::now();
  StepResult result;
  result.lr = schedule_.at(step_index);
  const bool scaled = precision_ == kernels::Precision::kFp16;
  result.loss_scale = scaled ? scaler_.scale() : 1.0;
  model_.zero_gradients();
  buckets_.begin();
  double loss_sum = run_schedule(step_index, result.loss_scale);
  at(Activity::kGradientReduction, step_index + 1);
  // Backward is complete: every bucket not held may start (the last backward started most).
  buckets_.mark_final_from(0);
  // Sequence parallelism leaves the LayerNorm gradients partial on each tensor rank: sum them
  // over the tensor group before the norm. The started data-parallel buckets may hold them, and
  // an in-place all-reduce must not run on a buffer a pending bucket is reducing: wait for them
  // first. The sums commute: without ZeRO every rank receives whole sums; with ZeRO-1 the ranks
  // of a tensor group share their data rank, hence their block of arenas laid out alike, so
  // each sums the same owned elements.
  if (model_.sequence_parallel()) {
    buckets_.wait_started();
    model_.reduce_sequence_parallel_gradients();
  }
  reduce_embedding_gradient();
  // Without ZeRO every rank now holds the summed gradients; with ZeRO-1 this rank's block of
  // them, in place at shard_.begin.
  buckets_.finish();

  at(Activity::kLossAndNorm, step_index + 1);
  // Loss: the last stage of every data rank holds the sum of its own tokens' losses.
  ctx_.pipeline().all_reduce_sum(&loss_sum, 1);
  ctx_.data().all_reduce_sum(&loss_sum, 1);
  result.loss = loss_sum / tokens_per_step_;

  // Gradient norm, each element counted once: without ZeRO every rank of a data group holds
  // the same (whole) gradients, so only the model-parallel group (tp x pp) is summed; with
  // ZeRO each data rank holds one block, so the data group is summed too. Within the tensor
  // group, replicated tensors count on tensor rank 0 only (norm_segments_).
  const float* shard_grads = model_.gradients() + shard_.begin;
  double squares = backend_.sum_squares_of_ranges(model_.gradients(), norm_segments_.data(), norm_segments_.size());
  if (zero_) ctx_.data().all_reduce_sum(&squares, 1);
  ctx_.model().all_reduce_sum(&squares, 1);
  // The gradients are loss_scale times the true ones: so is their norm.
  result.grad_norm = std::sqrt(squares) / result.loss_scale;
  // An inf or NaN anywhere makes the sum of squares non-finite on the ranks that reduced it;
  // the verdict is agreed over the world so that every rank skips, or stops at, the same step.
  const bool non_finite = ctx_.world().all_reduce_max(std::isfinite(squares) ? 0 : 1) != 0;
  if (scaled) {
    // An overflow at the smallest scale is not the scale's doing: no back-off can absorb it.
    result.diverged = non_finite && scaler_.at_minimum();
    result.skipped = !scaler_.update(non_finite);
  } else {
    // fp32 and bf16 have no scale to back off: the update would carry the inf or NaN into
    // every parameter it touches, and into every checkpoint after it (checkpoint.keep would
    // then rotate the good ones away). run() stops instead.
    result.diverged = result.skipped = non_finite;
  }
  if (!result.skipped) {
    // Unscaling and clipping in one factor, applied by the update as it reads each gradient
    // (no pass of its own over the gradients): the clip applies to the true (unscaled) norm.
    const double clip = config_.optim.grad_clip;
    double factor = 1.0 / result.loss_scale;
    if (clip > 0.0 && result.grad_norm > clip) factor *= clip / result.grad_norm;
    // The forward has waited for the last gather piece by piece; the update must not write the
    // block while a broadcast of it could still be reading it.
    at(Activity::kOptimizer, step_index + 1);
    finish_parameter_gather();
    optimizer_.update(model_.parameters(), shard_grads, result.lr, step_index + 1, static_cast<float>(factor));
    if (gather_) {
      gather_->start();
    } else if (zero_) {
      ctx_.data().all_gather_in_place(model_.parameters(), shard_.block);
    }
  }
  backend_.synchronize();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

double Trainer::run_schedule(int64_t step_index, double loss_scale) {
  using parallel::ActionKind;
  const model::StageLayout& stage = model_.stage();
  parallel::Comm& pipe = ctx_.pipeline();
  const int stages = pipe.size();
  const int me = pipe.rank();
  const std::size_t boundary = model_.boundary_floats();
  // d(step loss)/d(token loss), times the fp16 loss scale (1 otherwise).
  const float dloss = static_cast<float>(loss_scale / tokens_per_step_);
  // The pipeline communicator's ranks are the stage indices.
  auto peer = [&](const parallel::PipelineAction& a) { return parallel::pipeline_peer(stages, me, a).stage; };
  double loss_sum = 0.0;
  for (std::size_t i = 0; i < plan_.actions.size(); ++i) {
    const parallel::PipelineAction& a = plan_.actions[i];
    // In-flight micro-batches of a chunk are consecutive, so micro_batch mod slots never collides.
    const int chunk = a.chunk;
    const int slot = a.micro_batch % plan_.slots[static_cast<std::size_t>(chunk)];
    const model::ChunkLayout& part = stage.chunks[static_cast<std::size_t>(chunk)];
    at(watched_activity(a.kind), step_index + 1, a.micro_batch, plan_.chunks > 1 ? chunk : -1,
       a.kind == ActionKind::kForward || a.kind == ActionKind::kBackward ? -1 : peer(a));
    switch (a.kind) {
      case ActionKind::kRecvForward:
        pipe.recv(model_.stage_input(slot, chunk), boundary, peer(a));
        break;
      case ActionKind::kForward:
        if (part.first || part.last) loader_.load_train(step_index, a.micro_batch, tokens_.data(), targets_.data());
        loss_sum += model_.forward(slot, chunk, tokens_.data(), targets_.data(), dloss);
        break;
      case ActionKind::kSendForward:
        pipe.send(model_.stage_output(slot, chunk), boundary, peer(a));
        break;
      case ActionKind::kRecvBackward:
        // Receives come right before their compute: this lands where that backward reads it.
        pipe.recv(model_.output_grad(slot, chunk), boundary, peer(a));
        break;
      case ActionKind::kBackward:
        // Each chunk's last backward starts the data-parallel buckets of its blocks (PipelinePlan).
        if (i == plan_.last_backward[static_cast<std::size_t>(chunk)]) {
          model_.backward(slot, chunk, dloss, [this](std::size_t offset) { buckets_.mark_final_from(offset); });
        } else {
          model_.backward(slot, chunk, dloss, {});
        }
        break;
      case ActionKind::kSendBackward:
        pipe.send(model_.input_grad(slot, chunk), boundary, peer(a));
        break;
    }
  }
  return loss_sum;
}

void Trainer::reduce_embedding_gradient() {
  parallel::Comm* group = ctx_.embedding();
  if (group == nullptr || group->size() == 1) return;
  // Without ZeRO the data-parallel sums commute with this one: wait for the started buckets,
  // which may be reducing wte in place. Under ZeRO-1 wte's buckets are held until after it.
  buckets_.wait_started();
  const auto& wte = model_.params().find("wte");
  group->all_reduce_sum(model_.gradients() + wte.offset, wte.count);
}

double Trainer::evaluate() {
  using parallel::ActionKind;
  const model::StageLayout& stage = model_.stage();
  parallel::Comm& pipe = ctx_.pipeline();
  const int stages = pipe.size();
  const int me = pipe.rank();
  const std::size_t boundary = model_.boundary_floats();
  double loss_sum = 0.0;
  for (int64_t batch = 0; batch < config_.train.eval_batches; ++batch) {
    for (int64_t micro = 0; micro < micro_batches_; ++micro) {
      at(Activity::kValidation, watched_step_, static_cast<int>(batch * micro_batches_ + micro));
      // Forward only, one micro-batch at a time through the virtual stages in order (every
      // rank walks its chunks in the global order of the virtual stages: no deadlock).
      for (int chunk = 0; chunk < static_cast<int>(stage.chunks.size()); ++chunk) {
        const model::ChunkLayout& part = stage.chunks[static_cast<std::size_t>(chunk)];
        const parallel::PipelineAction recv{ActionKind::kRecvForward, static_cast<int>(micro), chunk};
        const parallel::PipelineAction send{ActionKind::kSendForward, static_cast<int>(micro), chunk};
        if (!part.first) pipe.recv(model_.stage_input(0, chunk), boundary, parallel::pipeline_peer(stages, me, recv).stage);
        if (part.first || part.last) loader_.load_validation(batch, micro, tokens_.data(), targets_.data());
        loss_sum += model_.forward(0, chunk, tokens_.data(), targets_.data());
        if (!part.last) pipe.send(model_.stage_output(0, chunk), boundary, parallel::pipeline_peer(stages, me, send).stage);
      }
    }
  }
  ctx_.pipeline().all_reduce_sum(&loss_sum, 1);
  ctx_.data().all_reduce_sum(&loss_sum, 1);
  return loss_sum / (tokens_per_step_ * static_cast<double>(config_.train.eval_batches));
}

RunSummary Trainer::run(const std::string& metrics_path, double peak_flops_per_rank, int64_t start_step,
                        const std::function<bool()>& stop_requested) {
  RunSummary summary;
  const bool leader = ctx_.world_rank() == 0;
  std::unique_ptr<io::MetricsLog> metrics;
  if (leader && !metrics_path.empty()) metrics = std::make_unique<io::MetricsLog>(metrics_path, start_step);
  if (metrics && !metrics->resume_note().empty()) std::printf("%s\n", metrics->resume_note().c_str());
  ProgressLine progress(config_.train.steps, tokens_per_step_,
                        model_.config().flops_per_token(config_.train.seq_len),
                        peak_flops_per_rank * ctx_.grid().world_size());
  const int64_t steps = config_.train.steps;
  watched_step_ = start_step;
  for (int64_t s = start_step; s < steps; ++s) {
    watched_step_ = s + 1;
    const auto comm_before = ctx_.comm_stats();
    if (profile_) profile_->set_measuring(s > start_step);  // the same window as the communication's
    const StepResult r = step(s);
    if (profile_) profile_->set_measuring(false);
    progress.record(r.seconds);
    // Every product shape has met its first call: from the next step on, every rank runs the
    // kernel the ranks agree on at each (run.matmul_algorithms = timed; nothing otherwise).
    if (s == start_step) settle_matmul_algorithms();
    if (s > start_step) {  // the first step pays for warm-up; validation is outside the window
      const auto comm_after = ctx_.comm_stats();
      if (comm_totals_.empty()) {
        for (const auto& g : comm_after) comm_totals_.push_back({g.group, g.ranks, {}});
      }
      for (std::size_t g = 0; g < comm_after.size(); ++g) {
        comm_totals_[g].stats.bytes += comm_after[g].stats.bytes - comm_before[g].stats.bytes;
        comm_totals_[g].stats.seconds += comm_after[g].stats.seconds - comm_before[g].stats.seconds;
        comm_totals_[g].stats.calls += comm_after[g].stats.calls - comm_before[g].stats.calls;
      }
      measured_seconds_ += r.seconds;
      ++measured_steps_;
    }
    const bool last = s + 1 == steps;
    if (r.diverged) {
      // Every rank got here at this step (the verdict is agreed): no validation, no
      // checkpoint; the step's line goes to the metrics and the screen, then every rank stops.
      if (leader) {
        if (metrics) metrics->write(step_fields(s + 1, r, progress, std::nullopt));
        std::printf("%s\n", progress.line(s + 1, r.loss, r.lr, r.grad_norm, r.seconds, NAN).c_str());
        std::fflush(stdout);
      }
      finish_parameter_gather();
      throw TrainingDiverged(diverged_message(s + 1, r));
    }
    const bool eval_now = config_.train.eval_batches > 0 &&
                          (last || (config_.train.eval_every > 0 && (s + 1) % config_.train.eval_every == 0));
    const double val_loss = eval_now ? evaluate() : NAN;
    // A signal reaches the ranks at different moments: agree (max over the world) so that every
    // rank stops after the same step, with a checkpoint of it.
    if (stop_requested && !last) at(Activity::kStopAgreement, s + 1);
    const bool stop = stop_requested && !last && ctx_.world().all_reduce_max(stop_requested() ? 1 : 0) != 0;
    const bool checkpointed = config_.checkpoint.every > 0 && ((s + 1) % config_.checkpoint.every == 0 || last);
    summary.steps_done = s + 1;
    summary.last_loss = r.loss;
    if (eval_now) summary.last_val_loss = val_loss;
    if (leader) {
      if (metrics) metrics->write(step_fields(s + 1, r, progress, eval_now ? std::optional(val_loss) : std::nullopt));
      if (r.skipped) {
        std::printf("step %lld: fp16 gradients overflowed at loss scale %g: update skipped, scale now %g\n",
                    static_cast<long long>(s + 1), r.loss_scale, scaler_.scale());
      }
      // The first step of this invocation too, a resumed run's included.
      if ((s + 1) % config_.log.every == 0 || last || s == start_step || eval_now || stop) {
        std::printf("%s\n", progress.line(s + 1, r.loss, r.lr, r.grad_norm, r.seconds, val_loss).c_str());
        std::fflush(stdout);
      }
    }
    // After the metrics line of the step: a restart from this checkpoint finds every line up
    // to it.
    if (checkpointed || stop) {
      at(Activity::kCheckpointWrite, s + 1);
      save_checkpoint(s + 1);
    }
    if (stop) {
      summary.stopped = true;
      break;
    }
  }
  // Whoever reads the parameters after the run (final files, tests) finds them whole, and no
  // request outlives the communicators.
  at(Activity::kFinishing, watched_step_);
  finish_parameter_gather();
  if (leader && measured_steps_ > 0) std::printf("%s", communication_report().c_str());
  if (profile_ && measured_steps_ > 0) write_kernel_profile();
  return summary;
}

std::vector<std::pair<std::string, double>> Trainer::step_fields(int64_t step, const StepResult& r,
                                                                 const ProgressLine& progress,
                                                                 std::optional<double> val_loss) const {
  std::vector<std::pair<std::string, double>> fields = {
      {"step", static_cast<double>(step)},         {"loss", r.loss},
      {"lr", r.lr},                                {"grad_norm", r.grad_norm},
      {"tokens_per_s", tokens_per_step_ / r.seconds}, {"ms_per_step", r.seconds * 1e3},
      {"mfu", progress.mfu(r.seconds)}};
  if (val_loss) fields.emplace_back("val_loss", *val_loss);
  if (precision_ == kernels::Precision::kFp16) {
    fields.emplace_back("loss_scale", r.loss_scale);
    fields.emplace_back("skipped", r.skipped ? 1.0 : 0.0);
  }
  if (r.diverged) fields.emplace_back("diverged", 1.0);
  return fields;
}

std::string Trainer::diverged_message(int64_t step, const StepResult& r) const {
  char what[256];
  std::snprintf(what, sizeof what,
                "training diverged at step %lld: an inf or NaN in the gradients (loss %.4f, gradient norm %s)",
                static_cast<long long>(step), r.loss,
                std::isnan(r.grad_norm) ? "nan" : std::isinf(r.grad_norm) ? "inf" : std::to_string(r.grad_norm).c_str());
  std::string message = what;
  if (precision_ == kernels::Precision::kFp16) {
    char scale[96];
    std::snprintf(scale, sizeof scale, " at the smallest loss scale (%g)", r.loss_scale);
    message += scale;
  }
  message += "; the update was not applied and no checkpoint holds the step. ";
  const std::vector<std::string> kept = list_checkpoint_files(checkpoint_dir());
  message += kept.empty() ? std::string("There is no checkpoint to restart from (checkpoint.every); start again")
                          : "Restart from " + checkpoint_dir() + "/" + kept.back() + " (run.restart = auto)";
  return message + " with a lower optim.lr or a longer warm-up; if the same step fails again at a lower rate, suspect "
                   "the data or the GPU";
}

void Trainer::write_kernel_profile() const {
  const std::string title = "kernels per step on rank " + std::to_string(ctx_.world_rank()) +
                            " (run.profile: each call timed alone, the device drained around it, so these steps ran "
                            "slower than plain ones; mean of " +
                            std::to_string(measured_steps_) + " steps after the first):";
  const std::string table = kernels::kernel_time_table(profile_->totals(), measured_steps_, measured_seconds_, title);
  const std::string path = config_.run.dir + "/profile-rank" + std::to_string(ctx_.world_rank()) + ".txt";
  std::ofstream file(path);
  file << table;
  file.close();
  // A diagnostic: a file that cannot be written (a full disk) costs this rank's copy, not the run,
  // whose checkpoints and parameters are already written or still to come.
  if (!file) {
    std::fprintf(stderr, "run.profile: warning: cannot write %s; rank 0 prints its own table only\n", path.c_str());
  }
  if (ctx_.world_rank() == 0) {
    std::printf("%s(every rank's table: %s/profile-rank<N>.txt)\n", table.c_str(), config_.run.dir.c_str());
  }
}

std::string Trainer::communication_report() const {
  const double steps = static_cast<double>(measured_steps_);
  std::string out = "communication per step on rank 0 (payload bytes and time inside the calls, mean of " +
                    std::to_string(measured_steps_) + " steps after the first):\n";
  double total_seconds = 0.0;
  char line[160];
  for (const auto& g : comm_totals_) {
    if (g.stats.calls == 0 || g.ranks == 1) continue;  // a group of one exchanges nothing
    std::snprintf(line, sizeof line, "  %-9s %10.3f MB %9.2f ms %7.1f calls\n", g.group, g.stats.bytes / steps / 1e6,
                  1e3 * g.stats.seconds / steps, static_cast<double>(g.stats.calls) / steps);
    out += line;
    total_seconds += g.stats.seconds;
  }
  std::snprintf(line, sizeof line, "  total %.2f ms of %.2f ms per step (%.1f%% in communication)\n",
                1e3 * total_seconds / steps, 1e3 * measured_seconds_ / steps,
                100.0 * total_seconds / std::max(measured_seconds_, 1e-12));
  return out + line;
}

}  // namespace trident::train
