// CudaBackend: forwards every Backend call to the launcher of its operation, on the one stream
// of this backend, and owns that stream, the cuBLAS handle (and, for fused matmul epilogues,
// the cuBLASLt one), the scratch of sum_squares and a workspace grown for the kernels that need
// one (column sums, the embedding backward's sort, the GEMM attention's pointer arrays, the
// per-range totals of sum_squares_of_ranges).
//
// Ordering: every kernel, cuBLAS call, memset and copy goes on stream_, so they run in call
// order and no event is needed between them. (The one exception, under
// run.matmul_backward_streams = two: a matmul backward's parameter gradients go on a side stream
// forked from stream_ and joined into it before the call returns, side_stream.cuh; to every later
// call it is as if they had been on stream_.) The stream is a blocking one (cudaStreamCreate):
// it also waits for work on the legacy default stream, so a library that uses the default
// stream cannot overtake us. Copies wait for the stream before returning, which makes them
// synchronous for the caller, as the CPU twin's memcpy is: a copy back returns with the data on
// the host, and a host buffer copied from may be reused at once.
//
// This file: construction (the device, its handles and the kernel choices the deck made), memory
// and copies. cuda_backend_matmul.cu holds the linear layers (cuBLAS, cuBLASLt and the second
// stream), cuda_backend_operations.cu every other operation's forwarding.
#include <cublas_v2.h>     // cublasCreate, cublasSetStream, cublasSetMathMode
#include <cuda_runtime.h>  // cudaMalloc, cudaMemcpyAsync, cudaStreamCreate

#include <algorithm>  // std::max
#include <stdexcept>
#include <string>

#include "kernels/cuda/cublas_library.h"         // cublas_problem
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"             // CUDA_CHECK, CUBLAS_CHECK
#include "kernels/cuda/device_code.cuh"          // device_code_problem
#include "kernels/cuda/elementwise.cuh"          // kSumSquaresScratch
#include "kernels/cuda/flash_attention.cuh"      // flash_attention_shared_bytes
#include "kernels/cuda/flash_attention_mma.cuh"  // flash_attention_wgmma_available
#include "kernels/cuda/lt_matmul.cuh"            // LtMatmul
#include "kernels/cuda/side_stream.cuh"          // SideStream (run.matmul_backward_streams = two)
#include "kernels/cuda_devices.h"                // cuda_flash_attention_fits
#include "kernels/device_refusal.h"
#include "kernels/out_of_memory.h"               // OutOfMemory, mib

