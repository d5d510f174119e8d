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
#include <cublas_v2.h>     // cublasCreate, cublasSetStream, cublasSetMathMode
#include <cuda_runtime.h>  // cudaMalloc, cudaMemcpyAsync, cudaStreamCreate

#include <algorithm>  // std::max
#include <cstdio>     // std::snprintf
#include <initializer_list>
#include <new>
#include <stdexcept>
#include <string>

#include "kernels/choice_table.h"          // merge_choice_tables (both cuBLASLt handles' answers)
#include "kernels/device_refusal.h"
#include "kernels/cuda/adamw.cuh"          // adamw_update
#include "kernels/cuda/attention.cuh"      // attention_forward/backward, attention_scratch_size
#include "kernels/cuda/column_sums.cuh"  // add_column_sums (the timed weight GEMM's bias sums)
#include "kernels/cuda/column_sums_math.h"  // columns::sum_scratch_floats, pair_scratch_floats
#include "kernels/cuda/flash_attention.cuh"  // flash_attention_forward/backward, its scratch size
#include "kernels/cuda/flash_attention_mma.cuh"  // FlashMmaOptions, flash_attention_wgmma_available
#include "kernels/cuda/cross_entropy.cuh"  // cross_entropy_forward/backward, sharded pieces
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cublas_library.h"  // cublas_problem
#include "kernels/cuda/cuda_check.h"     // CUDA_CHECK, CUBLAS_CHECK
#include "kernels/cuda/device_code.cuh"   // device_code_problem
#include "kernels/cuda/elementwise.cuh"  // add, accumulate, scale, sum_squares
#include "kernels/cuda/embedding.cuh"    // embedding_forward, embedding_backward
#include "kernels/cuda/gelu.cuh"         // gelu_forward, gelu_backward
#include "kernels/cuda/gemm.cuh"         // cuda_data_type
#include "kernels/cuda/layernorm.cuh"    // layernorm_forward, layernorm_backward
#include "kernels/cuda/lt_matmul.cuh"    // LtMatmul: cuBLASLt GEMMs with bias and GELU epilogues
#include "kernels/cuda/matmul.cuh"       // matmul_forward/backward, their halves and 16-bit forms
#include "kernels/cuda/side_stream.cuh"  // SideStream (run.matmul_backward_streams = two)
#include "kernels/cuda/wire_cast.cuh"    // encode_16bit, decode_16bit (16-bit activation storage)
#include "kernels/out_of_memory.h"       // OutOfMemory, mib

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

