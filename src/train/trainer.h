// Trainer: the step loop of one rank. Owns the model, optimiser, data loader and metrics, and
// uses the parallel context it is given for every collective.
//
// A step runs the stage's pipeline schedule (src/train/pipeline_plan.h; with one stage simply
// forward and backward of each micro-batch): receive, forward, send, receive the gradient,
// backward, send it back (with the interleaved schedule for each of the rank's model chunks,
// peers from pipeline_peer). The last backward starts the data-parallel bucket reductions as its
// gradients become final (with several chunks, each chunk's last backward those of its blocks);
// then the tied embedding's gradient is summed between the first and last stage; global
// gradient norm; clip; AdamW; log. With ZeRO-1 each bucket is summed to the data rank whose
// block holds it (parallel/grad_buckets.h), AdamW updates this rank's block, and an all-gather
// shares the updated parameters: by default bucket by bucket, each broadcast from its owner, the
// next step's forward waiting for each only as it reaches it (parallel/param_gather.h).
//
// Mixed precision (train.precision, docs/model.md): the backend the trainer is given stores
// activations in 16 bits; AdamW keeps the fp32 master weights. fp16 multiplies the loss by the
// loss scale before backward; a step whose gradients overflow on any rank is skipped and the
// scale backed off, otherwise the gradients are unscaled before the norm is clipped.
//
// Divergence: an inf or NaN gradient that no loss scale can absorb (any in fp32 and bf16; one at
// the smallest scale in fp16) stops the run at that step on every rank, before its update and
// without a checkpoint (TrainingDiverged, src/train/training_diverged.h).
#pragma once

#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/metrics_log.h"
#include "io/run_config.h"
#include "io/token_dataset.h"
#include "kernels/backend.h"
#include "parallel/grad_buckets.h"
#include "parallel/param_gather.h"
#include "parallel/parallel_context.h"
#include "parallel/zero_shard.h"
#include "src/model/gpt.h"
#include "src/train/adamw.h"
#include "src/train/loss_scaler.h"
#include "src/train/lr_schedule.h"
#include "src/train/pipeline_plan.h"
#include "src/train/stall_watchdog.h"
#include "src/train/training_diverged.h"  // thrown by run()

namespace trident::kernels {
class TimingBackend;  // kernels/timing_backend.h (run.profile)
}  // namespace trident::kernels

namespace trident::train {

class ProgressLine;  // src/train/progress_line.h

// What a finished run reports.
struct RunSummary {
  double last_loss = NAN;      // training loss of the last step
  double last_val_loss = NAN;  // the last validation loss (NaN without validation)
  int64_t steps_done = 0;      // steps done when run() returned
  bool stopped = false;        // a stop request ended the run early (after a checkpoint)
};

// A contiguous range of the gradient arena that this rank counts in the global norm.
using NormSegment = kernels::ElementRange;

struct StepResult {
  double loss = 0.0;       // global mean token loss of the step
  double grad_norm = 0.0;  // global norm before clipping
  double lr = 0.0;
  double seconds = 0.0;
  bool skipped = false;     // no update was made: fp16 gradients overflowed, or `diverged`
  bool diverged = false;    // an inf or NaN gradient that no loss scale can absorb (TrainingDiverged)
  double loss_scale = 1.0;  // the scale this step's backward ran with (1 without fp16)
};

class Trainer {
 public:
  // Collective over ctx.world(). The dataset must already be open. layout: this rank's
  // (src/train/run_layout.h). The parameters are NOT set: call initialize_parameters() for a
  // fresh start, or load_checkpoint() (generating 124M normal values costs seconds that a
  // restart would throw away).
  Trainer(const io::RunConfig& config, const model::GptConfig& model_config, const model::GptLayout& layout,
          parallel::ParallelContext& ctx, kernels::Backend& backend, const io::TokenDataset& dataset);
  // The initial model of run.seed, the same on every layout (docs/model.md).
  void initialize_parameters();

