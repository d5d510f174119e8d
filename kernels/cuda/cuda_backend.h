// CudaBackend: kernels::Backend on one CUDA device, in fp32, the twin of cpu::CpuBackend.
// Each method forwards to the launcher of its operation (kernels/cuda/<op>.cuh); this class
// owns the device, the stream every launch, GEMM and copy is queued on (so they run in call
// order), the cuBLAS handle bound to that stream, and a small device scratch for sum_squares
// (under run.matmul_backward_streams = two also a side stream for the matmul parameter
// gradients, joined back into that stream before each call returns).
// Pointers passed in are device pointers from allocate() / allocate_tokens(), except the host
// sides of the copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/algorithm_timing.h"  // TimedMatmulShape

// The opaque handle types behind cudaStream_t and cublasHandle_t, declared as the CUDA headers
// declare them, so that C++ files (kernels/backend.cpp) can include this header without the
// CUDA headers.
struct CUstream_st;
struct cublasContext;

namespace trident::kernels::cuda {

class LtMatmul;  // kernels/cuda/lt_matmul.cuh: cuBLASLt GEMMs with epilogues
class SideStream;  // kernels/cuda/side_stream.cuh: a second stream forked from and joined into stream_
struct GemmAttentionOptions;  // kernels/cuda/attention.cuh: the GEMM attention's schedule
struct FlashMmaOptions;  // kernels/cuda/flash_attention_mma.cuh: the 16-bit flash kernels' choices

class CudaBackend final : public Backend {
 public:
  // Makes device_index the current device of the calling thread and creates the stream, the
  // cuBLAS handle and the scratch on it. Throws std::runtime_error when the device is missing.
  // options.attention: the GEMM path (kernels/cuda/attention.cuh) or flash attention
  // (flash_attention.cuh, head size 64: other sizes throw std::logic_error when called; a GPU
  // that allows less shared memory per block than the kernels need, before sm_80, throws
  // std::runtime_error here).
  // options.matmul_epilogues: whether the 16-bit matmuls add their bias, and the MLP its GELU
  // and GELU gradient, in cuBLASLt's epilogues (kFused; the cuBLASLt handle and its 32 MiB
  // workspace are made here) or in separate kernels (kSeparate); fp32 matmuls never fuse.
  // options.attention_blocks and attention_batching: the GEMM path's schedule (its
  // GemmAttentionOptions; the pointer arrays live in the workspace below). A block count below
  // 1 throws std::invalid_argument here.
  // options.flash_dq, flash_block_order, flash_forward_products and _schedule,
  // flash_backward_products and _schedule, layernorm_sums, cross_entropy_loads, adamw_loads,
  // matmul_backward_streams, matmul_bias_gradients and matmul_algorithms: kernel choices waiting
  // for a GPU's timing
  // (kernels/backend.h); wgmma products with flash attention where this build or GPU has none
  // (cuda::flash_attention_wgmma_available) throw std::runtime_error here;
  // matmul_backward_streams = kTwo makes the side stream and its cuBLAS handle here.
  // The device is made current once, here: use the backend from the thread that built it
  // (Trident runs one rank per process on one thread; allocations and launches go to the
  // calling thread's current device).
  explicit CudaBackend(int device_index, BackendOptions options = {});
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  int device_index() const { return device_index_; }

  // 16-bit calls that could fuse (run.matmul_epilogues = fused, every operand 16-bit): how many
  // ran in a cuBLASLt epilogue and how many fell back to the separate kernels because cuBLASLt
  // had no algorithm for their shape or alignment. For tests and reports.
  struct EpilogueCounts {
    std::size_t fused = 0, fell_back = 0;
  };
  EpilogueCounts epilogue_counts() const { return epilogue_counts_; }
  // Under MatmulAlgorithms::kTimed, what the timing found at each product shape so far (both
  // cuBLASLt handles'); empty otherwise. For tests and reports.
  std::vector<TimedMatmulShape> timed_matmul_shapes() const;
  std::string matmul_algorithm_report() const override;
  std::string matmul_algorithm_choices() const override;
  bool adopt_matmul_algorithm_choices(const std::string& table) override;