// The 16-bit format all the given operands (null ones aside) share, or fp32 when one is fp32 or
// they mix formats: a call the fused cuBLASLt path does not take.
Precision shared_16bit_format(std::initializer_list<ConstActPtr> operands) {
  Precision found = Precision::kFp32;
  for (ConstActPtr p : operands) {
    if (!p) continue;
    if (p.is_fp32() || (found != Precision::kFp32 && p.storage() != found)) return Precision::kFp32;
    found = p.storage();
  }
  return found;
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

// The one 16-bit precision of a native 16-bit call's operands (null ones aside); a mix of
// formats, or an fp32 operand among them, is a caller's bug (RoundedStorageBackend widens
// those calls instead).
Precision one_16bit_precision(std::initializer_list<ConstActPtr> operands, const char* call) {
  Precision found = Precision::kFp32;
  for (ConstActPtr p : operands) {
    if (!p) continue;
    if (p.is_fp32() || (found != Precision::kFp32 && p.storage() != found)) {
      throw std::logic_error(std::string("CudaBackend::") + call +
                             ": 16-bit operands must all be 16-bit of one format (fp32 and 16-bit, or bf16 "
                             "and fp16, mixed)");
    }
    found = p.storage();
  }
  return found;
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

void CudaBackend::embedding_forward(ActPtr out, const int32_t* tokens, ConstActPtr wte,
                                    ConstActPtr wpe, int B, int T, int C, int vocab_begin,
                                    int vocab_end) {
  cuda::embedding_forward(out, tokens, wte, wpe, B, T, C, vocab_begin, vocab_end, stream_);
}

void CudaBackend::embedding_backward(float* dwte, float* dwpe, ConstActPtr dout,
                                     const int32_t* tokens, int B, int T, int C, int vocab_begin,
                                     int vocab_end) {
  cuda::embedding_backward(dwte, dwpe, dout, tokens, B, T, C, vocab_begin, vocab_end,
                           workspace(cuda::embedding_backward_scratch_bytes(B * T)), stream_);
}

LtMatmul* CudaBackend::lt() { return lt_.get(); }

std::vector<TimedMatmulShape> CudaBackend::timed_matmul_shapes() const {
  std::vector<TimedMatmulShape> shapes;
  for (const LtMatmul* lt : {lt_.get(), side_lt_.get()}) {
    if (lt == nullptr) continue;
    const std::vector<TimedMatmulShape> own = lt->timed_shapes();
    shapes.insert(shapes.end(), own.begin(), own.end());
  }
  return shapes;
}

// One table for both cuBLASLt handles: a shape's answer numbers the same kernel on either.
std::string CudaBackend::matmul_algorithm_choices() const {
  std::vector<std::string> tables;
  for (const LtMatmul* lt : {lt_.get(), side_lt_.get()}) {
    if (lt != nullptr) tables.push_back(lt->chosen_answers());
  }
  return merge_choice_tables(tables);
}

bool CudaBackend::adopt_matmul_algorithm_choices(const std::string& table) {
  bool adopted = false;
  for (LtMatmul* lt : {lt_.get(), side_lt_.get()}) {
    if (lt != nullptr) adopted = lt->adopt_answers(table) || adopted;
  }
  return adopted;
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

float* CudaBackend::column_scratch(std::size_t floats) {
  return static_cast<float*>(workspace(floats * sizeof(float)));
}

float* CudaBackend::bias_scratch(const float* dbias, int OC) {
  return dbias != nullptr ? column_scratch(columns::sum_scratch_floats(OC)) : nullptr;
}

bool CudaBackend::counted(bool ran) {
  ++(ran ? epilogue_counts_.fused : epilogue_counts_.fell_back);
  return ran;
}

void CudaBackend::matmul_forward(ActPtr out, ConstActPtr inp, ConstActPtr weight,
                                 ConstActPtr bias, int N, int C, int OC) {
  if (!inp.is_fp32()) {
    // 16-bit inputs; out 16-bit of the same format, or fp32 (fp32 results).
    const Precision p = one_16bit_precision({inp, weight, bias}, "matmul_forward");
    if (!out.is_fp32()) one_16bit_precision({out, inp}, "matmul_forward");
    // The bias in the epilogue: no broadcast pass, and out is written once instead of written,
    // read and written again.
    if (bias && !out.is_fp32() && lt() != nullptr &&
        counted(lt()->forward_bias(out.get(), inp.get(), weight.get(), bias.get(), N, C, OC, cuda_data_type(p),
                                   stream_))) {
      return;
    }
    cuda::matmul_forward_16bit(out.get(), out.is_fp32(), inp.get(), weight.get(), bias.get(), N, C, OC, p, cublas_,
                               stream_);
    return;
  }
  cuda::matmul_forward(out.f32(), inp.f32(), weight.f32(), bias.f32(), N, C, OC, cublas_, stream_);
}

CudaBackend::GradientLane CudaBackend::parameter_gradient_lane(bool overlaps) {
  if (side_ == nullptr || !overlaps) return GradientLane{cublas_, stream_, false};
  side_->fork();
  return GradientLane{side_->cublas(), side_->stream(), true};
}

void CudaBackend::rejoin(const GradientLane& lane) {
  if (lane.beside) side_->join();
}

bool CudaBackend::parameter_gradients_in_epilogue(float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                                                  int N, int C, int OC, Precision p, float* column_scratch,
                                                  const GradientLane& lane) {
  LtMatmul* lt_of_lane = lane.beside ? side_lt_.get() : lt();
  if (matmul_bias_gradients_ != MatmulBiasGradients::kEpilogue || dbias == nullptr || N == 0 ||
      lt_of_lane == nullptr) {
    return false;
  }
  // column_scratch holds a bias gradient's partials (bias_scratch): at least OC floats.
  if (!counted(lt_of_lane->weight_gradient_bias_sums(dweight, column_scratch, dout.get(), inp.get(), N, C, OC,
                                                     cuda_data_type(p), lane.stream))) {
    return false;
  }
  cuda::accumulate(dbias, column_scratch, static_cast<std::size_t>(OC), lane.stream);
  return true;
}

std::string CudaBackend::matmul_algorithm_report() const {
  const std::vector<TimedMatmulShape> shapes = timed_matmul_shapes();
  if (shapes.empty()) return {};
  int other = 0, adopted = 0;
  double first_ms = 0.0, chosen_ms = 0.0;
  for (const auto& s : shapes) {
    other += s.chosen != 0 ? 1 : 0;
    adopted += s.adopted ? 1 : 0;
    first_ms += s.first_ms;
    chosen_ms += s.chosen_ms;
  }
  // One call of each shape: the sum says what the choice saves where every shape runs once.
  char text[384];
  std::snprintf(text, sizeof text,
                "matmul algorithms: %zu cuBLASLt product shapes timed (run.matmul_algorithms = timed; %d of them "
                "on the answer another rank or the checkpoint chose), %d of them on another answer than the "
                "heuristic's first: %.3f ms for one call of each against %.3f ms",
                shapes.size(), adopted, other, chosen_ms, first_ms);
  return text;
}

void CudaBackend::input_gradient_16bit(ActPtr dinp, ConstActPtr dout, ConstActPtr weight, int N, int C, int OC,
                                       Precision p) {
  if (matmul_algorithms_ == MatmulAlgorithms::kTimed && lt() != nullptr &&
      lt()->input_gradient(dinp.get(), dout.get(), weight.get(), N, C, OC, cuda_data_type(p), stream_)) {
    return;
  }
  cuda::matmul_input_gradient_16bit(dinp.get(), dout.get(), weight.get(), N, C, OC, p, cublas_);
}

void CudaBackend::parameter_gradients_16bit(float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp, int N,
                                            int C, int OC, Precision p, float* column_scratch,
                                            const GradientLane& lane) {
  LtMatmul* lt_of_lane = lane.beside ? side_lt_.get() : lt();
  if (matmul_algorithms_ == MatmulAlgorithms::kTimed && lt_of_lane != nullptr &&
      lt_of_lane->weight_gradient(dweight, dout.get(), inp.get(), N, C, OC, cuda_data_type(p), lane.stream)) {
    if (dbias != nullptr) cuda::add_column_sums(dbias, dout, N, OC, column_scratch, lane.stream);
    return;
  }
  cuda::matmul_parameter_gradients_16bit(dweight, dbias, dout.get(), inp.get(), N, C, OC, p, column_scratch,
                                         lane.cublas, lane.stream);
}

void CudaBackend::matmul_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout,
                                  ConstActPtr inp, ConstActPtr weight, int N, int C, int OC) {
  const bool sixteen = !dout.is_fp32();
  const Precision p = sixteen ? one_16bit_precision({dinp, dout, inp, weight}, "matmul_backward") : Precision::kFp32;
  // The workspace before the fork: growing it waits for stream_, and nothing forked may still use it.
  float* column_scratch = bias_scratch(dbias, OC);
  const bool has_dinp = dinp.get() != nullptr;
  const GradientLane lane = parameter_gradient_lane(has_dinp);
  if (sixteen) {
    if (has_dinp) input_gradient_16bit(dinp, dout, weight, N, C, OC, p);
    if (!parameter_gradients_in_epilogue(dweight, dbias, dout, inp, N, C, OC, p, column_scratch, lane)) {
      parameter_gradients_16bit(dweight, dbias, dout, inp, N, C, OC, p, column_scratch, lane);
    }
  } else {
    if (has_dinp) cuda::matmul_input_gradient(dinp.f32(), dout.f32(), weight.f32(), N, C, OC, cublas_);
    cuda::matmul_parameter_gradients(dweight, dbias, dout.f32(), inp.f32(), N, C, OC, column_scratch, lane.cublas,
                                     lane.stream);
  }
  rejoin(lane);
}

void CudaBackend::matmul_gelu_forward(ActPtr out, ActPtr pre, ConstActPtr inp, ConstActPtr weight, ConstActPtr bias,
                                      int N, int C, int OC) {
  const Precision p = shared_16bit_format({out, pre, inp, weight, bias});
  if (p != Precision::kFp32 && lt() != nullptr &&
      counted(lt()->forward_gelu(out.get(), pre.get(), inp.get(), weight.get(), bias.get(), N, C, OC,
                                 cuda_data_type(p), stream_))) {
    return;
  }
  Backend::matmul_gelu_forward(out, pre, inp, weight, bias, N, C, OC);
}

void CudaBackend::matmul_backward_through_gelu(ActPtr dpre, float* dweight, float* dbias, ConstActPtr dout,
                                               ConstActPtr inp, ConstActPtr weight, ConstActPtr pre, int N, int C,
                                               int OC) {
  const Precision p = shared_16bit_format({dpre, dout, inp, weight, pre});
  if (p != Precision::kFp32 && lt() != nullptr) {
    float* column_scratch = bias_scratch(dbias, OC);
    const GradientLane lane = parameter_gradient_lane(true);
    const bool fused = counted(lt()->backward_dgelu(dpre.get(), dout.get(), weight.get(), pre.get(), N, C, OC,
                                                    cuda_data_type(p), stream_));
    if (fused && !parameter_gradients_in_epilogue(dweight, dbias, dout, inp, N, C, OC, p, column_scratch, lane)) {
      // The weight and bias gradients as matmul_backward makes them.
      parameter_gradients_16bit(dweight, dbias, dout, inp, N, C, OC, p, column_scratch, lane);
    }
    rejoin(lane);  // after a fallback: nothing was queued beside, and the join orders nothing
    if (fused) return;
  }
  Backend::matmul_backward_through_gelu(dpre, dweight, dbias, dout, inp, weight, pre, N, C, OC);
}

void CudaBackend::layernorm_forward(ActPtr out, float* mean, float* rstd, ConstActPtr inp,
                                    ConstActPtr weight, ConstActPtr bias, int N, int C) {
  cuda::layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, stream_);
}

void CudaBackend::residual_layernorm_forward(ActPtr residual, ActPtr out, float* mean, float* rstd, ConstActPtr a,
                                             ConstActPtr b, ConstActPtr weight, ConstActPtr bias, int N, int C) {
  cuda::residual_layernorm_forward(residual, out, mean, rstd, a, b, weight, bias, N, C, stream_);
}

void CudaBackend::layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout,
                                     ConstActPtr inp, ConstActPtr weight, const float* mean,
                                     const float* rstd, int N, int C) {
  cuda::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C,
                           column_scratch(cuda::layernorm_backward_scratch_floats(C)), stream_,
                           cuda::LayerNormRows::kWarpPerRow, layernorm_sums_);
}

