// The schema table of the input deck, and lookups in it (nearest key for misspellings).
#include "io/deck_schema.h"

#include <algorithm>  // std::min
#include <cstddef>    // size_t
#include <utility>    // std::move

#include "io/validation_split.h"  // kMaxValFraction

namespace trident::io {
namespace {

using Bound = std::optional<double>;
constexpr Bound kNone = std::nullopt;

KeySpec int_key(std::string name, std::string default_text, Bound min, Bound max,
                std::string description) {
  KeySpec spec;
  spec.name = std::move(name);
  spec.type = ValueType::kInt;
  spec.default_text = std::move(default_text);
  spec.min = min;
  spec.max = max;
  spec.description = std::move(description);
  return spec;
}

// A float key; `min_exclusive` / `max_exclusive` make an open end of the interval.
KeySpec float_key(std::string name, std::string default_text, Bound min, bool min_exclusive,
                  Bound max, bool max_exclusive, std::string description) {
  KeySpec spec = int_key(std::move(name), std::move(default_text), min, max,
                         std::move(description));
  spec.type = ValueType::kFloat;
  spec.min_exclusive = min_exclusive;
  spec.max_exclusive = max_exclusive;
  return spec;
}

KeySpec string_key(std::string name, std::string default_text, std::string description) {
  KeySpec spec;
  spec.name = std::move(name);
  spec.type = ValueType::kString;
  spec.default_text = std::move(default_text);
  spec.description = std::move(description);
  return spec;
}

KeySpec bool_key(std::string name, std::string default_text, std::string description) {
  KeySpec spec = string_key(std::move(name), std::move(default_text), std::move(description));
  spec.type = ValueType::kBool;
  return spec;
}

KeySpec choice_key(std::string name, std::string default_text,
                   std::vector<std::string> choices, std::string description) {
  KeySpec spec = string_key(std::move(name), std::move(default_text), std::move(description));
  spec.type = ValueType::kChoice;
  spec.choices = std::move(choices);
  return spec;
}

std::vector<KeySpec> make_schema() {
  return {
      // [run]
      string_key("run.dir", "run",
                 "Output directory of the run: the resolved deck (config.ini) and "
                 "metrics.jsonl are written here."),
      int_key("run.seed", "1234", 0, kNone,
              "Random seed for parameter initialisation and data order; same seed and deck "
              "give the same run on any layout."),
      choice_key("run.device", "cpu", {"cpu", "cuda", "auto"},
                 "Where the kernels run: cpu, cuda (fails without a GPU), or auto (cuda when a "
                 "GPU is visible, else cpu)."),
      choice_key("run.attention", "auto", {"auto", "gemm", "flash"},
                 "Attention kernels: gemm (the scores through a T x T workspace per head, one layer "
                 "at a time; every device), flash (tiled, online softmax, nothing T x T; tensor cores under "
                 "bf16 and fp16; CUDA only, model.hidden / model.heads = 64, compute capability 8.0 or later), "
                 "or auto (flash where it runs on the tensor cores: CUDA, bf16 or fp16, heads of 64 channels, a "
                 "GPU that gives a block its 66,560 bytes of shared memory, not Turing's 64 KiB; gemm "
                 "otherwise). Flash was 1.5 "
                 "to 1.6 times faster a bf16 step on one H100 (docs/performance.md)."),
      choice_key("run.matmul_epilogues", "fused", {"fused", "separate"},
                 "16-bit matmuls on CUDA: fused (bias, GELU and GELU gradient in cuBLASLt's epilogues, "
                 "no pass of their own) or separate (cuBLAS GEMMs, then bias and GELU kernels). fp32 "
                 "and the CPU always run separate kernels."),
      int_key("run.attention_blocks", "4", 1, 1024,
              "GEMM attention on CUDA: causal row blocks. 1 runs each product over the full T x T "
              "square; k runs it per block of about T / k queries against the keys below the block's end, "
              "leaving out about (k - 1) / 2k of the square's work for k times the calls (blocks start on "
              "multiples of 8 rows; at most T / 8 blocks, rounded up). "
              "Results agree to rounding; flash attention and the CPU ignore it. 4 was the fastest on one "
              "H100 (docs/performance.md)."),
      choice_key("run.attention_batching", "pointers", {"strided", "pointers"},
                 "GEMM attention on CUDA: each product over the batch x heads matrices as min(batch, "
                 "heads) strided batched cuBLAS calls (strided) or one pointer-array batched call "
                 "(pointers, the faster on one H100). The same products; flash attention and the CPU ignore it."),
      choice_key("run.flash_dq", "separate", {"separate", "key_walk"},
                 "Flash attention's 16-bit backward on CUDA: dQ in a second walk over the query tiles that "
                 "recomputes the scores (separate: 7 tile products per query and key tile pair) or in the "
                 "dK/dV walk, the key tiles adding their shares in a fixed order (key_walk: 5 products, B x T "
                 "x C floats more workspace, the same bits from run to run). Not yet timed on a GPU; results "
                 "agree to rounding. The CPU and the GEMM attention ignore it."),
      choice_key("run.flash_block_order", "head_by_head", {"head_by_head", "longest_first"},
                 "Flash attention's 16-bit kernels on CUDA: which blocks take which tiles. head_by_head: each "
                 "head's tiles in turn, the longest causal walk first; longest_first: every head's longest walk "
                 "before any head's next, so that the grid ends on its shortest blocks. The same bits either "
                 "way; not yet timed on a GPU. dQ in the key walk keeps its own order; the CPU and the GEMM "
                 "attention ignore it."),
      choice_key("run.flash_forward", "mma_sync", {"mma_sync", "wgmma", "wgmma_overlapped"},
                 "Flash attention's 16-bit forward on CUDA: its products on mma.sync, each warp its own "
                 "(mma_sync), or on Hopper's warpgroup products (wgmma: K and V read from shared memory once "
                 "for the warpgroup; wgmma_overlapped: each key tile's scores issued with the previous tile's "
                 "P V behind them, its softmax run while P V is in flight). wgmma needs a compute capability "
                 "9.0 GPU and a build with sm_90 code. Results agree to rounding; not yet timed on a GPU. The "
                 "CPU, fp32 and the GEMM attention ignore it."),
      choice_key("run.flash_backward", "mma_sync", {"mma_sync", "wgmma", "wgmma_overlapped"},
                 "Flash attention's 16-bit backward on CUDA: its products on mma.sync (mma_sync) or on Hopper's "
                 "warpgroup products (wgmma; wgmma_overlapped: each walked tile's scores issued with the previous "
                 "tile's dV and dK, or dQ, products behind them; not with run.flash_dq = key_walk). wgmma needs a "
                 "compute capability 9.0 GPU and a build with sm_90 code. Results agree to rounding; not yet "
                 "timed on a GPU. The CPU, fp32 and the GEMM attention ignore it."),
      int_key("run.flash_warpgroups", "1", 1, 2,
              "The warpgroups a block of flash attention's wgmma kernels on CUDA (run.flash_forward or "
              "run.flash_backward = wgmma or wgmma_overlapped): 1 (64 queries, or keys, a block) or 2 (128, "
              "sharing each tile read into shared memory: half the tile copies). 2 needs run.flash_dq = "
              "separate where the backward takes wgmma. Results agree to rounding; not yet timed on a GPU. "
              "mma_sync, the CPU, fp32 and the GEMM attention ignore it."),
      choice_key("run.layernorm_sums", "separate", {"separate", "row_walk"},
                 "LayerNorm's backward on CUDA: its weight and bias gradients summed in a pass of their own "
                 "(separate) or while each row's input gradient is made (row_walk: one read of the gradient "
                 "and the input instead of two). Not yet timed on a GPU; results agree to rounding. The CPU "
                 "ignores it."),
      choice_key("run.cross_entropy_loads", "values", {"values", "packs"},
                 "The cross-entropy backward on CUDA: each thread reads the logits one value at a time "
                 "(values) or 16 bytes at a time (packs). The same bits either way; not yet timed on a GPU. "
                 "The CPU ignores it."),
      choice_key("run.adamw_loads", "values", {"values", "packs"},
                 "The AdamW update on CUDA: each thread updates one element at a time (values) or four "
                 "consecutive ones on 16-byte loads and stores (packs). The same bits either way; not yet "
                 "timed on a GPU. The CPU ignores it."),
      choice_key("run.matmul_backward_streams", "one", {"one", "two"},
                 "A linear layer's backward on CUDA: its weight and bias gradients queued after the input "
                 "gradient on the one stream (one), or beside it on a second stream, joined before the layer's "
                 "backward returns (two: the two GEMMs share the GPU). The same bits either way; not yet timed "
                 "on a GPU. The CPU ignores it."),
      choice_key("run.matmul_bias_gradients", "column_sums", {"column_sums", "epilogue"},
                 "A 16-bit linear layer's bias gradient on CUDA: summed over the tokens in a pass of its own "
                 "(column_sums) or in the weight gradient's GEMM, which reads the same gradient anyway (epilogue: "
                 "cuBLASLt's bias-gradient epilogue where cuBLASLt offers it, else the column sums; with "
                 "run.matmul_backward_streams = two, 32 MiB more GPU memory for the second stream's cuBLASLt). "
                 "Results agree to rounding; not yet timed on a GPU. fp32 runs and the CPU ignore it."),
      choice_key("run.matmul_algorithms", "heuristic", {"heuristic", "timed"},
                 "The kernel of a 16-bit linear layer's cuBLASLt products on CUDA: the first answer of "
                 "cuBLASLt's heuristic (heuristic; the backward's input and weight gradients then run on "
                 "cublasGemmEx), or, at each product shape's first call, the fastest of up to 8 of its answers, "
                 "timed on that call's operands, with the backward's two products on cuBLASLt too (timed; the "
                 "timing takes milliseconds at start, and a weight gradient's shape a scratch of its size while "
                 "timed). Results agree to rounding. After the first step every rank runs the kernel the ranks "
                 "agree on at each shape (the lowest rank's), and checkpoints keep them, so that a restart on "
                 "the same cuBLASLt and GPU runs the same kernels and gives the uninterrupted run's bits (on "
                 "another, it times anew: rounding). Not yet timed on a GPU. fp32 runs, "
                 "run.matmul_epilogues = separate and the CPU ignore it."),
      int_key("run.threads", "0", 0, kNone,
              "CPU threads per rank; 0 = the node's cores divided by the ranks on the node, at most the CPUs "
              "the launcher binds the rank to (Open MPI binds each rank of a 1- or 2-rank job to one core unless "
              "--bind-to none; docs/running.md)."),
      bool_key("run.profile", "false",
               "Time every kernel call and print, at the end, where a step went: per kernel, ms per step and "
               "share, over the steps after the first (also in run.dir/profile-rank<N>.txt, one per rank). "
               "Each call is timed alone, the device drained before and after it, so profiled steps run "
               "slower than plain ones; the results are the same."),
      int_key("run.stall_timeout", "1800", 0, kNone,
              "Seconds a rank may go without progress (a pipeline action, a reduction, the optimizer, a "
              "validation micro-batch, a checkpoint write) before it ends the job with exit status 4, saying "
              "where it was: a peer stuck or gone (a lost NCCL collective, a hung file system, a GPU fault) "
              "would otherwise hold the job until its time limit. Job scripts rerun it from the newest "
              "checkpoint. 0: never."),
      bool_key("run.save_final", "true",
               "Write the final parameters to run.dir/final-params.h5 (global shapes, any layout)."),
      string_key("run.restart", "auto",
                 "Where to resume from: auto (the newest checkpoint in checkpoint.dir whose checksums "
                 "verify, a newer corrupt one set aside; none there: a fresh start, unless run.dir holds a "
                 "finished run), none (a fresh start, refused where checkpoint.dir already holds checkpoints), or "
                 "the path of a checkpoint file (refused when checkpoint.dir holds later ones)."),

      // [model]
      int_key("model.layers", "12", 1, 1024, "Number of transformer blocks."),
      int_key("model.heads", "12", 1, 1024,
              "Attention heads per block; must divide model.hidden."),
      int_key("model.hidden", "768", 1, 65536, "Width of the residual stream (embedding size)."),
      int_key("model.context", "1024", 1, 1048576,
              "Largest sequence length the model supports (rows of the position embedding)."),
      int_key("model.vocab", "50257", 2, 4194304,
              "Real vocabulary size; must cover every token id in the data."),
      int_key("model.vocab_multiple", "128", 1, 65536,
              "The embedding table is padded to a multiple of this many rows for faster "
              "kernels (padded logits are never predicted)."),

      // [data]
      string_key("data.path", "data/tokens.h5", "HDF5 token file to train and validate on."),
      choice_key("data.generate", "none", {"none", "synthetic"},
                 "What to do when data.path is missing: none (error) or synthetic (generate a "
                 "synthetic Markov source there)."),
      int_key("data.synthetic_vocab", "32", 2, 65536,
              "Vocabulary size of a generated synthetic source."),
      int_key("data.synthetic_order", "2", 1, 8,
              "Markov order of a generated source: each token depends on this many previous "
              "tokens."),
      int_key("data.synthetic_branching", "4", 1, 64,
              "Possible next tokens per context in a generated source (lower = more "
              "learnable)."),
      int_key("data.synthetic_tokens", "2000000", 1000, kNone,
              "Number of tokens in a generated source."),
      float_key("data.val_fraction", "0.05", 0, true, kMaxValFraction, false,
                "Share of a generated file held out for validation."),

      // [train]
      // The upper bounds keep every count made of them (tokens per step, sample positions over
      // the run) far inside 64 bits: 2^31 steps of 2^24 sequences of 2^20 tokens.
      int_key("train.steps", "100", 1, 2147483647.0, "Optimizer steps to run."),
      int_key("train.global_batch", "8", 1, 16777216.0,
              "Sequences per optimizer step, over all data-parallel ranks; a multiple of "
              "train.micro_batch."),
      int_key("train.micro_batch", "8", 1, 16777216.0,
              "Sequences per forward/backward pass on one rank; gradients accumulate over "
              "global_batch / (micro_batch * dp) passes."),
      int_key("train.seq_len", "1024", 1, kNone,
              "Tokens per training sequence; at most model.context."),
      int_key("train.eval_every", "0", 0, kNone,
              "Run validation every this many steps; 0 = only at the end."),
      int_key("train.eval_batches", "4", 0, kNone,
              "Global batches of validation data per evaluation; 0 = no validation."),
      choice_key("train.recompute", "none", {"none", "full"},
                 "Activation recomputation: none keeps every block's activations for backward; "
                 "full keeps only each block's input and recomputes the block in backward."),
      choice_key("train.precision", "fp32", {"fp32", "bf16", "fp16"},
                 "Storage precision of activations and compute weights: fp32, or bf16 / fp16 mixed "
                 "precision (fp32 master weights, optimizer state and gradients; fp16 adds "
                 "dynamic loss scaling)."),
      float_key("train.loss_scale", "65536", 1, false, 16777216, false,
                "fp16 only: the initial loss scale, at most 2^24 = 16777216; it halves on every step whose "
                "gradients overflow (the step is skipped) and doubles after train.loss_scale_window clean "
                "steps, up to 2^24."),
      int_key("train.loss_scale_window", "2000", 1, kNone,
              "fp16 only: clean steps in a row before the loss scale doubles."),

      // [optim]
      float_key("optim.lr", "6e-4", 0, true, 1, false,
                "Peak learning rate of AdamW, reached at the end of the warm-up."),
      float_key("optim.min_lr", "6e-5", 0, false, kNone, false,
                "Learning rate at the end of the cosine decay (and after it); at most "
                "optim.lr."),
      int_key("optim.warmup_steps", "0", 0, kNone,
              "Steps of linear warm-up from 0 to optim.lr."),
      int_key("optim.decay_steps", "0", 0, kNone,
              "Step at which the cosine decay reaches optim.min_lr; 0 = train.steps."),
      float_key("optim.beta1", "0.9", 0, false, 1, true,
                "AdamW decay rate of the first moment (gradient mean)."),
      float_key("optim.beta2", "0.95", 0, false, 1, true,
                "AdamW decay rate of the second moment (squared gradient mean)."),
      float_key("optim.eps", "1e-8", 0, true, kNone, false,
                "AdamW term added to the root of the second moment, avoiding division by "
                "zero."),
      float_key("optim.weight_decay", "0.1", 0, false, kNone, false,
                "Decoupled weight decay; applied to matrices and embeddings, not to biases "
                "and norms."),
      float_key("optim.grad_clip", "1", 0, false, kNone, false,
                "Clip the global gradient norm to this value; 0 = off."),

      // [parallel]
      // The upper bounds keep the products of the sizes (dp * tp * pp, virtual_stages * pp) far
      // inside 64 bits: tp divides model.heads and pp is at most model.layers (both <= 1024), and
      // dp divides the micro-batches of a step (global_batch <= 2^24).
      int_key("parallel.dp", "0", 0, 16777216.0,
              "Data-parallel size; 0 = world size / (tp * pp). dp * tp * pp must equal the "
              "number of ranks."),
      int_key("parallel.tp", "1", 1, 1024,
              "Tensor-parallel size: ranks sharing each layer's matrices."),
      int_key("parallel.pp", "1", 1, 1024,
              "Pipeline-parallel size: ranks holding consecutive groups of layers."),
      float_key("parallel.bucket_mb", "25", 0, true, kNone, false,
                "Size in MiB of the gradient buckets reduced across data-parallel ranks while "
                "the backward pass goes on."),
      choice_key("parallel.schedule", "1f1b", {"gpipe", "1f1b", "interleaved"},
                 "Pipeline schedule (pp > 1): gpipe runs all forwards then all backwards; 1f1b "
                 "interleaves them after a warm-up and holds at most pp - stage micro-batches; "
                 "interleaved gives each rank parallel.virtual_stages model chunks (Megatron's "
                 "virtual pipeline: bubble divided by their number; micro-batches per step must be "
                 "a multiple of pp)."),
      int_key("parallel.virtual_stages", "2", 1, 1024,
              "Model chunks per pipeline rank for parallel.schedule = interleaved, at least 2 there (the "
              "layers are split over virtual_stages * pp virtual stages); ignored by the other schedules."),
      string_key("parallel.stage_layers", "even",
                 "Layers per pipeline stage: even (the first layers % pp stages get one more), or "
                 "a comma-separated count per stage summing to model.layers, e.g. 5,7. With "
                 "parallel.schedule = interleaved: per virtual stage (virtual_stages * pp counts, "
                 "virtual stage c * pp + s being chunk c of rank s)."),
      int_key("parallel.zero", "0", 0, 1,
              "ZeRO stage: 0 = every data rank holds the whole optimizer state; 1 = the AdamW "
              "state is sharded over the data-parallel group (gradient buckets summed to the rank "
              "owning them, overlapping backward; update the own shard; all-gather parameters)."),
      bool_key("parallel.overlap_param_gather", "true",
               "With parallel.zero = 1: the updated parameters go out bucket by bucket, each "
               "broadcast from its owner, and the next forward waits for each bucket only when it "
               "reaches it (overlapping on GPUs with NCCL); false = one all-gather after the update. "
               "Same values either way."),
      bool_key("parallel.sequence_parallel", "false",
               "Sequence parallelism (with parallel.tp > 1): outside the matmuls each tensor rank "
               "keeps only its 1/tp of the micro-batch's token rows (LayerNorms, residual stream, "
               "stage boundaries), with all-gather / reduce-scatter in place of the all-reduces "
               "(same bytes). train.micro_batch * train.seq_len must be divisible by parallel.tp."),

      choice_key("parallel.grad_reduce", "auto", {"auto", "fp32", "bf16", "fp16"},
                 "Precision the data-parallel gradient reduction (its buckets, all-reduced or under ZeRO-1 "
                 "summed to their owners) "
                 "sends and sums in: auto = train.precision (half the bytes in bf16 and fp16, each "
                 "partial sum rounded to that format); fp32 keeps full-precision sums in every "
                 "precision. Gradients are accumulated over micro-batches in fp32 either way."),
      choice_key("parallel.comm", "nccl", {"nccl", "mpi"},
                 "How ranks on GPUs communicate: nccl (NCCL on device memory, on its own stream; one "
                 "GPU per rank) or mpi (device buffers staged through host memory; ranks may share a "
                 "GPU, to test layouts). CPU runs always use MPI."),

      // [log]
      int_key("log.every", "10", 1, kNone, "Print a progress line every this many steps."),
      float_key("log.peak_tflops", "0", 0, false, kNone, false,
                "Peak TFLOP/s of one rank, the denominator of MFU; 0 = the datasheet peak of a known "
                "GPU (H100, H200, A100) for train.precision, else this machine's sgemm rate "
                "measured at start-up."),

      // [checkpoint]
      int_key("checkpoint.every", "0", 0, kNone,
              "Write a checkpoint every this many steps (and after the last step); 0 = never."),
      string_key("checkpoint.dir", "checkpoints",
                 "Directory of the checkpoints and of the `latest` pointer; relative to run.dir unless "
                 "absolute."),
      int_key("checkpoint.keep", "3", 1, kNone,
              "Newest checkpoints kept; older ones are removed once a new one is complete."),
  };
}

// Levenshtein distance, for suggesting the key a typo meant.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const size_t substitution = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitution});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string key_of(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

}  // namespace

const std::vector<KeySpec>& deck_schema() {
  static const std::vector<KeySpec> schema = make_schema();
  return schema;
}

const std::vector<SectionSpec>& deck_sections() {
  static const std::vector<SectionSpec> sections = {
      {"run", "Where the run writes, its seed, and the hardware it uses."},
      {"model", "Shape of the GPT-2 model."},
      {"data", "The token file, and the synthetic source generated when it is missing."},
      {"train", "Length of training, batch sizes and validation."},
      {"optim", "AdamW with linear warm-up and cosine decay of the learning rate."},
      {"parallel", "How the ranks are split into data-, tensor- and pipeline-parallel groups."},
      {"log", "Progress lines and the model-FLOPs-utilisation (MFU) estimate."},
      {"checkpoint", "HDF5 checkpoints: parameters and optimizer state at global shapes, any layout."},
  };
  return sections;
}

const KeySpec* find_key_spec(const std::string& name) {
  for (const KeySpec& spec : deck_schema()) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

std::string section_of(const std::string& name) {
  const size_t dot = name.find('.');
  return dot == std::string::npos ? std::string() : name.substr(0, dot);
}

std::string nearest_key(const std::string& name) {
  // The right key in the wrong section (or with no section), e.g. train.lr -> optim.lr.
  const std::string key = key_of(name);
  for (const KeySpec& spec : deck_schema()) {
    if (key_of(spec.name) == key) return spec.name;
  }
  // Otherwise a typo: accept up to a quarter of the name's length in edits (at least 2).
  const size_t allowed = std::max<size_t>(2, name.size() / 4);
  std::string best;
  size_t best_distance = allowed + 1;
  for (const KeySpec& spec : deck_schema()) {
    const size_t distance = edit_distance(name, spec.name);
    if (distance < best_distance) {
      best_distance = distance;
      best = spec.name;
    }
  }
  return best;
}

}  // namespace trident::io
