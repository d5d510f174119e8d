#include "kernels/precision.h"

#include <stdexcept>

namespace trident::kernels {

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  if (name == "fp16") return Precision::kFp16;
  throw std::invalid_argument("unknown precision '" + name + "' (expected fp32, bf16 or fp16)");
}

}  // namespace trident::kernels
