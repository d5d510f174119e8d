#include "kernels/cuda/device_code.cuh"

#include <string>

#include "kernels/cuda/cuda_check.h"  // CUDA_CHECK

// The CMAKE_CUDA_ARCHITECTURES this file was compiled for (kernels/CMakeLists.txt), for the message.
#ifndef TRIDENT_CUDA_ARCHITECTURES
#define TRIDENT_CUDA_ARCHITECTURES "(not recorded)"
#endif

namespace trident::kernels::cuda {

namespace {

// Never launched: the runtime finds code for it on a device exactly when it finds code for the
// other kernels, all compiled for the same architectures.
__global__ void code_probe_kernel() {}

}  // namespace

std::string device_code_problem(const cudaDeviceProp& props) {
  cudaFuncAttributes attributes{};
  const cudaError_t status = cudaFuncGetAttributes(&attributes, code_probe_kernel);
  if (status != cudaErrorNoKernelImageForDevice && status != cudaErrorInvalidDeviceFunction) {
    CUDA_CHECK(status);  // another failure is the device's or the driver's, not the build's
    return "";
  }
  (void)cudaGetLastError();
  const std::string capability = std::to_string(props.major) + std::to_string(props.minor);
  return std::string("this build has no GPU code for ") + props.name + " (compute capability " +
         std::to_string(props.major) + "." + std::to_string(props.minor) +
         "): it was built for CMAKE_CUDA_ARCHITECTURES = " + TRIDENT_CUDA_ARCHITECTURES +
         "; rebuild with scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES=" + capability + " (a list such as \"" +
         capability + ";90\" serves both), or use run.device = cpu";
}

}  // namespace trident::kernels::cuda
