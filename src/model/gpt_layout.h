// GptLayout: how one rank holds the model (its tensor, pipeline and chunk coordinates, the
// micro-batches in flight, recomputation, sequence parallelism and the storage precision), for
// Gpt itself and for the estimates made before a model exists (activation_sizes,
// build_gpt_param_table, trident check).
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/native_16bit.h"  // Native16BitKernels
#include "kernels/precision.h"     // Precision
#include "src/model/gpt_config.h"
#include "src/model/stage_layout.h"

namespace trident::model {

// What forward keeps for backward.
//   kNone: every block's intermediates, one set per block.
//   kFull: only each block's input (the residual stream) and the head's state; the block
//          intermediates share one workspace and are recomputed in backward, bit-identically.
enum class Recompute { kNone, kFull };

// How this rank holds the model. The default is the whole model on one rank.
struct GptLayout {
  int tp = 1;          // tensor-parallel size
  int tp_rank = 0;
  int pp = 1;          // pipeline stages
  int pp_rank = 0;
  // One count per virtual stage (pp * chunks); empty: even_stage_split(layers, pp * chunks).
  std::vector<int> layers_per_stage{};
  int chunks = 1;      // model chunks per rank (interleaved schedule), virtual stages pp * chunks
  int slots = 1;       // micro-batches in flight on this stage, per chunk (unless chunk_slots)
  // One count per chunk, where the schedule keeps chunks unevenly busy (interleaved: the first
  // chunk holds the most); empty: `slots` for every chunk.
  std::vector<int> chunk_slots{};
  Recompute recompute = Recompute::kNone;
  // Sequence parallelism (tp > 1 only; with tp = 1 it changes nothing). Requires B*T % tp == 0.
  bool sequence_parallel = false;
  // Storage of the activations, their gradients and the parameter arena (the compute copy of the
  // weights that the kernels read): kFp32, or kBf16 / kFp16 for 16-bit buffers (half their
  // memory), which need a backend with 16-bit semantics (kernels::RoundedStorageBackend of the
  // same precision). Pipeline stages send the activations and the tensor-parallel collectives
  // move and sum them as they are stored. The gradient arena is fp32 in every storage.
  kernels::Precision storage = kernels::Precision::kFp32;
  // The kernel families the backend computes on 16-bit operands itself (Backend::native_16bit,
  // the CUDA backend): under 16-bit storage their calls stage nothing, which the staging
  // estimate then leaves out. Gpt sets it from its backend; estimates made without one (trident
  // check) count the CPU's widening, an upper bound.
  kernels::Native16BitKernels native_16bit{};
  StageLayout stage(const GptConfig& config) const;
  // Micro-batches chunk `chunk` of this stage holds at once.
  int slots_of(int chunk) const {
    return chunk_slots.empty() ? slots : chunk_slots[static_cast<std::size_t>(chunk)];
  }
  // Whether the logits (and the logit gradients, written over them) are 16-bit buffers: under
  // 16-bit storage when the backend's cross-entropy reads 16 bits (native_16bit.cross_entropy).
  // Otherwise they are fp32 buffers (holding rounded values under 16-bit storage): the fp32
  // kernels would need an fp32 copy of 16-bit logits (N x Vp floats), twice their 16-bit bytes,
  // more than 16 bits save.
  bool logits_16bit() const { return storage != kernels::Precision::kFp32 && native_16bit.cross_entropy; }
};

}  // namespace trident::model