void CudaBackend::gelu_forward(ActPtr out, ConstActPtr inp, std::size_t n) {
  cuda::gelu_forward(out, inp, n, stream_);
}

void CudaBackend::gelu_backward(ActPtr dinp, ConstActPtr inp, ConstActPtr dout, std::size_t n) {
  cuda::gelu_backward(dinp, inp, dout, n, stream_);
}

void CudaBackend::attention_forward(ActPtr out, float* lse, float* scratch, ConstActPtr qkv,
                                    int B, int T, int C, int NH) {
  if (attention_ == AttentionKernel::kFlash) {
    cuda::flash_attention_forward(out, lse, qkv, B, T, C, NH, stream_, flash_options());
    return;
  }
  cuda::attention_forward(out, lse, scratch, qkv, B, T, C, NH, cublas_, stream_, gemm_attention_options(B, NH));
}

void CudaBackend::attention_backward(ActPtr dqkv, float* scratch, ConstActPtr dout,
                                     ConstActPtr qkv, ConstActPtr out, const float* lse,
                                     int B, int T, int C, int NH) {
  if (attention_ == AttentionKernel::kFlash) {
    // The flash identity rowsum(P * dP) = dout . out needs the forward's out.
    cuda::flash_attention_backward(dqkv, scratch, dout, qkv, out, lse, B, T, C, NH, stream_, flash_options());
    return;
  }
  cuda::attention_backward(dqkv, scratch, dout, qkv, lse, B, T, C, NH, cublas_, stream_,
                           gemm_attention_options(B, NH));
}

