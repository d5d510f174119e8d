// Typed values of a resolved deck, and the checks between keys that need neither the world
// size nor the dataset (those are made where the layout and the data are known).
#include <algorithm>  // std::max
#include <charconv>  // std::from_chars
#include <cmath>     // std::ceil
#include <cstdio>    // std::snprintf
#include <cstdint>   // int64_t, uint64_t
#include <limits>    // std::numeric_limits
#include <string>

#include "io/deck.h"        // ResolvedDeck, to_run_config
#include "io/user_error.h"  // UserError

namespace trident::io {
namespace {

// Values of a ResolvedDeck are already checked and canonical, so these parses cannot fail
// for keys of the right type; the range of `int` is the one thing left to check.
int64_t int64_value(const ResolvedDeck& deck, const std::string& name) {
  const std::string& text = deck.value(name);
  int64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

int int_value(const ResolvedDeck& deck, const std::string& name) {
  const int64_t value = int64_value(deck, name);
  if (value > std::numeric_limits<int>::max() || value < std::numeric_limits<int>::min()) {
    throw UserError(name + " = " + deck.value(name) + " is out of range (must be <= " +
                    std::to_string(std::numeric_limits<int>::max()) + ")");
  }
  return static_cast<int>(value);
}

double double_value(const ResolvedDeck& deck, const std::string& name) {
  const std::string& text = deck.value(name);
  double value = 0.0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

// "name = value", as messages quote a key.
std::string quoted(const ResolvedDeck& deck, const std::string& name) {
  return name + " = " + deck.value(name);
}

void check_heads_divide_hidden(const ResolvedDeck& deck, const ModelSection& model) {
  if (model.hidden % model.heads == 0) return;
  int fewer = model.heads;
  while (model.hidden % fewer != 0) --fewer;  // stops at 1 at the latest
  int more = model.heads;
  while (more <= model.hidden && model.hidden % more != 0) ++more;
  std::string options = "model.heads = " + std::to_string(fewer);
  if (more <= model.hidden) options += " or " + std::to_string(more);
  throw UserError(quoted(deck, "model.heads") + " does not divide " +
                  quoted(deck, "model.hidden") + " (each head gets hidden / heads channels: " +
                  "use " + options + ", or a model.hidden that is a multiple of " +
                  std::to_string(model.heads) + ")");
}

void check_micro_batch_divides_global(const ResolvedDeck& deck, const TrainSection& train) {
  if (train.global_batch % train.micro_batch == 0) return;
  const int64_t lower = train.global_batch / train.micro_batch * train.micro_batch;
  const int64_t upper = lower + train.micro_batch;
  std::string options = "train.global_batch = ";
  if (lower > 0) options += std::to_string(lower) + " or ";
  options += std::to_string(upper);
  throw UserError(quoted(deck, "train.global_batch") + " is not a multiple of " +
                  quoted(deck, "train.micro_batch") + " (use " + options +
                  ", or a train.micro_batch that divides " +
                  std::to_string(train.global_batch) + ")");
}

// run.flash_warpgroups = 2 sets the wgmma kernels' blocks: a deck asking for it without a wgmma
// kernel would time or train something other than it says. The backward's two warpgroups make dQ
// in its own walk (kernels/cuda/flash_attention_wgmma_backward.cu).
void check_flash_warpgroups(const ResolvedDeck& deck, const RunSection& run) {
  if (run.flash_warpgroups == 1) return;
  const bool forward = run.flash_forward != "mma_sync";
  const bool backward = run.flash_backward != "mma_sync";
  if (!forward && !backward) {
    throw UserError(quoted(deck, "run.flash_warpgroups") + " sets the wgmma kernels' blocks, but " +
                    quoted(deck, "run.flash_forward") + " and " + quoted(deck, "run.flash_backward") +
                    " (use run.flash_forward or run.flash_backward = wgmma, or run.flash_warpgroups = 1)");
  }
  if (backward && run.flash_dq == "key_walk") {
    throw UserError(quoted(deck, "run.flash_warpgroups") + " makes the wgmma backward's dQ in its own walk, but " +
                    quoted(deck, "run.flash_dq") + " (use run.flash_dq = separate, or run.flash_warpgroups = 1)");
  }
}

// The largest tensor of one micro-batch, in elements: its token rows times the widest of the MLP's
// 4 * hidden, the padded vocabulary's logits and the GEMM attention's scores. A bound far beyond
// any machine (2^40 elements, 4 TiB in fp32) keeps every byte count of the activations (about 20
// such tensors a layer, 1024 layers, the micro-batches in flight) inside 64 bits, so the memory
// estimate cannot wrap to a size that fits.
void check_micro_batch_tensors(const ResolvedDeck& deck, const RunConfig& config) {
  const auto rows = static_cast<long double>(config.train.micro_batch) * config.train.seq_len;
  const long double padded_vocab = std::ceil(static_cast<long double>(config.model.vocab) / config.model.vocab_multiple) *
                                   config.model.vocab_multiple;
  const long double widest = std::max({4.0L * config.model.hidden, padded_vocab,
                                       static_cast<long double>(config.model.heads) * config.train.seq_len});
  constexpr long double kMaxElements = 1099511627776.0L;  // 2^40
  if (rows * widest <= kMaxElements) return;
  char elements[32];
  std::snprintf(elements, sizeof elements, "%.3Lg", rows * widest);
  throw UserError(quoted(deck, "train.micro_batch") + " and " + quoted(deck, "train.seq_len") + " make " +
                  std::to_string(static_cast<int64_t>(rows)) + " token rows a micro-batch, and its widest tensor (" +
                  std::to_string(static_cast<int64_t>(widest)) +
                  " values a row: the widest of 4 * model.hidden, the padded vocabulary and model.heads * "
                  "train.seq_len attention scores) would hold " + elements +
                  " elements, more than 2^40 (4 TiB in fp32), beyond any machine (lower train.micro_batch or "
                  "train.seq_len)");
}

void check_cross_keys(const ResolvedDeck& deck, const RunConfig& config) {
  check_heads_divide_hidden(deck, config.model);
  // Refused here, before the device is chosen, so that check refuses what train would: with
  // run.device = auto the choice is the node's, and train refuses flash where it falls on the CPU.
  if (config.run.attention == "flash" && config.run.device == "cpu") {
    throw UserError(quoted(deck, "run.attention") + ": only the CUDA backend has flash attention, but " +
                    quoted(deck, "run.device") + " (use run.attention = gemm, or run.device = cuda or auto)");
  }
  if (config.run.attention == "flash" && config.model.hidden / config.model.heads != kFlashHeadSize) {
    throw UserError(quoted(deck, "run.attention") + " needs heads of 64 channels, but " +
                    quoted(deck, "model.hidden") + " / " + quoted(deck, "model.heads") + " = " +
                    std::to_string(config.model.hidden / config.model.heads) +
                    " (use run.attention = gemm, or model.heads = " +
                    std::to_string(std::max(1, config.model.hidden / kFlashHeadSize)) + ")");
  }
  check_micro_batch_divides_global(deck, config.train);
  if (config.run.flash_backward == "wgmma_overlapped" && config.run.flash_dq == "key_walk") {
    // The overlapped backward keeps dQ in its own walk: the in-walk kernel has no registers for
    // a third product group in flight (kernels/cuda/flash_attention_wgmma_backward.cu).
    throw UserError(quoted(deck, "run.flash_backward") + " makes dQ in its own walk, but " +
                    quoted(deck, "run.flash_dq") +
                    " (use run.flash_dq = separate, or run.flash_backward = wgmma)");
  }
  check_flash_warpgroups(deck, config.run);
  if (config.train.seq_len > config.model.context) {
    throw UserError(quoted(deck, "train.seq_len") + " is larger than " +
                    quoted(deck, "model.context") + " (use train.seq_len <= " +
                    deck.value("model.context") + ", or model.context = " +
                    deck.value("train.seq_len") + ")");
  }
  check_micro_batch_tensors(deck, config);
  // The optimizer computes in fp32: values the deck's range admits but fp32 cannot tell from 0
  // or 1 make every update NaN (eps 5e-324 becomes 0; beta2 = 0.9999999999999999 becomes 1, and
  // the bias correction 1 - beta2^t with it), which was reported as diverged gradients.
  if (static_cast<float>(config.optim.eps) < std::numeric_limits<float>::min()) {
    throw UserError(quoted(deck, "optim.eps") + " is below the smallest normal fp32 number (about 1.2e-38), " +
                    "and the optimizer computes in fp32 (use optim.eps >= 1.2e-38; 1e-8 is usual)");
  }
  for (const char* key : {"optim.beta1", "optim.beta2"}) {
    const double beta = std::string(key) == "optim.beta1" ? config.optim.beta1 : config.optim.beta2;
    if (static_cast<float>(beta) >= 1.0f) {
      throw UserError(quoted(deck, key) + " rounds to 1 in fp32, in which the optimizer computes (use at most " +
                      "0.99999994, the largest fp32 number below 1)");
    }
  }
  if (config.optim.min_lr > config.optim.lr) {
    throw UserError(quoted(deck, "optim.min_lr") + " is larger than " +
                    quoted(deck, "optim.lr") +
                    " (the learning rate decays from lr down to min_lr: use optim.min_lr <= " +
                    deck.value("optim.lr") + ")");
  }
  if (config.optim.decay_steps > 0 && config.optim.warmup_steps > config.optim.decay_steps) {
    throw UserError(quoted(deck, "optim.warmup_steps") + " is larger than " +
                    quoted(deck, "optim.decay_steps") +
                    " (the warm-up must end before the decay does: use optim.warmup_steps <= " +
                    deck.value("optim.decay_steps") + ", optim.decay_steps >= " +
                    deck.value("optim.warmup_steps") + ", or optim.decay_steps = 0 to decay over train.steps)");
  }
}

}  // namespace

RunConfig to_run_config(const ResolvedDeck& deck) {
  RunConfig config;

  config.run.dir = deck.value("run.dir");
  config.run.seed = static_cast<uint64_t>(int64_value(deck, "run.seed"));
  config.run.device = deck.value("run.device");
  config.run.attention = deck.value("run.attention");
  config.run.matmul_epilogues = deck.value("run.matmul_epilogues");
  config.run.attention_blocks = int_value(deck, "run.attention_blocks");
  config.run.attention_batching = deck.value("run.attention_batching");
  config.run.flash_dq = deck.value("run.flash_dq");
  config.run.flash_block_order = deck.value("run.flash_block_order");
  config.run.flash_forward = deck.value("run.flash_forward");
  config.run.flash_backward = deck.value("run.flash_backward");
  config.run.flash_warpgroups = int_value(deck, "run.flash_warpgroups");
  config.run.layernorm_sums = deck.value("run.layernorm_sums");
  config.run.cross_entropy_loads = deck.value("run.cross_entropy_loads");
  config.run.adamw_loads = deck.value("run.adamw_loads");
  config.run.matmul_backward_streams = deck.value("run.matmul_backward_streams");
  config.run.matmul_bias_gradients = deck.value("run.matmul_bias_gradients");
  config.run.matmul_algorithms = deck.value("run.matmul_algorithms");
  config.run.threads = int_value(deck, "run.threads");
  config.run.profile = deck.value("run.profile") == "true";
  config.run.stall_timeout = int_value(deck, "run.stall_timeout");
  config.run.save_final = deck.value("run.save_final") == "true";
  config.run.restart = deck.value("run.restart");
  config.checkpoint.every = int64_value(deck, "checkpoint.every");
  config.checkpoint.dir = deck.value("checkpoint.dir");
  config.checkpoint.keep = int_value(deck, "checkpoint.keep");

  config.model.layers = int_value(deck, "model.layers");
  config.model.heads = int_value(deck, "model.heads");
  config.model.hidden = int_value(deck, "model.hidden");
  config.model.context = int_value(deck, "model.context");
  config.model.vocab = int_value(deck, "model.vocab");
  config.model.vocab_multiple = int_value(deck, "model.vocab_multiple");

  config.data.path = deck.value("data.path");
  config.data.generate = deck.value("data.generate");
  config.data.synthetic_vocab = int_value(deck, "data.synthetic_vocab");
  config.data.synthetic_order = int_value(deck, "data.synthetic_order");
  config.data.synthetic_branching = int_value(deck, "data.synthetic_branching");
  config.data.synthetic_tokens = int64_value(deck, "data.synthetic_tokens");
  config.data.val_fraction = double_value(deck, "data.val_fraction");

  config.train.steps = int64_value(deck, "train.steps");
  config.train.global_batch = int64_value(deck, "train.global_batch");
  config.train.micro_batch = int64_value(deck, "train.micro_batch");
  config.train.seq_len = int_value(deck, "train.seq_len");
  config.train.eval_every = int64_value(deck, "train.eval_every");
  config.train.eval_batches = int64_value(deck, "train.eval_batches");
  config.train.recompute = deck.value("train.recompute");
  config.train.precision = deck.value("train.precision");
  config.train.loss_scale = double_value(deck, "train.loss_scale");
  config.train.loss_scale_window = int_value(deck, "train.loss_scale_window");

  config.optim.lr = double_value(deck, "optim.lr");
  config.optim.min_lr = double_value(deck, "optim.min_lr");
  config.optim.warmup_steps = int64_value(deck, "optim.warmup_steps");
  config.optim.decay_steps = int64_value(deck, "optim.decay_steps");
  config.optim.beta1 = double_value(deck, "optim.beta1");
  config.optim.beta2 = double_value(deck, "optim.beta2");
  config.optim.eps = double_value(deck, "optim.eps");
  config.optim.weight_decay = double_value(deck, "optim.weight_decay");
  config.optim.grad_clip = double_value(deck, "optim.grad_clip");

  config.parallel.dp = int_value(deck, "parallel.dp");
  config.parallel.tp = int_value(deck, "parallel.tp");
  config.parallel.pp = int_value(deck, "parallel.pp");
  config.parallel.bucket_mb = double_value(deck, "parallel.bucket_mb");
  config.parallel.zero = int_value(deck, "parallel.zero");
  config.parallel.overlap_param_gather = deck.value("parallel.overlap_param_gather") == "true";
  config.parallel.sequence_parallel = deck.value("parallel.sequence_parallel") == "true";
  config.parallel.schedule = deck.value("parallel.schedule");
  config.parallel.stage_layers = deck.value("parallel.stage_layers");
  config.parallel.virtual_stages = int_value(deck, "parallel.virtual_stages");
  config.parallel.comm = deck.value("parallel.comm");
  // auto is resolved here, so that every user of the config sees the precision itself.
  const std::string grad_reduce = deck.value("parallel.grad_reduce");
  config.parallel.grad_reduce = grad_reduce == "auto" ? config.train.precision : grad_reduce;

  config.log.every = int64_value(deck, "log.every");
  config.log.peak_tflops = double_value(deck, "log.peak_tflops");

  check_cross_keys(deck, config);
  return config;
}

}  // namespace trident::io
