// The typed configuration of a run, filled from a resolved input deck (io/deck.h).
//
// Every field mirrors one deck key `section.key` declared in io/deck_schema.cpp, where its
// type, default, range and description live; this header only carries the values.
#pragma once

#include <cstdint>
#include <string>

namespace trident::io {

// The head size (model.hidden / model.heads) the flash attention kernels take: they keep a head's
// 64 channels per row in registers (kernels/cuda/flash_attention.cu). run.attention = flash asks
// for it; run.attention = auto takes flash only at it.
inline constexpr int kFlashHeadSize = 64;

struct RunSection {
  std::string dir;     // run.dir: output directory (config.ini, metrics.jsonl)
  uint64_t seed = 0;   // run.seed: initialisation and data order
  std::string device;  // run.device: cpu | cuda | auto
  std::string attention;  // run.attention: gemm | flash (kernels::AttentionKernel)
  std::string matmul_epilogues;  // run.matmul_epilogues: fused | separate (kernels::MatmulEpilogues)
  int attention_blocks = 4;         // run.attention_blocks: the CUDA GEMM attention's causal row blocks
  std::string attention_batching;   // run.attention_batching: strided | pointers (kernels::AttentionBatching)
  std::string flash_dq;             // run.flash_dq: separate | key_walk (kernels::FlashDq)
  std::string flash_block_order;    // run.flash_block_order: head_by_head | longest_first (kernels::FlashBlockOrder)
  std::string flash_forward;        // run.flash_forward: mma_sync | wgmma | wgmma_overlapped (kernels::FlashProducts,
                                    // kernels::WarpgroupSchedule)
  std::string flash_backward;       // run.flash_backward: the same three
  int flash_warpgroups = 1;         // run.flash_warpgroups: the wgmma kernels' warpgroups a block, 1 or 2
  std::string layernorm_sums;       // run.layernorm_sums: separate | row_walk (kernels::LayerNormParameterSums)
  std::string cross_entropy_loads;  // run.cross_entropy_loads: values | packs (kernels::CrossEntropyLoads)
  std::string adamw_loads;          // run.adamw_loads: values | packs (kernels::AdamWLoads)
  std::string matmul_backward_streams;  // run.matmul_backward_streams: one | two (kernels::MatmulBackwardStreams)
  std::string matmul_bias_gradients;  // run.matmul_bias_gradients: column_sums | epilogue (kernels::MatmulBiasGradients)
  std::string matmul_algorithms;  // run.matmul_algorithms: heuristic | timed (kernels::MatmulAlgorithms)
  int threads = 0;     // run.threads: threads per rank; 0 = node cores / ranks on the node
  bool profile = false;    // run.profile: time each kernel call, print where a step went
  int stall_timeout = 1800;  // run.stall_timeout: seconds without progress before a rank ends the job; 0 = never
  bool save_final = true;  // run.save_final: write run.dir/final-params.h5 at the end
  std::string restart;     // run.restart: auto | none | PATH
};

struct ModelSection {
  int layers = 0;          // model.layers
  int heads = 0;           // model.heads
  int hidden = 0;          // model.hidden (C)
  int context = 0;         // model.context: largest sequence length (positions)
  int vocab = 0;           // model.vocab: real vocabulary size
  int vocab_multiple = 0;  // model.vocab_multiple: padded vocabulary is a multiple of this
};

struct DataSection {
  std::string path;         // data.path: HDF5 token file
  std::string generate;     // data.generate: none | synthetic (make data.path when missing)
  int synthetic_vocab = 0;      // data.synthetic_vocab
  int synthetic_order = 0;      // data.synthetic_order
  int synthetic_branching = 0;  // data.synthetic_branching
  int64_t synthetic_tokens = 0; // data.synthetic_tokens
  double val_fraction = 0.0;    // data.val_fraction: share of a generated file held out
};

struct TrainSection {
  int64_t steps = 0;         // train.steps
  int64_t global_batch = 0;  // train.global_batch: sequences per optimizer step
  int64_t micro_batch = 0;   // train.micro_batch: sequences per forward/backward per rank
  int seq_len = 0;           // train.seq_len
  int64_t eval_every = 0;    // train.eval_every: validation every N steps (0 = only at the end)
  int64_t eval_batches = 0;  // train.eval_batches: global batches per validation
  std::string recompute;     // train.recompute: none | full
  std::string precision;     // train.precision: fp32 | bf16 | fp16
  double loss_scale = 0.0;           // train.loss_scale: initial fp16 loss scale
  int64_t loss_scale_window = 0;     // train.loss_scale_window: clean steps before it grows
};

struct OptimSection {
  double lr = 0.0;            // optim.lr: peak learning rate
  double min_lr = 0.0;        // optim.min_lr: floor of the cosine decay
  int64_t warmup_steps = 0;   // optim.warmup_steps
  int64_t decay_steps = 0;    // optim.decay_steps: end of the cosine (0 = train.steps)
  double beta1 = 0.0;         // optim.beta1
  double beta2 = 0.0;         // optim.beta2
  double eps = 0.0;           // optim.eps
  double weight_decay = 0.0;  // optim.weight_decay (not applied to biases and norms)
  double grad_clip = 0.0;     // optim.grad_clip: global-norm clip (0 = off)
};

struct ParallelSection {
  int dp = 0;           // parallel.dp: data-parallel size (0 = world / (tp*pp))
  int tp = 0;           // parallel.tp
  int pp = 0;           // parallel.pp
  double bucket_mb = 0; // parallel.bucket_mb: data-parallel gradient bucket size in MiB
  int zero = 0;         // parallel.zero: 0 or 1 (optimizer state sharded over the data group)
  bool overlap_param_gather = true;  // parallel.overlap_param_gather: ZeRO-1's gather overlaps forward
  bool sequence_parallel = false;  // parallel.sequence_parallel: split token rows over the tensor group
  std::string schedule;      // parallel.schedule: gpipe | 1f1b | interleaved
  std::string stage_layers;  // parallel.stage_layers: even | comma-separated counts
  int virtual_stages = 1;    // parallel.virtual_stages: model chunks per rank (interleaved)
  std::string comm;          // parallel.comm: nccl | mpi (GPU runs)
  std::string grad_reduce;   // parallel.grad_reduce: fp32 | bf16 | fp16 (auto resolved to train.precision)
};

struct LogSection {
  int64_t every = 0;         // log.every: print a line every N steps
  double peak_tflops = 0.0;  // log.peak_tflops: per-rank peak for MFU (0 = measure sgemm)
};

struct CheckpointSection {
  int64_t every = 0;  // checkpoint.every: steps between checkpoints (0 = never)
  std::string dir;    // checkpoint.dir: relative to run.dir unless absolute
  int keep = 0;       // checkpoint.keep: newest checkpoints kept
};

struct RunConfig {
  RunSection run;
  ModelSection model;
  DataSection data;
  TrainSection train;
  OptimSection optim;
  ParallelSection parallel;
  LogSection log;
  CheckpointSection checkpoint;
};

}  // namespace trident::io
