#include "src/app/restart_compatibility.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "io/user_error.h"

namespace trident::app {

namespace {

// Keys a restart may change that change what the remaining steps train.
constexpr std::array<std::string_view, 5> kScheduleKeys = {"optim.lr", "optim.min_lr", "optim.warmup_steps",
                                                           "optim.decay_steps", "optim.grad_clip"};

}  // namespace

bool restart_may_change(const std::string& key) {
  // Whole sections, then single keys.
  constexpr std::array<std::string_view, 3> kSections = {"parallel.", "log.", "checkpoint."};
  // train.precision may change too: checkpoints hold fp32 master weights whatever the precision
  // (an fp16 run resumed from another precision starts at train.loss_scale). So may the choice
  // of kernels (run.attention and the GEMM attention's schedule, run.matmul_epilogues, the
  // choices waiting for a GPU's timing: run.flash_dq, flash_block_order, flash_forward,
  // flash_backward, flash_warpgroups, layernorm_sums,
  // cross_entropy_loads, adamw_loads, matmul_backward_streams, matmul_bias_gradients,
  // matmul_algorithms), which like run.device changes the results only by rounding
  // (flash_block_order not at all). run.profile and run.stall_timeout change no result, nor does train.recompute
  // (the recomputed activations are bit-identical: GptRecompute's test), which a run short of
  // memory may switch on when it resumes. model.vocab_multiple only pads wte with zero rows that
  // belong to no token, as parallel.tp does: the checkpoint's padded rows are read like another
  // tp's. The learning-rate schedule and the clipping threshold
  // may change too: they are the remedies of a diverged run (exit 3's message advises a lower
  // optim.lr or a longer warm-up), and the checkpoint holds nothing derived from them; the
  // resumed run says which it changed (changed_training_keys).
  constexpr std::array<std::string_view, 32> kKeys = {
      "run.dir",          "run.restart",      "run.threads",        "run.device",        "run.save_final",
      "train.steps",      "train.eval_every", "train.eval_batches", "train.micro_batch", "data.path",
      "train.precision",  "train.loss_scale", "train.loss_scale_window", "run.attention", "run.matmul_epilogues",
      "run.attention_blocks", "run.attention_batching", "run.flash_dq", "run.flash_block_order",
      "run.flash_forward", "run.flash_backward", "run.flash_warpgroups", "run.layernorm_sums", "run.cross_entropy_loads", "run.adamw_loads",
      "run.matmul_backward_streams", "run.matmul_bias_gradients", "run.matmul_algorithms", "run.profile",
      "train.recompute", "run.stall_timeout", "model.vocab_multiple"};
  for (std::string_view section : kSections) {
    if (key.rfind(section, 0) == 0) return true;
  }
  for (std::string_view name : kKeys) {
    if (key == name) return true;
  }
  for (std::string_view name : kScheduleKeys) {
    if (key == name) return true;
  }
  // data.generate only says what to do when the file is missing.
  return key == "data.generate";
}

void check_restart_compatible(const io::ResolvedDeck& checkpoint_deck, const io::ResolvedDeck& run_deck,
                              const std::string& checkpoint_path) {
  for (const auto& [key, value] : run_deck.entries()) {
    if (restart_may_change(key)) continue;
    const std::string& saved = checkpoint_deck.value(key);
    if (saved != value) {
      throw io::UserError("run.restart: " + key + " = " + value + " differs from " + saved + " in checkpoint '" +
                          checkpoint_path + "'; a restart may change only the steps, evaluation, micro-batch, "
                          "recomputation, layout, precision, device, kernels, learning-rate schedule, gradient clipping, "
                          "logging, checkpoint cadence, threads and paths (docs/checkpoint-format.md; set " + key + " = " + saved + " to resume, or give another " +
                          "run.dir to start afresh)");
    }
  }
}

std::string changed_training_keys(const io::ResolvedDeck& checkpoint_deck, const io::ResolvedDeck& run_deck) {
  // The schedule, and the dataset: another file (moved, or another one) is allowed, and named.
  std::array<std::string_view, kScheduleKeys.size() + 1> noted{};
  std::copy(kScheduleKeys.begin(), kScheduleKeys.end(), noted.begin());
  noted.back() = "data.path";
  std::string changes;
  for (std::string_view name : noted) {
    const std::string key(name);
    const std::string& saved = checkpoint_deck.value(key);
    const std::string& value = run_deck.value(key);
    if (saved == value) continue;
    changes += (changes.empty() ? "" : ", ") + key + " = " + value + " (" + saved + " in the checkpoint)";
  }
  return changes;
}

}  // namespace trident::app