namespace trident::kernels::cuda {

namespace {

// cudaMalloc aligns to 256 bytes, beyond the 64 the interface promises. A zero-sized request
// still gets a real allocation, so every pointer handed out is distinct and non-null.
void* allocate_bytes(std::size_t bytes) {
  void* ptr = nullptr;
  if (const cudaError_t status = cudaMalloc(&ptr, bytes == 0 ? 1 : bytes); status != cudaSuccess) {
    // Only cudaErrorMemoryAllocation is a want of memory. Anything else (an earlier kernel's
    // fault, sticky for the whole context, surfaces at the next call) was reported as "out of
    // device memory ... 0 B free of 0 B", sending the user to lower the micro-batch.
    if (status != cudaErrorMemoryAllocation) throw_cuda_error(status, "cudaMalloc", __FILE__, __LINE__);
    (void)cudaGetLastError();  // out of memory is not sticky: clear it for the caller's retry
    int device = -1;
    std::size_t free_bytes = 0, total_bytes = 0;
    if (cudaGetDevice(&device) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
      (void)cudaGetLastError();
    }
    throw OutOfMemory("out of device memory on GPU " + std::to_string(device) + ": cudaMalloc of " + mib(bytes) +
                      " failed with " + mib(free_bytes) + " free of " + mib(total_bytes) +
                      " (lower train.micro_batch or set train.recompute = full)");
  }
  return ptr;
}

// Runs in destructors (the model releases its arenas there), so it must not throw: a failing
// cudaFree means an earlier error, already reported by a check that threw.
void release_bytes(void* ptr) {
  if (ptr != nullptr && cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();
}

void copy_and_wait(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                   cudaStream_t stream) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

// ", flash forward on wgmma" (and ", overlapped") for the backend's name when flash attention's
// `direction` takes warpgroup products. Those need sm_90a code and a compute capability 9.0 GPU:
// where this GPU (`arch`, "sm_80") or this build has none, the deck's choice is refused here,
// naming which, rather than by the first launch.
std::string warpgroup_choice(const char* direction, FlashProducts products, WarpgroupSchedule schedule,
                             const std::string& arch) {
  if (products != FlashProducts::kWarpgroup) return "";
  const std::string choice = schedule == WarpgroupSchedule::kOverlapped ? "wgmma_overlapped" : "wgmma";
  if (!cuda::flash_attention_wgmma_available()) {
    const std::string missing = arch == "sm_90" ? "this build has no sm_90a code (configure it with 90 in "
                                                  "CMAKE_CUDA_ARCHITECTURES)"
                                                : "this GPU is " + arch + ", not compute capability 9.0 (H100, H200)";
    throw DeviceRefusal(std::string("run.flash_") + direction + " = " + choice +
                        " needs Hopper's warpgroup products, but " + missing + "; use run.flash_" + direction +
                        " = mma_sync");
  }
  return std::string(", flash ") + direction + " on wgmma" +
         (schedule == WarpgroupSchedule::kOverlapped ? ", overlapped" : "");
}

}  // namespace

CudaBackend::CudaBackend(int device_index, BackendOptions options)
    : device_index_(device_index),
      attention_(options.attention),
      flash_dq_(options.flash_dq),
      flash_block_order_(options.flash_block_order),
      flash_forward_products_(options.flash_forward_products),
      flash_forward_schedule_(options.flash_forward_schedule),
      flash_backward_products_(options.flash_backward_products),
      flash_backward_schedule_(options.flash_backward_schedule),
      flash_warpgroups_(options.flash_warpgroups),
      layernorm_sums_(options.layernorm_sums),
      cross_entropy_loads_(options.cross_entropy_loads),
      adamw_loads_(options.adamw_loads),
      matmul_backward_streams_(options.matmul_backward_streams),
      matmul_bias_gradients_(options.matmul_bias_gradients),
      matmul_algorithms_(options.matmul_algorithms),
      epilogues_(options.matmul_epilogues),
      attention_blocks_(options.attention_blocks),
      attention_batching_(options.attention_batching) {
  if (attention_blocks_ < 1) {
    throw std::invalid_argument("the GEMM attention's causal row blocks must be at least 1, not " +
                                std::to_string(attention_blocks_));
  }
  // The deck refuses these (io/run_config.cpp); here for callers that build the options in code,
  // before a launcher would refuse them at the first step.
  if (flash_warpgroups_ != 1 && flash_warpgroups_ != 2) {
    throw std::invalid_argument("the wgmma kernels' warpgroups a block must be 1 or 2, not " +
                                std::to_string(flash_warpgroups_));
  }
  if (flash_warpgroups_ == 2 && flash_backward_products_ == FlashProducts::kWarpgroup &&
      flash_dq_ == FlashDq::kInKeyWalk) {
    throw std::invalid_argument(
        "two warpgroups a block in the wgmma backward make dQ in its own walk, not the key walk");
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    count = 0;
  }
  if (device_index < 0 || device_index >= count) {
    throw DeviceRefusal("CUDA device " + std::to_string(device_index) + " requested, but " + std::to_string(count) +
                        " device(s) are visible");
  }
  // cuBLAS is opened on first use (cublas_library.h): a node without it is refused here, in words.
  if (!cublas_problem().empty()) throw DeviceRefusal(cublas_problem());
  CUDA_CHECK(cudaSetDevice(device_index));
  cudaDeviceProp props{};
  CUDA_CHECK(cudaGetDeviceProperties(&props, device_index));
  if (const std::string problem = device_code_problem(props); !problem.empty()) throw DeviceRefusal(problem);
  const std::string arch = "sm_" + std::to_string(props.major) + std::to_string(props.minor);
  std::string schedule;
  if (attention_ == AttentionKernel::kGemm && attention_blocks_ > 1) {
    schedule += ", " + std::to_string(attention_blocks_) + " causal attention blocks";
  }
  if (attention_ == AttentionKernel::kGemm && attention_batching_ == AttentionBatching::kPointers) {
    schedule += ", pointer-array attention products";
  }
  // The kernel choices still waiting for a GPU's timing, named only when not the default, so
  // that a benchmark's log says which way it ran.
  std::string candidates;
  if (attention_ == AttentionKernel::kFlash && flash_dq_ == FlashDq::kInKeyWalk) candidates += ", dQ in the key walk";
  if (attention_ == AttentionKernel::kFlash && flash_block_order_ == FlashBlockOrder::kLongestFirst) {
    candidates += ", flash blocks longest walk first";
  }
  if (attention_ == AttentionKernel::kFlash) {
    candidates += warpgroup_choice("forward", flash_forward_products_, flash_forward_schedule_, arch);
    candidates += warpgroup_choice("backward", flash_backward_products_, flash_backward_schedule_, arch);
    const bool wgmma = flash_forward_products_ == FlashProducts::kWarpgroup ||
                       flash_backward_products_ == FlashProducts::kWarpgroup;
    if (wgmma && flash_warpgroups_ == 2) candidates += ", two warpgroups a wgmma block";
  }
  if (layernorm_sums_ == LayerNormParameterSums::kInRowWalk) candidates += ", LayerNorm parameter sums in the row walk";
  if (cross_entropy_loads_ == CrossEntropyLoads::kPacks) candidates += ", cross-entropy backward on 16-byte loads";
  if (adamw_loads_ == AdamWLoads::kPacks) candidates += ", AdamW on 16-byte loads";
  if (matmul_backward_streams_ == MatmulBackwardStreams::kTwo) {
    candidates += ", matmul parameter gradients on a second stream";
  }
  if (matmul_bias_gradients_ == MatmulBiasGradients::kEpilogue && epilogues_ == MatmulEpilogues::kFused) {
    candidates += ", bias gradients in the weight GEMM's epilogue";
  }
  if (matmul_algorithms_ == MatmulAlgorithms::kTimed && epilogues_ == MatmulEpilogues::kFused) {
    candidates += ", cuBLASLt algorithms timed per product shape";
  }
  name_ = std::string("cuda (") + props.name + ", " + arch +
          (attention_ == AttentionKernel::kFlash ? ", flash attention" : "") + schedule +
          (epilogues_ == MatmulEpilogues::kFused ? ", cuBLASLt epilogues for 16-bit matmuls" : "") + candidates + ")";
  // The rule run.attention = auto follows (cuda_flash_attention_fits), refused here rather than by
  // a failed launch in the first backward step.
  if (attention_ == AttentionKernel::kFlash && !cuda_flash_attention_fits(device_index)) {
    throw DeviceRefusal("run.attention = flash: the flash kernels need " + std::to_string(flash_attention_shared_bytes()) +
                        " bytes of shared memory per block; " + props.name + " (" + arch + ") allows " +
                        std::to_string(props.sharedMemPerBlockOptin) + "; use run.attention = gemm");
  }

  CUDA_CHECK(cudaStreamCreate(&stream_));
  try {
    CUBLAS_CHECK(cublasCreate(&cublas_));
    CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    // Plain fp32 GEMMs: no TF32 tensor cores and no BF16x9 emulation, so the GEMMs agree with
    // the fp32 CPU twin to fp32 rounding (the default already, stated here on purpose).
    CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
    sum_squares_scratch_ =
        static_cast<double*>(allocate_bytes(kSumSquaresScratch * sizeof(double)));
    // Made now, not at the first 16-bit matmul: its workspace is then taken before the check
    // that the run fits measures the GPU's free memory, and a failure shows at start-up.
    const bool timed = matmul_algorithms_ == MatmulAlgorithms::kTimed;
    if (epilogues_ == MatmulEpilogues::kFused) lt_ = std::make_unique<LtMatmul>(timed);
    if (matmul_backward_streams_ == MatmulBackwardStreams::kTwo) {
      side_ = std::make_unique<SideStream>(stream_, CUBLAS_DEFAULT_MATH);
      // The side stream's cuBLASLt weight GEMMs (with the bias sums, or timed) need a workspace of
      // their own: the compute stream's GEMMs may be using lt_'s beside them.
      if (lt_ != nullptr && (matmul_bias_gradients_ == MatmulBiasGradients::kEpilogue || timed)) {
        side_lt_ = std::make_unique<LtMatmul>(timed);
      }
    }
  } catch (...) {
    side_lt_.reset();
    lt_.reset();
    release_bytes(sum_squares_scratch_);
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    cudaStreamDestroy(stream_);
    throw;
  }
}

CudaBackend::~CudaBackend() {
  // Never throws: errors here are of earlier work, already reported.
  (void)cudaStreamSynchronize(stream_);
  release_bytes(sum_squares_scratch_);
  release_bytes(workspace_);
  lt_.reset();
  side_.reset();  // waits for the side stream's work, which may use side_lt_'s workspace
  side_lt_.reset();
  (void)cublasDestroy(cublas_);
  (void)cudaStreamDestroy(stream_);
  (void)cudaGetLastError();
}

void* CudaBackend::track(void* ptr, std::size_t bytes) {
  allocation_bytes_[ptr] = bytes;
  live_bytes_ += bytes;
  high_water_bytes_ = std::max(high_water_bytes_, live_bytes_);
  return ptr;
}

void CudaBackend::untrack(const void* ptr) {
  const auto it = allocation_bytes_.find(ptr);
  if (it == allocation_bytes_.end()) return;
  live_bytes_ -= it->second;
  allocation_bytes_.erase(it);
}

float* CudaBackend::allocate(std::size_t count) {
  return static_cast<float*>(track(allocate_bytes(count * sizeof(float)), count * sizeof(float)));
}

void CudaBackend::release(float* ptr) {
  untrack(ptr);
  release_bytes(ptr);
}

int32_t* CudaBackend::allocate_tokens(std::size_t count) {
  return static_cast<int32_t*>(track(allocate_bytes(count * sizeof(int32_t)), count * sizeof(int32_t)));
}

void CudaBackend::release_tokens(int32_t* ptr) {
  untrack(ptr);
  release_bytes(ptr);
}

void CudaBackend::fill_zero(ActPtr ptr, std::size_t count) {
  if (count == 0) return;
  // All-zero bits are +0 in fp32, bf16 and fp16 alike.
  CUDA_CHECK(cudaMemsetAsync(ptr.get(), 0, ptr.bytes(count), stream_));
}

void CudaBackend::copy_to_device(float* dst, const float* host_src, std::size_t count) {
  copy_and_wait(dst, host_src, count * sizeof(float), cudaMemcpyHostToDevice, stream_);
}

void CudaBackend::copy_to_host(float* host_dst, const float* src, std::size_t count) {
  copy_and_wait(host_dst, src, count * sizeof(float), cudaMemcpyDeviceToHost, stream_);
}

void CudaBackend::copy_bytes_to_device(void* dst, const void* host_src, std::size_t bytes) {
  copy_and_wait(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_);
}

void CudaBackend::copy_bytes_to_host(void* host_dst, const void* src, std::size_t bytes) {
  copy_and_wait(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_);
}

void CudaBackend::copy_tokens_to_device(int32_t* dst, const int32_t* host_src, std::size_t count) {
  copy_and_wait(dst, host_src, count * sizeof(int32_t), cudaMemcpyHostToDevice, stream_);
}

void CudaBackend::synchronize() { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

bool CudaBackend::is_device_memory(const void* ptr) const {
  // Plain host memory is cudaMemoryTypeUnregistered (no error since CUDA 11); managed memory
  // is readable by the host, so only cudaMemoryTypeDevice needs staging.
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice;
}

Native16BitKernels CudaBackend::native_16bit() const {
  BackendOptions options;
  options.attention = attention_;
  return native_16bit_kernels(Device::kCuda, options);
}

void* CudaBackend::workspace(std::size_t bytes) {
  if (bytes > workspace_bytes_) {
    // Queued kernels may still use the old buffer: wait for them before it goes.
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    release_bytes(workspace_);
    workspace_ = nullptr;
    workspace_bytes_ = 0;
    workspace_ = allocate_bytes(bytes);
    workspace_bytes_ = bytes;
  }
  return workspace_;
}

}  // namespace trident::kernels::cuda