cuda::FlashMmaOptions CudaBackend::flash_options() const {
  return {.dq = flash_dq_,
          .block_order = flash_block_order_,
          .forward_products = flash_forward_products_,
          .forward_warpgroups = flash_forward_products_ == FlashProducts::kWarpgroup ? flash_warpgroups_ : 1,
          .backward_products = flash_backward_products_,
          .backward_warpgroups = flash_backward_products_ == FlashProducts::kWarpgroup ? flash_warpgroups_ : 1,
          .forward_schedule = flash_forward_schedule_,
          .backward_schedule = flash_backward_schedule_};
}

GemmAttentionOptions CudaBackend::gemm_attention_options(int B, int NH) {
  GemmAttentionOptions options;
  options.causal_blocks = attention_blocks_;  // clamped by the schedule (causal_blocks)
  if (attention_batching_ == AttentionBatching::kPointers) {
    // Each product writes its pointers and then reads them, in stream order, so one array
    // serves every product of every layer.
    options.matrix_pointers =
        static_cast<void**>(workspace(cuda::attention_matrix_pointers(B, NH) * sizeof(void*)));
  }
  return options;
}

std::size_t CudaBackend::attention_scratch_size(int B, int T, int NH) const {
  return attention_ == AttentionKernel::kFlash ? cuda::flash_attention_scratch_size(B, T, NH, flash_dq_)
                                               : cuda::attention_scratch_size(B, T, NH);
}

