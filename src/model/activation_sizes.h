// The activation arena's size for a layout (Gpt allocates exactly this; trident check estimates
// memory with it before any backend exists).
#pragma once

#include <cstddef>

#include "kernels/precision.h"  // Precision, precision_bytes
#include "src/model/gpt_config.h"
#include "src/model/gpt_layout.h"

namespace trident::model {

// The activation arena for micro-batches [B, T] on this layout (forward state kept for backward
// in every slot, plus the shared backward scratch and attention workspace), used for allocation
// and for the memory estimate alike. attention_scratch: Backend::attention_scratch_size(B, T,
// heads/tp).
//   stored:  elements in layout.storage: the activations and their gradients;
//   fp32:    floats whatever the storage: LayerNorm statistics, attention's lse and workspace,
//            token losses and the cross-entropy's row statistics;
//   staging: under 16-bit storage, the floats of fp32 workspace the backend widens one call's
//            16-bit operands into (kernels::RoundedStorageBackend::staging_floats() after a
//            step: the largest call's operands); 0 for fp32 storage.
struct ActivationSizes {
  std::size_t stored = 0, fp32 = 0, staging = 0;
  std::size_t bytes(kernels::Precision storage) const {
    return stored * kernels::precision_bytes(storage) + (fp32 + staging) * sizeof(float);
  }
};
ActivationSizes activation_sizes(const GptConfig& config, int B, int T, std::size_t attention_scratch,
                                 const GptLayout& layout = {});
// Elements of the arena (stored + fp32): its floats under fp32 storage.
std::size_t activation_floats(const GptConfig& config, int B, int T, std::size_t attention_scratch,
                              const GptLayout& layout = {});
// Bytes of the arena in layout.storage, with the staging workspace.
std::size_t activation_bytes(const GptConfig& config, int B, int T, std::size_t attention_scratch,
                             const GptLayout& layout = {});

}  // namespace trident::model
