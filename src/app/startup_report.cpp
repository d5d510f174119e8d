#include "src/app/startup_report.h"

#include <cstdio>
#include <string>

#include "parallel/pipeline_schedule.h"
#include "src/app/memory_estimate.h"
#include "src/train/run_layout.h"

namespace trident::app {

std::string startup_report(const RunSetup& setup, const parallel::RankGrid& grid, std::size_t attention_scratch,
                           kernels::Native16BitKernels native, parallel::CommTransport transport) {
  std::string out = "---- resolved deck ----\n" + setup.deck.to_ini() + "-----------------------\n";
  out += grid.layout_table();
  const auto& m = setup.model;
  char line[512];
  std::snprintf(line, sizeof line,
                "model: GPT, %d layers, %d heads, hidden %d, context %d, vocab %d (padded to %d): "
                "%.2fM parameters (%.2fM stored with the padding rows), %.3g GFLOP per token at seq_len %d\n",
                m.layers, m.heads, m.hidden, m.context, m.vocab, m.padded_vocab,
                static_cast<double>(m.parameter_count() -
                                    static_cast<int64_t>(m.padded_vocab - m.vocab) * m.hidden) / 1e6,
                static_cast<double>(m.parameter_count()) / 1e6, m.flops_per_token(setup.config.train.seq_len) / 1e9,
                setup.config.train.seq_len);
  out += line;
  const auto& t = setup.config.train;
  // A warm-up longer than the run (the decay following train.steps; a decay shorter than the
  // warm-up is a deck error): say that the peak is never reached, which a short test run of a
  // production deck does on purpose and a real run does not.
  const auto& o = setup.config.optim;
  if (o.decay_steps == 0 && o.warmup_steps > t.steps) {
    std::snprintf(line, sizeof line,
                  "note: optim.warmup_steps = %lld is more than train.steps = %lld: the learning rate rises to %.4g "
                  "at the last step and never reaches optim.lr = %g\n",
                  static_cast<long long>(o.warmup_steps), static_cast<long long>(t.steps),
                  o.lr * static_cast<double>(t.steps) / static_cast<double>(o.warmup_steps), o.lr);
    out += line;
  }
  const int64_t micro_per_step = t.global_batch / (t.micro_batch * grid.dp());
  std::snprintf(line, sizeof line,
                "batch: %lld sequences x %d tokens per step = %lld tokens; %lld micro-batch(es) of %lld per data rank\n",
                static_cast<long long>(t.global_batch), t.seq_len, static_cast<long long>(t.global_batch * t.seq_len),
                static_cast<long long>(micro_per_step), static_cast<long long>(t.micro_batch));
  out += line;
  if (t.precision == "bf16") {
    out += "precision: bf16 activations and compute weights; fp32 master weights, gradients and optimizer state\n";
  } else if (t.precision == "fp16") {
    std::snprintf(line, sizeof line,
                  "precision: fp16 activations and compute weights; fp32 master weights, gradients and optimizer "
                  "state; dynamic loss scale from %g (doubling after %lld clean steps)\n",
                  t.loss_scale, static_cast<long long>(t.loss_scale_window));
    out += line;
  }
  if (t.precision != "fp32") {
    // Where the activations travel, they travel as stored: half of fp32's bytes there too.
    const char* moved = grid.tp() > 1 && grid.pp() > 1 ? "; the tensor and pipeline groups move them as "
                        : grid.tp() > 1                ? "; the tensor group moves them as "
                        : grid.pp() > 1                ? "; pipeline stages send them as "
                                                       : nullptr;
    out += "activation storage: " + t.precision + " buffers (half of fp32's memory)" +
           (moved ? moved + t.precision : std::string()) + "\n";
  }
  if (grid.dp() > 1) {
    // With several model chunks a rank (the interleaved schedule) a chunk's blocks are final only
    // after its last backward of the step, so its buckets start from there (src/train/trainer.cpp).
    const std::string when = train::chunks_per_rank(setup.config) > 1
                                 ? " overlapping backward (each chunk's from its last backward of the step on)"
                                 : " overlapping backward";
    std::snprintf(line, sizeof line, "gradient reduction: over %d data ranks in %s (parallel.grad_reduce)%s\n", grid.dp(),
                  setup.config.parallel.grad_reduce.c_str(),
                  setup.config.parallel.zero == 1
                      ? (", ZeRO-1 buckets summed to their owners" + when + ", then an all-gather of the " +
                         t.precision + " weights" +
                         (setup.config.parallel.overlap_param_gather
                              ? " bucket by bucket, each broadcast from its owner, overlapping the next forward"
                              : ""))
                            .c_str()
                      : (", buckets" + when).c_str());
    out += line;
    // fp16 sums outside an fp16 run have no loss scale to keep them in fp16's range: an explicit
    // choice, but not one to make unawares.
    if (setup.config.parallel.grad_reduce == "fp16" && setup.config.train.precision != "fp16") {
      out += "note: parallel.grad_reduce = fp16 in a " + setup.config.train.precision +
             " run, without fp16's loss scaling: gradients below about 6e-8 flush to zero on the wire, and a sum "
             "past 65504 overflows (a diverged step, exit 3); bf16 or fp32 keep the range\n";
    }
  }
  if (grid.pp() > 1) {
    const auto kind = parallel::parse_schedule_kind(setup.config.parallel.schedule);
    const int chunks = train::chunks_per_rank(setup.config);
    const double bubble =
        100.0 * parallel::ideal_bubble_fraction(kind, grid.pp(), static_cast<int>(micro_per_step), chunks);
    if (chunks > 1) {
      std::snprintf(line, sizeof line,
                    "pipeline: %d stages x %d virtual stages (chunks) each, schedule %s, ideal bubble "
                    "(p-1)/(v*m+p-1) = %.1f%%\n",
                    grid.pp(), chunks, setup.config.parallel.schedule.c_str(), bubble);
    } else {
      std::snprintf(line, sizeof line, "pipeline: %d stages, schedule %s, ideal bubble (p-1)/(m+p-1) = %.1f%%\n",
                    grid.pp(), setup.config.parallel.schedule.c_str(), bubble);
    }
    out += line;
  }
  std::vector<MemoryEstimate> stages;
  for (int s = 0; s < grid.pp(); ++s) {
    model::GptLayout layout = train::run_layout(setup.config, setup.stage_layers, 0, s);
    layout.native_16bit = native;
    stages.push_back(estimate_run_memory(setup.config, m, layout, attention_scratch, transport));
  }
  out += memory_table(stages, t.recompute.c_str(), setup.config.parallel.zero == 1 ? grid.dp() : 1);
  return out;
}

}  // namespace trident::app
