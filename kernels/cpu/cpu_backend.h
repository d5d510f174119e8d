// CpuBackend: the reference implementation of kernels::Backend on host memory.
// Each method forwards to the free function of its operation (kernels/cpu/<op>.h); this class
// only owns the thread budget.
#pragma once

#include "kernels/backend.h"

namespace trident::kernels::cpu {

class CpuBackend final : public Backend {
 public:
  // threads > 0: OpenMP and OpenBLAS threads used by this rank.
  explicit CpuBackend(int threads);
  int threads() const { return threads_; }
  // (the Backend overrides are declared by the kernels implementation)
 private:
  int threads_;
};

}  // namespace trident::kernels::cpu
