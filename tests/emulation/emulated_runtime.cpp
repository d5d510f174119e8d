// The CUDA runtime calls Trident makes, answered on the CPU for the emulation build
// (cuda_emulation.h): device memory is host memory from the heap, registered so that copies,
// memsets and GEMMs can check they were handed device memory; copies and memsets are queued on
// their stream (emulated_streams.cpp); the device is an H100-shaped one named as emulated.
//
// The signatures are cuda_runtime_api.h's own (its declarations are in scope), so the linker
// takes these in place of libcudart's.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tests/emulation/emulated_state.h"

namespace cuda_emu {
namespace {

constexpr std::size_t kDeviceBytes = std::size_t{80} << 30;  // an H100's 80 GiB
constexpr std::size_t kDefaultSharedBytes = 48 * 1024;
constexpr std::size_t kOptinSharedBytes = 227 * 1024;  // sm_90's opt-in limit per block
constexpr int kMultiprocessors = 132;                  // an H100's

struct Runtime {
  std::mutex mutex;
  std::map<const unsigned char*, std::size_t> allocations;  // start -> bytes
  std::size_t allocated = 0;
  // The largest cudaFuncAttributeMaxDynamicSharedMemorySize set on any kernel (launch_problem).
  std::size_t largest_shared_optin = 0;
  int device = 0;
};

Runtime& runtime() {
  static Runtime r;  // the emulated driver's state: one per process, as the real one
  return r;
}

thread_local cudaError_t tl_last_error = cudaSuccess;

int device_count() {
  const char* text = std::getenv("TRIDENT_CUDA_EMULATION_DEVICES");
  return text == nullptr ? 1 : std::atoi(text);
}

// The compute capability the emulated GPUs report, as major * 10 + minor: 90 (an H100's), or
// TRIDENT_CUDA_EMULATION_COMPUTE_CAPABILITY to play another GPU (80: an A100). The emulation runs
// the code a build for 90 holds (sm_90 and compute_90's PTX), so a lower one finds no code.
int compute_capability() {
  const char* text = std::getenv("TRIDENT_CUDA_EMULATION_COMPUTE_CAPABILITY");
  return text == nullptr ? 90 : std::atoi(text);
}

// The opt-in shared memory a block may have: sm_90's, or TRIDENT_CUDA_EMULATION_OPTIN_SHARED_BYTES
// to play an older GPU (65536: Turing's), whose limit the flash kernels exceed.
std::size_t optin_shared_bytes() {
  const char* text = std::getenv("TRIDENT_CUDA_EMULATION_OPTIN_SHARED_BYTES");
  return text == nullptr ? kOptinSharedBytes : std::strtoull(text, nullptr, 10);
}

}  // namespace

void set_last_error(cudaError_t error, const std::string& why) {
  tl_last_error = error;
  if (std::getenv("TRIDENT_CUDA_EMULATION_VERBOSE") != nullptr) {
    std::fprintf(stderr, "cuda emulation: %s\n", why.c_str());
  }
}

bool env_choice(const char* variable, const char* usual, const char* other) {
  const char* value = std::getenv(variable);
  if (value == nullptr || *value == '\0' || std::strcmp(value, usual) == 0) return false;
  if (std::strcmp(value, other) == 0) return true;
  std::fprintf(stderr, "cuda emulation: %s=%s: use %s or %s\n", variable, value, usual, other);
  std::exit(2);
}

std::string launch_problem(const LaunchConfig& c) {
  const unsigned long long threads = static_cast<unsigned long long>(c.block.x) * c.block.y * c.block.z;
  if (c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0) return "a grid with no blocks";
  if (c.grid.x > 2147483647u || c.grid.y > 65535u || c.grid.z > 65535u) return "a grid dimension past the limit";
  if (threads == 0 || threads > 1024 || c.block.x > 1024 || c.block.y > 1024 || c.block.z > 64) {
    return "a block of " + std::to_string(threads) + " threads";
  }
  std::size_t allowed = kDefaultSharedBytes;
  {
    Runtime& r = runtime();
    std::lock_guard<std::mutex> lock(r.mutex);
    allowed = std::max(allowed, r.largest_shared_optin);
  }
  if (c.shared_bytes > allowed) {
    return std::to_string(c.shared_bytes) + " bytes of dynamic shared memory, " + std::to_string(allowed) +
           " allowed without a larger opt-in";
  }
  return "";
}

bool is_device_range(const void* p, std::size_t bytes) {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto* q = static_cast<const unsigned char*>(p);
  auto it = r.allocations.upper_bound(q);
  if (it == r.allocations.begin()) return false;
  --it;
  return q >= it->first && q + bytes <= it->first + it->second;
}

void require_device_range(const void* p, std::size_t bytes, const char* what) {
  if (bytes == 0) return;
  if (!is_device_range(p, bytes)) {
    std::fprintf(stderr, "cuda emulation: %s: %zu bytes at %p are not inside one device allocation\n", what, bytes,
                 p);
    std::abort();
  }
}

}  // namespace cuda_emu

