// make_backend: the one place that maps a Device to its implementation.
#include "kernels/backend.h"

#include <stdexcept>

#include "kernels/cpu/cpu_backend.h"

namespace trident::kernels {

#ifndef TRIDENT_HAVE_CUDA
bool cuda_compiled() { return false; }
int cuda_device_count() { return 0; }
#endif

std::unique_ptr<Backend> make_backend(Device device, int threads) {
  switch (device) {
    case Device::kCpu:
      return std::make_unique<cpu::CpuBackend>(threads);
    case Device::kCuda:
      if (!cuda_compiled()) {
        throw std::runtime_error("this build has no CUDA backend (configure with -DTRIDENT_CUDA=ON)");
      }
      throw std::runtime_error("the CUDA kernels are not implemented yet; use run.device = cpu");
  }
  throw std::runtime_error("unknown device");
}

}  // namespace trident::kernels