  // Runs train.steps steps with logging (rank 0 prints and writes metrics_path when given).
  // start_step: steps already done (a restart from a checkpoint); the metrics file is then
  // appended to.
  // stop_requested (may be empty): polled after every step; when it is true on any rank, every
  // rank writes a checkpoint and returns early.
  RunSummary run(const std::string& metrics_path, double peak_flops_per_rank, int64_t start_step = 0,
                 const std::function<bool()>& stop_requested = {});
  // Collective: writes a checkpoint after `steps_done` steps into the checkpoint directory,
  // then (rank 0) points `latest` at it and removes all but the newest checkpoint.keep.
  void save_checkpoint(int64_t steps_done);
  // Collective: loads parameters and optimizer state from a checkpoint written by any layout;
  // returns the steps it had done.
  int64_t load_checkpoint(const std::string& path);
  std::string checkpoint_dir() const;
  // The resolved deck (INI text) saved in every checkpoint, for the restart compatibility check.
  void record_deck(std::string ini) { deck_text_ = std::move(ini); }
  // One training step. With ZeRO-1's overlapped gather (parallel.overlap_param_gather) the other
  // ranks' blocks of the parameters may still be arriving when it returns: the next forward waits
  // for them piece by piece, and run(), checkpoints and the next update wait for all of them.
  StepResult step(int64_t step_index);
  // Mean validation loss over train.eval_batches global batches (every rank gets it).
  double evaluate();
  model::Gpt& model() { return model_; }
  // fp32 values of the parameters for files: backend memory holding arena elements
  // [fp32_parameters_begin(), ...) of this rank's optimizer range (the master weights in mixed
  // precision, else the arena itself).
  const float* fp32_parameters() { return optimizer_.fp32_parameters(model_.parameters()); }
  std::size_t fp32_parameters_begin() const { return optimizer_.shard_begin(); }
  const LossScaler& loss_scaler() const { return scaler_; }
  // run.profile: `timing` (the backend this trainer runs on, or one it wraps) times the kernel
  // calls of the training steps after the first, not those of validation or checkpoints; run()
  // then prints where a step went (rank 0) and writes it to run.dir/profile-rank<N>.txt (every
  // rank).
  void profile_kernels(kernels::TimingBackend& timing) { profile_ = &timing; }
  // run.stall_timeout: the trainer marks where this rank is, pipeline action by action, on
  // `watchdog` (src/train/stall_watchdog.h), which must outlive it.
  void watch(StallWatchdog& watchdog) { watchdog_ = &watchdog; }

 private:
  // Marks this rank's position on the stall watchdog, when there is one.
  void at(Activity activity, int64_t step, int micro_batch = -1, int chunk = -1, int peer = -1) {
    if (watchdog_ != nullptr) watchdog_->mark({activity, step, micro_batch, chunk, peer});
  }
  // Runs the forward-and-backward actions of one step; returns this rank's loss sum (non-zero
  // on the last stage only).
  double run_schedule(int64_t step_index, double loss_scale);
  // Sums the tied embedding's gradient between the first and the last stage (pp > 1).
  void reduce_embedding_gradient();
  // TrainingDiverged's message for step `step` (1-based) of result `r`.
  std::string diverged_message(int64_t step, const StepResult& r) const;
  // The metrics line of step `step` (1-based): val_loss when the step was evaluated, the fp16
  // fields, and "diverged" on a diverged step.
  std::vector<std::pair<std::string, double>> step_fields(int64_t step, const StepResult& r,
                                                          const ProgressLine& progress,
                                                          std::optional<double> val_loss) const;
  // Bytes and time per group and step, printed at the end of run().
  std::string communication_report() const;
  // run.profile's table (kernel_time_table) after run(): printed by rank 0, a file per rank.
  void write_kernel_profile() const;
  const io::RunConfig& config_;
  parallel::ParallelContext& ctx_;
  kernels::Backend& backend_;
  kernels::TimingBackend* profile_ = nullptr;  // run.profile (profile_kernels)
  StallWatchdog* watchdog_ = nullptr;          // run.stall_timeout (watch)
  int64_t watched_step_ = 0;                   // the step run() is at, 1-based, for validation's marks
  kernels::Precision precision_ = kernels::Precision::kFp32;  // train.precision
  parallel::WirePrecision grad_reduce_ = kernels::Precision::kFp32;  // parallel.grad_reduce (data-parallel sums)
  LossScaler scaler_;  // used with fp16 only
  bool zero_ = false;          // parallel.zero = 1: optimizer state sharded over the data group
  parallel::ArenaShard shard_;  // this rank's block of the arenas (the whole arena without ZeRO)
  model::Gpt model_;
  AdamW optimizer_;
  std::vector<NormSegment> norm_segments_;
  LrSchedule schedule_;
  io::BatchLoader loader_;
  parallel::GradientBuckets buckets_;
  // Collective over the world: every rank's kernel choices made by timing (the backend's
  // matmul_algorithm_choices, under run.matmul_algorithms = timed) merged in rank order, and
  // taken by every rank, so that all run the same kernel at a shape from now on; returns the
  // merged table ("" where nothing was timed). After the first step and at each checkpoint, which
  // keeps the table for a restart to take (trainer_checkpoint.cpp).
  std::string settle_matmul_algorithms();
  // ZeRO-1 with parallel.overlap_param_gather: the parameter gather the next forward waits on.
  std::optional<parallel::ParameterGather> gather_;
  // Waits for a pending parameter gather (before the parameters are read other than by forward).
  void finish_parameter_gather() {
    if (gather_) gather_->finish();
  }
  PipelinePlan plan_;
  int64_t micro_batches_ = 0;
  double tokens_per_step_ = 0.0;
  std::vector<int32_t> tokens_, targets_;
  // Communication measured over the training steps after the first (validation excluded).
  std::vector<parallel::ParallelContext::GroupStats> comm_totals_;
  double measured_seconds_ = 0.0;
  std::string deck_text_;
  int64_t measured_steps_ = 0;
};

}  // namespace trident::train