using cuda_emu::runtime;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = cuda_emu::device_count();
  return *count > 0 ? cudaSuccess : (cuda_emu::tl_last_error = cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= cuda_emu::device_count()) return cuda_emu::tl_last_error = cudaErrorInvalidDevice;
  runtime().device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = runtime().device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device < 0 || device >= cuda_emu::device_count()) return cuda_emu::tl_last_error = cudaErrorInvalidDevice;
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "CUDA emulation on the CPU");
  prop->totalGlobalMem = cuda_emu::kDeviceBytes;
  prop->sharedMemPerBlock = cuda_emu::kDefaultSharedBytes;
  prop->sharedMemPerBlockOptin = cuda_emu::optin_shared_bytes();
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->multiProcessorCount = cuda_emu::kMultiprocessors;
  prop->major = cuda_emu::compute_capability() / 10;
  prop->minor = cuda_emu::compute_capability() % 10;
  prop->pciBusID = 0x18 + device;
  return cudaSuccess;
}

// The attributes the playground's programs ask for (perf/kernels/playground.cuh): the emulation
// has no L2, so 0 there; cudaErrorInvalidValue for the others, which no caller needs yet.
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device < 0 || device >= cuda_emu::device_count()) return cuda_emu::tl_last_error = cudaErrorInvalidDevice;
  switch (attr) {
    case cudaDevAttrL2CacheSize:
      *value = 0;
      return cudaSuccess;
    case cudaDevAttrMultiProcessorCount:
      *value = cuda_emu::kMultiprocessors;
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(cuda_emu::optin_shared_bytes());
      return cudaSuccess;
    default:
      return cuda_emu::tl_last_error = cudaErrorInvalidValue;
  }
}

// The toolkit whose headers the emulation compiles against.
cudaError_t cudaDriverGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char* id, int len, int device) {
  if (device < 0 || device >= cuda_emu::device_count()) return cuda_emu::tl_last_error = cudaErrorInvalidDevice;
  std::snprintf(id, static_cast<std::size_t>(len), "0000:%02x:00.0", 0x18 + device);
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = cuda_emu::tl_last_error;
  cuda_emu::tl_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return cuda_emu::tl_last_error; }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    default: return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    default: return "unknown error";
  }
}

cudaError_t cudaMalloc(void** p, std::size_t bytes) {
  auto& r = runtime();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (bytes > cuda_emu::kDeviceBytes - r.allocated) {
      *p = nullptr;
      return cuda_emu::tl_last_error = cudaErrorMemoryAllocation;
    }
  }
  // The exact size (at least one byte), so that AddressSanitizer sees a read past the end.
  void* memory = nullptr;
  if (posix_memalign(&memory, 256, bytes == 0 ? 1 : bytes) != 0) {
    return cuda_emu::tl_last_error = cudaErrorMemoryAllocation;
  }
  // Fresh device memory holds whatever was there: a NaN pattern, not zeros.
  std::memset(memory, 0xff, bytes);
  std::lock_guard<std::mutex> lock(r.mutex);
  r.allocations[static_cast<const unsigned char*>(memory)] = bytes;
  r.allocated += bytes;
  *p = memory;
  return cudaSuccess;
}

namespace {

void release_allocation(void* p) {
  auto& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = r.allocations.find(static_cast<const unsigned char*>(p));
  if (it == r.allocations.end()) {
    std::fprintf(stderr, "cuda emulation: cudaFree of %p, which cudaMalloc did not return\n", p);
    std::abort();
  }
  r.allocated -= it->second;
  r.allocations.erase(it);
  std::free(p);
}

}  // namespace

cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  // cudaFree waits for the device: queued work that reads the allocation runs first.
  cuda_emu::synchronize_device();
  release_allocation(p);
  return cudaSuccess;
}

// Stream-ordered allocation (the timed cuBLASLt choice's scratch, kernels/cuda/lt_matmul.cu): the
// memory is taken at once, as work queued after the call may use it; the free waits for the work
// queued before it on that stream only, never for the whole device (which is what keeps a rank
// from blocking on its own communication streams).
cudaError_t cudaMallocAsync(void** p, std::size_t bytes, cudaStream_t stream) {
  cuda_emu::check_stream(stream);
  return cudaMalloc(p, bytes);
}

cudaError_t cudaFreeAsync(void* p, cudaStream_t stream) {
  cuda_emu::check_stream(stream);
  if (p != nullptr) cuda_emu::enqueue(stream, [p] { release_allocation(p); });
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  auto& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  *total_bytes = cuda_emu::kDeviceBytes;
  *free_bytes = cuda_emu::kDeviceBytes - r.allocated;
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* p) {
  std::memset(attributes, 0, sizeof *attributes);
  if (p != nullptr && cuda_emu::is_device_range(p, 1)) {
    attributes->type = cudaMemoryTypeDevice;
    attributes->devicePointer = const_cast<void*>(p);
  } else {
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->hostPointer = const_cast<void*>(p);
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  cuda_emu::check_stream(stream);
  const bool to_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool from_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (to_device) cuda_emu::require_device_range(dst, bytes, "cudaMemcpy destination");
  if (from_device) cuda_emu::require_device_range(src, bytes, "cudaMemcpy source");
  if (kind == cudaMemcpyHostToDevice && cuda_emu::is_device_range(src, bytes)) {
    std::fprintf(stderr, "cuda emulation: cudaMemcpyHostToDevice from device memory\n");
    std::abort();
  }
  if (kind == cudaMemcpyDeviceToHost && cuda_emu::is_device_range(dst, bytes)) {
    std::fprintf(stderr, "cuda emulation: cudaMemcpyDeviceToHost into device memory\n");
    std::abort();
  }
  if (bytes == 0) return cudaSuccess;
  if (kind == cudaMemcpyHostToDevice) {
    // From pageable memory (Trident pins none) the runtime stages the source before returning,
    // so the caller may reuse it at once: the queued copy owns a snapshot.
    const auto* from = static_cast<const unsigned char*>(src);
    auto staged = std::make_shared<std::vector<unsigned char>>(from, from + bytes);
    cuda_emu::enqueue(stream, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
    return cudaSuccess;
  }
  cuda_emu::enqueue(stream, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  // Into pageable memory the call returns only once the copy is done.
  if (kind == cudaMemcpyDeviceToHost) cuda_emu::synchronize_stream(stream);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}

cudaError_t cudaMemsetAsync(void* p, int value, std::size_t bytes, cudaStream_t stream) {
  cuda_emu::check_stream(stream);
  cuda_emu::require_device_range(p, bytes, "cudaMemset");
  cuda_emu::enqueue(stream, [p, value, bytes] { std::memset(p, value, bytes); });
  return cudaSuccess;
}

// On the legacy stream, as CUDA's: asynchronous to the host for device memory.
cudaError_t cudaMemset(void* p, int value, std::size_t bytes) { return cudaMemsetAsync(p, value, bytes, nullptr); }

// Whether the build has code for the current device (kernels/cuda/device_code.cu): not below sm_90.
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, const void* /*func*/) {
  if (cuda_emu::compute_capability() < 90) return cuda_emu::tl_last_error = cudaErrorNoKernelImageForDevice;
  std::memset(attributes, 0, sizeof *attributes);
  attributes->maxThreadsPerBlock = 1024;
  attributes->maxDynamicSharedSizeBytes = static_cast<int>(cuda_emu::kDefaultSharedBytes);
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* /*func*/, cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || static_cast<std::size_t>(value) > cuda_emu::optin_shared_bytes()) {
      return cuda_emu::tl_last_error = cudaErrorInvalidValue;
    }
    auto& r = runtime();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.largest_shared_optin = std::max(r.largest_shared_optin, static_cast<std::size_t>(value));
  }
  return cudaSuccess;
}

}  // extern "C"
