// The CUDA side of the backend seam: device discovery, answered without making a backend (the
// device choice, the memory check and run.attention = auto ask before one exists).
#include <cuda_runtime.h>
#include <dlfcn.h>  // dlopen: is a driver installed at all?

#include <string>

#include "kernels/cuda_devices.h"
#include "kernels/cuda/flash_attention.cuh"  // flash_attention_shared_bytes

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

bool cuda_flash_attention_fits(int index) {
  int optin = 0;
  if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, index) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return static_cast<std::size_t>(optin) >= cuda::flash_attention_shared_bytes();
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
