// Whether this build holds GPU code the current device can run. A build for sm_90 (the default
// CMAKE_CUDA_ARCHITECTURES) has none for an A100 (sm_80): its kernels would fail at their first
// launch with "no kernel image is available", after the model was allocated, as an internal
// error. The backend asks at start-up instead and refuses in words, naming the build option.
#pragma once

#include <cuda_runtime.h>  // cudaDeviceProp

#include <string>

namespace trident::kernels::cuda {

// "" when the current device (cudaSetDevice) can run this build's kernels, else why not and the
// CMAKE_CUDA_ARCHITECTURES value to rebuild with. `props` describes that device.
std::string device_code_problem(const cudaDeviceProp& props);

}  // namespace trident::kernels::cuda
