// make_backend: the one place that maps a Device to its implementation; and the default
// (unfused) forms of the fused Backend calls.
#include "kernels/backend.h"

#include <cstddef>
#include <stdexcept>
#include <string>

#include "kernels/cpu/cpu_backend.h"  // CpuBackend
#include "kernels/cuda_devices.h"        // the answers without CUDA, cuda_device_count
#include "kernels/device_refusal.h"
#ifdef TRIDENT_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"  // CudaBackend
#endif

namespace trident::kernels {

#ifndef TRIDENT_HAVE_CUDA
bool cuda_compiled() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_device_problem() { return ""; }
std::string cuda_library_problem() { return ""; }
std::string cuda_device_bus_id(int) { return ""; }
bool cuda_flash_attention_fits(int) { return false; }
DeviceMemoryInfo cuda_device_memory(int) { return {}; }
#endif

Native16BitKernels native_16bit_kernels(Device device, [[maybe_unused]] BackendOptions options) {
  // CUDA reads 16 bits in every family, whichever attention kernel the options choose.
  return device == Device::kCpu ? Native16BitKernels{} : Native16BitKernels::all();
}

double Backend::sum_squares_of_ranges(const float* base, const ElementRange* ranges, std::size_t count) {
  double total = 0.0;
  for (std::size_t i = 0; i < count; ++i) total += sum_squares(base + ranges[i].offset, ranges[i].count);
  return total;
}

void Backend::matmul_gelu_forward(ActPtr out, ActPtr pre, ConstActPtr inp, ConstActPtr weight, ConstActPtr bias,
                                  int N, int C, int OC) {
  matmul_forward(pre, inp, weight, bias, N, C, OC);
  gelu_forward(out, pre, static_cast<std::size_t>(N) * static_cast<std::size_t>(OC));
}

void Backend::matmul_backward_through_gelu(ActPtr dpre, float* dweight, float* dbias, ConstActPtr dout,
                                           ConstActPtr inp, ConstActPtr weight, ConstActPtr pre, int N, int C,
                                           int OC) {
  matmul_backward(dpre, dweight, dbias, dout, inp, weight, N, C, OC);
  gelu_backward(dpre, pre, dpre, static_cast<std::size_t>(N) * static_cast<std::size_t>(C));
}

void Backend::cross_entropy_forward_backward(float* losses, float* row_max, float* row_sumexp, ActPtr dlogits,
                                             ConstActPtr logits, const int32_t* targets, float dloss, int N, int V,
                                             int Vp) {
  cross_entropy_forward(losses, row_max, row_sumexp, logits, targets, N, V, Vp);
  cross_entropy_backward_sharded(dlogits, logits, targets, row_max, row_sumexp, dloss, N, V, Vp, 0);
}

std::unique_ptr<Backend> make_backend(Device device, int threads, [[maybe_unused]] int gpu, BackendOptions options) {
  switch (device) {
    case Device::kCpu:
      if (options.attention == AttentionKernel::kFlash) {
        throw DeviceRefusal("the CPU backend has no flash attention kernel (run.attention = flash needs CUDA)");
      }
      return std::make_unique<cpu::CpuBackend>(threads);
    case Device::kCuda:
#ifdef TRIDENT_HAVE_CUDA
      if (gpu < 0 || gpu >= cuda_device_count()) {
        throw DeviceRefusal("CUDA device " + std::to_string(gpu) + " is not visible (" +
                            std::to_string(cuda_device_count()) +
                            " are; check nvidia-smi and CUDA_VISIBLE_DEVICES); use run.device = cpu");
      }
      return std::make_unique<cuda::CudaBackend>(gpu, options);
#else
      throw DeviceRefusal("this build has no CUDA backend (configure with -DTRIDENT_CUDA=ON)");
#endif
  }
  throw std::runtime_error("make_backend: unknown device " + std::to_string(static_cast<int>(device)));
}

}  // namespace trident::kernels