void CudaBackend::cross_entropy_forward(float* losses, float* row_max, float* row_sumexp, ConstActPtr logits,
                                        const int32_t* targets, int N, int V, int Vp) {
  cuda::cross_entropy_forward(losses, row_max, row_sumexp, logits, targets, N, V, Vp, stream_);
}

void CudaBackend::cross_entropy_backward(ActPtr dlogits, ConstActPtr logits,
                                         const int32_t* targets, float dloss, int N, int V,
                                         int Vp) {
  cuda::cross_entropy_backward(dlogits, logits, targets, dloss, N, V, Vp, stream_);
}

void CudaBackend::cross_entropy_forward_backward(float* losses, float* row_max, float* row_sumexp, ActPtr dlogits,
                                                 ConstActPtr logits, const int32_t* targets, float dloss, int N,
                                                 int V, int Vp) {
  cuda::cross_entropy_forward_backward(losses, row_max, row_sumexp, dlogits, logits, targets, dloss, N, V, Vp, stream_,
                                       cross_entropy_loads_);
}

void CudaBackend::cross_entropy_shard_statistics(float* stats, ConstActPtr logits, const int32_t* targets, int N,
                                                 int V_local, int Vp_local, int vocab_begin) {
  cuda::cross_entropy_shard_statistics(stats, logits, targets, N, V_local, Vp_local, vocab_begin, stream_);
}

