// Check macros for the CUDA runtime and cuBLAS: every call that can fail goes through one of
// them, so a failure names the call, the file and the line, adds a hint at the usual cause,
// and throws std::runtime_error (the caller decides how the job ends; a destructor never uses
// them).
//
// Kernel launches return nothing: CUDA_CHECK_LAUNCH() after a launch reports a bad launch shape
// at once; faults inside a kernel surface at the next synchronising call (a copy back,
// synchronize(), sum_squares), which then names that call, so a fault reported there may come
// from any kernel queued before it (run under compute-sanitizer to find which).
#pragma once

#include <cublas_v2.h>     // cublasStatus_t, cublasGetStatusString
#include <cuda_runtime.h>  // cudaError_t, cudaGetErrorName, cudaGetErrorString

#include <stdexcept>
#include <string>

#include "kernels/cuda/cublas_library.h"  // cublas_problem

namespace trident::kernels::cuda {

// The likely cause of a CUDA runtime error, for the message ("" when there is nothing to add).
inline const char* cuda_error_hint(cudaError_t status) {
  switch (status) {
    case cudaErrorMemoryAllocation:
      return "out of device memory: lower train.micro_batch or use more ranks";
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return "no usable GPU: check nvidia-smi and that the driver is as new as the CUDA toolkit";
    case cudaErrorInvalidDevice:
      return "device index out of range: fewer GPUs are visible (CUDA_VISIBLE_DEVICES?)";
    case cudaErrorInvalidConfiguration:
      return "bad launch shape (zero or too many blocks or threads)";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
      return "a kernel touched memory out of bounds, maybe one queued earlier (compute-sanitizer)";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      return "built for another GPU architecture: set CMAKE_CUDA_ARCHITECTURES for this GPU";
    default:
      return "";
  }
}

inline const char* cublas_error_hint(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "cuBLAS could not start: no GPU, or driver and cuBLAS versions do not match";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "out of device memory for the cuBLAS workspace";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "bad GEMM shape or leading dimension (see the row-major mapping in gemm.cu)";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "the GEMM kernel failed, often after an earlier out-of-bounds kernel";
    default:
      return "";
  }
}

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                          int line) {
  std::string message = std::string("CUDA error ") + cudaGetErrorName(status) + " (" +
                        cudaGetErrorString(status) + ") in " + call + " at " + file + ":" +
                        std::to_string(line);
  const std::string hint = cuda_error_hint(status);
  if (!hint.empty()) message += ": " + hint;
  throw std::runtime_error(message);
}

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* call,
                                            const char* file, int line) {
  std::string message = std::string("cuBLAS error ") + cublasGetStatusString(status) + " in " +
                        call + " at " + file + ":" + std::to_string(line);
  // A library that did not load answers every call with CUBLAS_STATUS_NOT_INITIALIZED: say why.
  const std::string& load_problem = cublas_problem();
  const std::string hint = load_problem.empty() ? cublas_error_hint(status) : load_problem;
  if (!hint.empty()) message += ": " + hint;
  throw std::runtime_error(message);
}

}  // namespace trident::kernels::cuda

#define CUDA_CHECK(call)                                                                           \
  do {                                                                                             \
    const cudaError_t trident_cuda_status_ = (call);                                               \
    if (trident_cuda_status_ != cudaSuccess) {                                                     \
      ::trident::kernels::cuda::throw_cuda_error(trident_cuda_status_, #call, __FILE__, __LINE__); \
    }                                                                                              \
  } while (0)

#define CUBLAS_CHECK(call)                                                                  \
  do {                                                                                      \
    const cublasStatus_t trident_cublas_status_ = (call);                                   \
    if (trident_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                  \
      ::trident::kernels::cuda::throw_cublas_error(trident_cublas_status_, #call, __FILE__, \
                                                   __LINE__);                               \
    }                                                                                       \
  } while (0)

// After a kernel launch: reports a launch that did not start (bad shape, missing kernel image).
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