  Device device() const override { return Device::kCuda; }
  std::string name() const override { return name_; }

  // Allocations are cudaMalloc'd (256-byte aligned); copies are synchronous for the caller
  // (queued on the stream, then the stream is waited for), so host buffers may be reused or
  // read as soon as a copy returns.
  float* allocate(std::size_t count) override;
  void release(float* ptr) override;
  void fill_zero(ActPtr ptr, std::size_t count) override;
  void copy_to_device(float* dst, const float* host_src, std::size_t count) override;
  void copy_to_host(float* host_dst, const float* src, std::size_t count) override;
  void copy_bytes_to_device(void* dst, const void* host_src, std::size_t bytes) override;
  void copy_bytes_to_host(void* host_dst, const void* src, std::size_t bytes) override;
  int32_t* allocate_tokens(std::size_t count) override;
  void release_tokens(int32_t* ptr) override;
  void copy_tokens_to_device(int32_t* dst, const int32_t* host_src, std::size_t count) override;
  void synchronize() override;
  // True for memory of a CUDA device (what allocate() returns), false for host memory.
  bool is_device_memory(const void* ptr) const override;
  void* device_stream() const override { return stream_; }
  std::size_t device_bytes_high_water() const override { return high_water_bytes_; }
  void set_gemm_input_precision(Precision inputs) override;
  // Every kernel family reads 16-bit operands natively (matmuls through cublasGemmEx and
  // cuBLASLt, the GEMM attention's products through cublasGemmStridedBatchedEx, the others
  // templated on their storage, kernels/stored_element.h), with either attention kernel.
  Native16BitKernels native_16bit() const override;

  void embedding_forward(ActPtr out, const int32_t* tokens, ConstActPtr wte, ConstActPtr wpe,
                         int B, int T, int C, int vocab_begin, int vocab_end) override;
  void embedding_backward(float* dwte, float* dwpe, ConstActPtr dout, const int32_t* tokens, int B,
                          int T, int C, int vocab_begin, int vocab_end) override;

  void matmul_forward(ActPtr out, ConstActPtr inp, ConstActPtr weight, ConstActPtr bias, int N,
                      int C, int OC) override;
  void matmul_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout,
                       ConstActPtr inp, ConstActPtr weight, int N, int C, int OC) override;
  // Under MatmulEpilogues::kFused with every operand 16-bit of one format: one cuBLASLt GEMM with
  // the GELU (forward) or GELU-gradient (backward) epilogue; otherwise, or where cuBLASLt has no
  // algorithm for the shape, the two separate calls.
  void matmul_gelu_forward(ActPtr out, ActPtr pre, ConstActPtr inp, ConstActPtr weight, ConstActPtr bias, int N,
                           int C, int OC) override;
  void matmul_backward_through_gelu(ActPtr dpre, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                                    ConstActPtr weight, ConstActPtr pre, int N, int C, int OC) override;