void CudaBackend::cross_entropy_combine_shards(float* row_max, float* row_sumexp, float* target_logit,
                                               const float* gathered, int N, int shards) {
  cuda::cross_entropy_combine_shards(row_max, row_sumexp, target_logit, gathered, N, shards, stream_);
}

void CudaBackend::cross_entropy_backward_sharded(ActPtr dlogits, ConstActPtr logits,
                                                 const int32_t* targets, const float* row_max,
                                                 const float* row_sumexp, float dloss, int N,
                                                 int V_local, int Vp_local, int vocab_begin) {
  cuda::cross_entropy_backward_sharded(dlogits, logits, targets, row_max, row_sumexp, dloss, N,
                                       V_local, Vp_local, vocab_begin, stream_, cross_entropy_loads_);
}

void CudaBackend::add(ActPtr out, ConstActPtr a, ConstActPtr b, std::size_t n) {
  cuda::add(out, a, b, n, stream_);
}

void CudaBackend::accumulate(float* dst, const float* src, std::size_t n) {
  cuda::accumulate(dst, src, n, stream_);
}

void CudaBackend::scale(float* x, float factor, std::size_t n) {
  cuda::scale(x, factor, n, stream_);
}

double CudaBackend::sum_squares(const float* x, std::size_t n) {
  return cuda::sum_squares(x, n, sum_squares_scratch_, stream_);
}

double CudaBackend::sum_squares_of_ranges(const float* base, const ElementRange* ranges, std::size_t count) {
  // The ranges' totals in the workspace: nothing else holds it during the call.
  range_totals_.resize(count);
  return cuda::sum_squares_of_ranges(base, ranges, count, sum_squares_scratch_,
                                     static_cast<double*>(workspace(count * sizeof(double))), range_totals_.data(),
                                     stream_);
}

void CudaBackend::set_gemm_input_precision(Precision inputs) {
  // TF32 keeps 10 explicit significand bits (11 significant) and fp32's exponent: bf16 values
  // (8 significant bits) and fp16 values (11, with a smaller exponent range) convert to it
  // exactly, and products accumulate in fp32. So for such inputs the tensor cores give the
  // fp32 GEMM's result up to the order of summation.
  const cublasMath_t math = inputs == Precision::kFp32 ? CUBLAS_DEFAULT_MATH : CUBLAS_TF32_TENSOR_OP_MATH;
  CUBLAS_CHECK(cublasSetMathMode(cublas_, math));
  if (side_ != nullptr) side_->set_math_mode(math);  // the weight gradients' GEMMs too
}

void CudaBackend::round_to_precision(float* dst, const float* src, std::size_t n, Precision precision) {
  cuda::round_to_precision(dst, src, n, precision, stream_);
}

void CudaBackend::narrow(ActPtr dst, const float* src, std::size_t n) {
  if (n == 0) return;
  if (dst.is_fp32()) {
    CUDA_CHECK(cudaMemcpyAsync(dst.f32(), src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
    return;
  }
  cuda::encode_16bit(dst.bits16(), src, n, dst.storage(), stream_);
}

void CudaBackend::widen(float* dst, ConstActPtr src, std::size_t n) {
  if (n == 0) return;
  if (src.is_fp32()) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src.f32(), n * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
    return;
  }
  cuda::decode_16bit(dst, src.bits16(), n, src.storage(), stream_);
}

void CudaBackend::adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n,
                               const AdamWArgs& args) {
  cuda::adamw_update(param, grad, m, v, n, args, stream_, adamw_loads_);
}

void CudaBackend::adamw_update_master(float* master, ActPtr compute, const float* grad, float* m, float* v,
                                      std::size_t n, const AdamWArgs& args, Precision compute_precision) {
  cuda::adamw_update_master(master, compute, grad, m, v, n, args, compute_precision, stream_, adamw_loads_);
}

}  // namespace trident::kernels::cuda
