// The CUDA side of the backend seam: device discovery. The CUDA kernels themselves arrive with
// the CUDA-backend issue; this translation unit keeps the toolchain, flags and linking honest
// in every build that has TRIDENT_CUDA on, including CI machines without a GPU.
#include <cuda_runtime.h>
#include <dlfcn.h>  // dlopen: is a driver installed at all?

#include <string>

#include "kernels/backend.h"

namespace trident::kernels {

bool cuda_compiled() { return true; }

int cuda_device_count() {
  int count = 0;
  // No driver or no device is not an error here: it means "no GPU on this machine".
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error state
    return 0;
  }
  return count;
}

std::string cuda_device_bus_id(int index) {
  char id[32] = {};  // "dddd:bb:dd.f" and a terminator; the runtime asks for at least 13
  if (cudaDeviceGetPCIBusId(id, static_cast<int>(sizeof id), index) != cudaSuccess) {
    (void)cudaGetLastError();
    return "";
  }
  return id;
}

std::string cuda_device_problem() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess || status == cudaErrorNoDevice) return "";
  (void)cudaGetLastError();
  if (status == cudaErrorInsufficientDriver) {
    // The runtime says this both without any driver (a build machine: no GPU, nothing wrong)
    // and with a driver too old for it (a GPU machine that cannot run this build): only a
    // loadable driver library makes it a problem.
    void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (driver == nullptr) return "";
    dlclose(driver);
  }
  return std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")";
}

DeviceMemoryInfo cuda_device_memory(int index) {
  DeviceMemoryInfo info;
  int current = 0;
  cudaDeviceProp properties{};
  // cudaMemGetInfo answers for the current device: switch to `index` for the question and back.
  if (cudaGetDevice(&current) != cudaSuccess || cudaGetDeviceProperties(&properties, index) != cudaSuccess ||
      cudaSetDevice(index) != cudaSuccess) {
    (void)cudaGetLastError();
    return info;
  }
  if (cudaMemGetInfo(&info.free_bytes, &info.total_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    info = {};
  }
  (void)cudaSetDevice(current);
  if (info.total_bytes > 0) info.name = properties.name;
  return info;
}

}  // namespace trident::kernels