  void layernorm_forward(ActPtr out, float* mean, float* rstd, ConstActPtr inp,
                         ConstActPtr weight, ConstActPtr bias, int N, int C) override;
  void layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout,
                          ConstActPtr inp, ConstActPtr weight, const float* mean,
                          const float* rstd, int N, int C) override;
  void residual_layernorm_forward(ActPtr residual, ActPtr out, float* mean, float* rstd, ConstActPtr a, ConstActPtr b,
                                  ConstActPtr weight, ConstActPtr bias, int N, int C) override;

  void gelu_forward(ActPtr out, ConstActPtr inp, std::size_t n) override;
  void gelu_backward(ActPtr dinp, ConstActPtr inp, ConstActPtr dout, std::size_t n) override;

  void attention_forward(ActPtr out, float* lse, float* scratch, ConstActPtr qkv, int B, int T,
                         int C, int NH) override;
  // Does not read out (yet): the GEMM path sums rowsum(P * dP) itself, as the CPU twin.
  void attention_backward(ActPtr dqkv, float* scratch, ConstActPtr dout, ConstActPtr qkv,
                          ConstActPtr out, const float* lse, int B, int T, int C,
                          int NH) override;
  std::size_t attention_scratch_size(int B, int T, int NH) const override;

  void cross_entropy_forward(float* losses, float* row_max, float* row_sumexp, ConstActPtr logits,
                             const int32_t* targets, int N, int V, int Vp) override;
  void cross_entropy_backward(ActPtr dlogits, ConstActPtr logits, const int32_t* targets,
                              float dloss, int N, int V, int Vp) override;
  // One kernel: each row of logits read from memory once for its loss and its gradient.
  void cross_entropy_forward_backward(float* losses, float* row_max, float* row_sumexp, ActPtr dlogits,
                                      ConstActPtr logits, const int32_t* targets, float dloss, int N, int V,
                                      int Vp) override;
  void cross_entropy_shard_statistics(float* stats, ConstActPtr logits, const int32_t* targets, int N, int V_local,
                                      int Vp_local, int vocab_begin) override;
  void cross_entropy_combine_shards(float* row_max, float* row_sumexp, float* target_logit, const float* gathered,
                                    int N, int shards) override;
  void cross_entropy_backward_sharded(ActPtr dlogits, ConstActPtr logits, const int32_t* targets,
                                      const float* row_max, const float* row_sumexp, float dloss,
                                      int N, int V_local, int Vp_local, int vocab_begin) override;

  void add(ActPtr out, ConstActPtr a, ConstActPtr b, std::size_t n) override;
  void accumulate(float* dst, const float* src, std::size_t n) override;
  void scale(float* x, float factor, std::size_t n) override;
  double sum_squares(const float* x, std::size_t n) override;
  double sum_squares_of_ranges(const float* base, const ElementRange* ranges, std::size_t count) override;
  void round_to_precision(float* dst, const float* src, std::size_t n, Precision precision) override;
  void narrow(ActPtr dst, const float* src, std::size_t n) override;
  void widen(float* dst, ConstActPtr src, std::size_t n) override;

  void adamw_update_master(float* master, ActPtr compute, const float* grad, float* m, float* v, std::size_t n,
                           const AdamWArgs& args, Precision compute_precision) override;
  void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n,
                    const AdamWArgs& args) override;

 private:
  int device_index_;                       // the CUDA device this backend runs on
  AttentionKernel attention_;              // GEMM path or flash attention (run.attention)
  FlashDq flash_dq_;                       // how flash attention's 16-bit backward makes dQ (run.flash_dq)
  FlashBlockOrder flash_block_order_;      // which blocks take which flash tiles (run.flash_block_order)
  FlashProducts flash_forward_products_;   // mma.sync or wgmma in flash's 16-bit forward (run.flash_forward)
  WarpgroupSchedule flash_forward_schedule_;  // and the wgmma forward's schedule
  FlashProducts flash_backward_products_;  // the same for its backward (run.flash_backward)
  WarpgroupSchedule flash_backward_schedule_;
  int flash_warpgroups_;  // the wgmma kernels' warpgroups a block, 1 or 2 (run.flash_warpgroups)
  LayerNormParameterSums layernorm_sums_;  // where LayerNorm's backward sums dweight, dbias (run.layernorm_sums)
  CrossEntropyLoads cross_entropy_loads_;  // how the cross-entropy backward reads a row (run.cross_entropy_loads)
  AdamWLoads adamw_loads_;                 // how AdamW walks its arrays (run.adamw_loads)
  MatmulBackwardStreams matmul_backward_streams_;  // where matmul parameter gradients go (run.matmul_backward_streams)
  MatmulBiasGradients matmul_bias_gradients_;  // where 16-bit bias gradients are summed (run.matmul_bias_gradients)
  MatmulAlgorithms matmul_algorithms_;     // heuristic's first or timed cuBLASLt kernels (run.matmul_algorithms)
  MatmulEpilogues epilogues_;              // cuBLASLt epilogues or separate kernels (run.matmul_epilogues)
  int attention_blocks_;                   // the GEMM path's causal row blocks (run.attention_blocks)
  AttentionBatching attention_batching_;   // and how its products batch (run.attention_batching)
  std::unique_ptr<LtMatmul> lt_;           // cuBLASLt, under MatmulEpilogues::kFused only
  std::unique_ptr<SideStream> side_;       // under MatmulBackwardStreams::kTwo only
  std::unique_ptr<LtMatmul> side_lt_;      // the side stream's cuBLASLt, with MatmulBiasGradients::kEpilogue or kTimed
  EpilogueCounts epilogue_counts_;
  std::string name_;                       // "cuda (<device name>, sm_<major><minor>)", for banners
  CUstream_st* stream_ = nullptr;          // every kernel, GEMM and copy of this backend, in order
  cublasContext* cublas_ = nullptr;        // cuBLAS handle bound to stream_ (fp32, or TF32: set_gemm_input_precision)
  double* sum_squares_scratch_ = nullptr;  // device partial sums of sum_squares
  std::vector<double> range_totals_;       // host copy of sum_squares_of_ranges' per-range totals
  // Device workspace of the kernels that need one for a call (the partial sums of the bias and
  // LayerNorm parameter gradients, the embedding backward's sort, the GEMM attention's pointer
  // arrays, the per-range totals of sum_squares_of_ranges), grown to the largest call so far: a
  // few MiB at most (64 chunks x the widest biased layer's channels, 2 x 64 x C for a LayerNorm,
  // 3 ints per position of a micro-batch and CUB's sort storage, 3 B NH pointers, or a double
  // per range).
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  // Bytes of each live allocation of allocate / allocate_tokens, their sum and its maximum.
  std::unordered_map<const void*, std::size_t> allocation_bytes_;
  std::size_t live_bytes_ = 0;
  std::size_t high_water_bytes_ = 0;
  void* track(void* ptr, std::size_t bytes);
  // The cuBLASLt matmuls when epilogues are fused, else null.
  LtMatmul* lt();
  // Where a matmul backward queues its parameter gradients (the weight GEMM and the bias sums):
  // on the side stream, beside the input gradient's GEMM, when there is a side stream and an
  // input gradient to overlap (forked from stream_ here); otherwise after it on stream_.
  struct GradientLane {
    cublasContext* cublas;
    CUstream_st* stream;
    bool beside;
  };
  GradientLane parameter_gradient_lane(bool overlaps);
  // Joins the side stream into stream_ when the lane was beside (before the call returns).
  void rejoin(const GradientLane& lane);
  // Under MatmulBiasGradients::kEpilogue, a 16-bit layer's weight gradient and bias sums in one
  // cuBLASLt GEMM on the lane's stream (the sums into column_scratch, then added to dbias): lt_ on
  // stream_, side_lt_ (a workspace of its own, as lt_'s may be in use on stream_ meanwhile) on the
  // side stream. False, having queued nothing, where it does not apply or cuBLASLt refuses: the
  // caller makes them as usual.
  bool parameter_gradients_in_epilogue(float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp, int N, int C,
                                       int OC, Precision p, float* column_scratch, const GradientLane& lane);
  // A 16-bit layer's input gradient (on stream_) and parameter gradients (on the lane, after
  // parameter_gradients_in_epilogue declined): through the lane's cuBLASLt under
  // MatmulAlgorithms::kTimed, where it takes the call; otherwise cublasGemmEx and the column sums.
  void input_gradient_16bit(ActPtr dinp, ConstActPtr dout, ConstActPtr weight, int N, int C, int OC, Precision p);
  void parameter_gradients_16bit(float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp, int N, int C,
                                 int OC, Precision p, float* column_scratch, const GradientLane& lane);
  // Counts a fused attempt's outcome (ran: cuBLASLt took it) and returns it.
  bool counted(bool ran);
  // workspace_, grown to at least `bytes`; as `floats` floats of column-sum partials; and as a
  // bias gradient's partials for OC columns (null without a bias gradient: nothing to sum).
  void* workspace(std::size_t bytes);
  float* column_scratch(std::size_t floats);
  float* bias_scratch(const float* dbias, int OC);
  void untrack(const void* ptr);
  // The GEMM attention's options for a call of B x NH matrices (pointer arrays in the workspace
  // under AttentionBatching::kPointers).
  GemmAttentionOptions gemm_attention_options(int B, int NH);
  // The flash kernels' choices of run.flash_dq, flash_block_order, flash_forward and flash_backward.
  FlashMmaOptions flash_options() const;
};

}  // namespace trident::kernels::cuda
