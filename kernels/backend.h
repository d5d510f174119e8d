// The kernel backend: every piece of math the model needs, on raw (device) pointers and shapes.
//
// One interface, two implementations: kernels/cpu (OpenMP + CBLAS, the reference twin) and
// kernels/cuda (cuBLASLt + CUDA, its own issue). The model calls only this interface, so it
// reads the same whatever the device. Pointers are device pointers of the backend that made
// them (host memory for the CPU backend).
//
// Shape conventions (as in llm.c): N = rows (tokens, B*T), C = channels, OC = output channels,
// B = batch, T = sequence length, NH = heads, V = real vocabulary, Vp = padded vocabulary.
// Every matrix is row-major. Every backward ACCUMULATES (+=) into its parameter gradients
// (weights, biases, tables, LayerNorm's weight and bias), so micro-batches add up with no extra
// pass; callers zero those when a step starts. Activation gradients are fresh each call: the
// matmul, GELU and attention backwards WRITE their input gradient (no zero-fill before, and a
// GEMM need not read it); LayerNorm's backward adds into its input gradient, because there it
// is the residual stream's, which sums the branch and the pass-through.
//
// Activations and their gradients travel as ActPtr (kernels/act_ptr.h): fp32 buffers, or 16-bit
// ones under mixed precision. So do the weights the kernels read (embedding tables, matmul
// weights and biases, LayerNorm parameters): the model's compute copy, 16-bit under mixed
// precision (the fp32 master weights stay with AdamW). The device kernels (kernels/cpu,
// kernels/cuda) compute on fp32 storage; RoundedStorageBackend gives every call 16-bit storage
// semantics on top of them, widening 16-bit operands into fp32 workspace and narrowing the
// results. Statistics, weight gradients and workspaces are float* in every precision.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/act_ptr.h"
#include "kernels/backend_options.h"  // BackendOptions and the kernel choices
#include "kernels/element_range.h"
#include "kernels/native_16bit.h"    // Native16BitKernels
#include "kernels/precision.h"

namespace trident::kernels {

enum class Device { kCpu, kCuda };

// Arguments of one AdamW update of one tensor (decoupled weight decay, bias-corrected).
struct AdamWArgs {
  float lr = 0.0f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  int step = 1;               // 1-based step number, for bias correction
  // Each gradient is multiplied by this as it is read, g = grad[i] * grad_scale, rounded to
  // float: the same g as a separate scale(grad, grad_scale) pass before the update, without that
  // pass's read and write of every gradient (the trainer's fp16 unscaling and clipping). The
  // gradients in memory are left as they were.
  float grad_scale = 1.0f;
  // Which elements decay, so that one call covers tensors with and without decay (biases and
  // norms are not decayed): bit i % 32 of decay_mask[i / 32] set means element i of the call
  // takes weight_decay, clear means 0. Backend memory from allocate_tokens holding the words'
  // bit patterns (adamw_decay_mask_words(n) of them). Null: every element takes weight_decay.
  const int32_t* decay_mask = nullptr;
};

// Words of an AdamW decay mask for n elements.
inline std::size_t adamw_decay_mask_words(std::size_t n) { return (n + 31) / 32; }

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string name() const = 0;  // for banners: "cpu (OpenBLAS, 2 threads)"

  // --- memory ---------------------------------------------------------------------------------
  // 64-byte aligned; contents undefined. Throws OutOfMemory (kernels/out_of_memory.h, a
  // std::bad_alloc saying which memory and how much) on failure.
  virtual float* allocate(std::size_t count) = 0;
  virtual void release(float* ptr) = 0;
  virtual void fill_zero(ActPtr ptr, std::size_t count) = 0;  // count elements of ptr's storage
  virtual void copy_to_device(float* dst, const float* host_src, std::size_t count) = 0;
  virtual void copy_to_host(float* host_dst, const float* src, std::size_t count) = 0;
  // The same for raw bytes (16-bit activations staged through host memory).
  virtual void copy_bytes_to_device(void* dst, const void* host_src, std::size_t bytes) = 0;
  virtual void copy_bytes_to_host(void* host_dst, const void* src, std::size_t bytes) = 0;
  // Token ids (inputs and targets) live in int32 device buffers of their own.
  virtual int32_t* allocate_tokens(std::size_t count) = 0;
  virtual void release_tokens(int32_t* ptr) = 0;
  virtual void copy_tokens_to_device(int32_t* dst, const int32_t* host_src, std::size_t count) = 0;
  // Waits until all work queued on this backend has finished (no-op on the CPU).
  virtual void synchronize() = 0;
  // True when ptr is memory the host cannot read directly (a GPU's): communicators that work on
  // host memory then stage it (parallel/host_staged_comm.h). The CPU backend's memory is host
  // memory.
  virtual bool is_device_memory(const void* /*ptr*/) const { return false; }
  // The CUDA stream (a cudaStream_t) all of this backend's work is queued on, so that a
  // communicator with a stream of its own (NCCL) can order itself after it with events. Null
  // for the CPU backend.
  virtual void* device_stream() const { return nullptr; }
  // The most device memory this backend has held at once through allocate and allocate_tokens
  // (its high-water mark), for comparing the memory estimate with a GPU run. 0 for the CPU,
  // whose memory the resident-set size measures.
  virtual std::size_t device_bytes_high_water() const { return 0; }
  // Under run.matmul_algorithms = timed, what the timing found (a line, "matmul algorithms: ..."),
  // for the end of a run; empty where nothing was timed.
  virtual std::string matmul_algorithm_report() const { return {}; }
  // Under run.matmul_algorithms = timed, the kernel chosen at each product shape so far, as a
  // choice table (kernels/choice_table.h); empty elsewhere. And the taking of such a table, merged
  // over the ranks or kept by a checkpoint: every shape in it runs the table's kernel from now
  // on, untimed, so that the ranks run the same kernels and a restart those of the run it resumes.
  // Returns false where the table cannot be taken (not timing; another library or GPU made it).
  virtual std::string matmul_algorithm_choices() const { return {}; }
  virtual bool adopt_matmul_algorithm_choices(const std::string& /*table*/) { return false; }
  // A promise that from now on every matmul and attention GEMM reads only values representable
  // in `inputs` (bf16 or fp16 storage: activations and the rounded compute copy of the
  // weights). A backend may then use math that is exact on such values with fp32 accumulation:
  // the CUDA backend turns on TF32 tensor cores, whose 11 significant bits hold every bf16 and
  // fp16 value exactly. The exception is attention's own intermediates between its GEMMs (the
  // probabilities, the softmax gradient), which TF32 rounds to 2^-11 relative: finer than the
  // bf16 rounding (2^-9) of what attention stores. kFp32 (the default) keeps plain fp32 math.
  // The CPU backend ignores it.
  virtual void set_gemm_input_precision(Precision /*inputs*/) {}
  // The kernel families this backend computes on 16-bit operands itself (Native16BitKernels);
  // RoundedStorageBackend passes such calls through instead of widening them. Each backend
  // answers native_16bit_kernels (below) for its device and options.
  virtual Native16BitKernels native_16bit() const { return {}; }

  // --- embeddings ------------------------------------------------------------------------------
  // Vocabulary-parallel: this rank owns the token rows [vocab_begin, vocab_end) of the table, and
  // wte / dwte point at the first OWNED row (row tok - vocab_begin holds token tok). Tokens in
  // [0, Vp); tokens outside the range contribute nothing here (another rank owns them), so the
  // sum over ranks of the forwards is the full embedding. Unsharded: 0, Vp.
  // out[b,t,:] = (vocab_begin <= tok < vocab_end ? wte[tok - vocab_begin,:] : 0)
  //            + (wpe ? wpe[t,:] : 0),                                     tok = tokens[b,t].
  // wpe may be null (the position term is added on one rank only).
  virtual void embedding_forward(ActPtr out, const int32_t* tokens, ConstActPtr wte,
                                 ConstActPtr wpe, int B, int T, int C, int vocab_begin,
                                 int vocab_end) = 0;
  // dwte[tok - vocab_begin,:] += dout[b,t,:] for owned tokens only (other rows untouched);
  // dwpe[t,:] += sum_b dout[b,t,:] when dwpe is not null.
  virtual void embedding_backward(float* dwte, float* dwpe, ConstActPtr dout,
                                  const int32_t* tokens, int B, int T, int C, int vocab_begin,
                                  int vocab_end) = 0;

  // --- matmul ----------------------------------------------------------------------------------
  // out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC] (bias may be null).
  virtual void matmul_forward(ActPtr out, ConstActPtr inp, ConstActPtr weight,
                              ConstActPtr bias, int N, int C, int OC) = 0;
  // dinp[N,C] = dout @ weight (overwritten);  dweight[OC,C] += dout^T @ inp;  dbias[OC] += sum_n
  // dout. dinp and dbias may be null (not needed). The parameter gradients accumulate over
  // micro-batches; dinp is a fresh activation gradient each call, so it is written, not added
  // to: no zero-fill before, and a GPU's GEMM need not read it (beta = 0).
  virtual void matmul_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout,
                               ConstActPtr inp, ConstActPtr weight, int N, int C, int OC) = 0;

  // --- matmul and GELU together (the MLP) -------------------------------------------------------
  // pre[N,OC] = inp @ weight^T + bias, out[N,OC] = gelu(pre): the up projection and its GELU, as
  // one call so that a backend can fuse them (the CUDA backend's cuBLASLt epilogue writes both
  // from the GEMM under run.matmul_epilogues = fused). Both outputs are kept for the backward.
  // The default (backend.cpp) is matmul_forward(pre, ...) then gelu_forward(out, pre, ...).
  virtual void matmul_gelu_forward(ActPtr out, ActPtr pre, ConstActPtr inp, ConstActPtr weight, ConstActPtr bias,
                                   int N, int C, int OC);
  // The backward of a matmul whose input is inp = gelu(pre) (the down projection): as
  // matmul_backward, but the input gradient taken through the GELU as well,
  // dpre[N,C] = gelu'(pre) * (dout @ weight) (overwritten), with dweight and dbias as there.
  // The default is matmul_backward(dpre, ...) then gelu_backward(dpre, pre, dpre, ...); the
  // CUDA backend can fuse the GELU gradient into the GEMM's epilogue.
  virtual void matmul_backward_through_gelu(ActPtr dpre, float* dweight, float* dbias, ConstActPtr dout,
                                            ConstActPtr inp, ConstActPtr weight, ConstActPtr pre, int N, int C,
                                            int OC);

  // --- layernorm (eps = 1e-5) --------------------------------------------------------------------
  // out = (inp - mean) * rstd * weight + bias, per row; saves mean[N], rstd[N] for backward.
  virtual void layernorm_forward(ActPtr out, float* mean, float* rstd, ConstActPtr inp,
                                 ConstActPtr weight, ConstActPtr bias, int N, int C) = 0;
  virtual void layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout,
                                  ConstActPtr inp, ConstActPtr weight, const float* mean,
                                  const float* rstd, int N, int C) = 0;
  // Fused residual add + LayerNorm, one pass over the rows instead of two: residual[N,C] = a + b
  // (residual may alias a or b), then out = layernorm(residual) as layernorm_forward, reading
  // the residual as stored. Bit-identical to add(residual, a, b) then layernorm_forward on the
  // same backend. Backward needs nothing new: the add passes its gradient through.
  virtual void residual_layernorm_forward(ActPtr residual, ActPtr out, float* mean, float* rstd, ConstActPtr a,
                                          ConstActPtr b, ConstActPtr weight, ConstActPtr bias, int N, int C) = 0;

  // --- GELU (tanh approximation, as GPT-2) -----------------------------------------------------
  virtual void gelu_forward(ActPtr out, ConstActPtr inp, std::size_t n) = 0;
  // dinp = gelu'(inp) * dout (overwritten). dinp may be dout itself (in place).
  virtual void gelu_backward(ActPtr dinp, ConstActPtr inp, ConstActPtr dout, std::size_t n) = 0;

  // --- causal multi-head self-attention ---------------------------------------------------------
  // qkv[B,T,3C] holds q, k, v for all heads: q = qkv[..., 0:C], k = [C:2C], v = [2C:3C], head h
  // owning channels [h*C/NH, (h+1)*C/NH) of each. Scale 1/sqrt(C/NH). Per (b, h) the scores are
  // S = scale Q K^T, row t over its causal columns t2 <= t.
  // The T x T probabilities are never kept between calls (the flash-attention contract): forward
  // keeps only out and the row statistic lse, and backward recomputes P = exp(S - lse) from qkv.
  // scratch: attention_scratch_size(B, T, NH) floats of workspace, shared by every layer and
  // used by one call at a time; its contents are undefined on entry and on exit.
  //
  // out[B,T,C] = softmax(S) V per head; lse[B,NH,T] receives the natural-log log-sum-exp of each
  // row of scaled scores over its causal columns, lse = max + log(sum_t2 exp(S[t,t2] - max)), a
  // statistic kept for backward (fp32 like the LayerNorm mean and rstd, also under 16-bit
  // storage).
  virtual void attention_forward(ActPtr out, float* lse, float* scratch, ConstActPtr qkv, int B,
                                 int T, int C, int NH) = 0;
  // dqkv = gradient w.r.t. qkv (overwritten: every element written, none read), from the
  // forward's out (as stored: rounded under 16-bit storage) and lse. A backend may use out for
  // the flash identity rowsum(P * dP)[t] = dout[t] . out[t] (per head) instead of summing P * dP
  // over the row.
  virtual void attention_backward(ActPtr dqkv, float* scratch, ConstActPtr dout,
                                  ConstActPtr qkv, ConstActPtr out, const float* lse, int B,
                                  int T, int C, int NH) = 0;
  // Floats of scratch for forward and backward at this shape.
  virtual std::size_t attention_scratch_size(int B, int T, int NH) const = 0;

  // --- fused softmax + cross-entropy -------------------------------------------------------------
  // losses[n] = logsumexp(logits[n, 0:V]) - logits[n, targets[n]]; columns V..Vp are padding
  // and never take part. targets in [0, V). row_max and row_sumexp ([N] each, or both null)
  // receive the row statistics the loss came from, as cross_entropy_shard_statistics gives them
  // for the whole vocabulary (max over the real columns; sum of exp(l - max) rounded to float):
  // cross_entropy_backward_sharded with vocab_begin = 0 takes them, so that the backward reads
  // the logits once instead of again for the max and the sum.
  virtual void cross_entropy_forward(float* losses, float* row_max, float* row_sumexp, ConstActPtr logits,
                                     const int32_t* targets, int N, int V, int Vp) = 0;
  // dlogits[n,v] = (softmax(logits[n,0:V])[v] - [v == targets[n]]) * dloss   for v < V,
  //              = 0                                                           for V <= v < Vp.
  // Overwrites (does not accumulate): this is where backward starts. dlogits may alias logits.
  // dloss is the same for every row (the loss is a mean over the global batch's tokens).
  // It finds the row max and sum again; the model instead runs cross_entropy_backward_sharded on
  // the statistics its forward handed out (one read of the logits).
  virtual void cross_entropy_backward(ActPtr dlogits, ConstActPtr logits,
                                      const int32_t* targets, float dloss, int N, int V,
                                      int Vp) = 0;
  // The loss and its gradient together, as a training step takes them: cross_entropy_forward
  // (losses, and the row statistics into row_max and row_sumexp, [N] each, not null), then
  // cross_entropy_backward_sharded on those statistics with vocab_begin 0, so the same bits as
  // those two calls. One call so that a backend can fuse them: the CUDA backend reads each row
  // of logits from memory once for both (the separate backward read it a second time). dlogits
  // may alias logits. The default (backend.cpp) is the two calls.
  virtual void cross_entropy_forward_backward(float* losses, float* row_max, float* row_sumexp, ActPtr dlogits,
                                              ConstActPtr logits, const int32_t* targets, float dloss, int N, int V,
                                              int Vp);

  // --- vocabulary-parallel cross-entropy (tensor parallelism) -----------------------------------
  // This rank holds logits[N, Vp_local] for the vocabulary ids [vocab_begin, vocab_begin +
  // Vp_local); of those, the first V_local columns are real tokens and the rest padding (never
  // read; V_local may be 0: an all-padding shard). Targets are global ids in [0, V). The caller
  // combines the ranks' pieces:
  //   1. cross_entropy_shard_statistics  -> this rank's block [3N]
  //   2. all-gather of the blocks, in rank order, into [shards, 3N]
  //   3. cross_entropy_combine_shards     -> the row max, sum and target logit of the whole row
  //   4. loss_n = log(sumexp_n) + max_n - target_logit_n  (by the caller);
  //      cross_entropy_backward_sharded  (no reduction needed)
  // So the forward runs one kernel over the logits and makes one collective (3N floats per rank).
  //
  // stats[0, N):  max over the real local columns (-infinity when V_local == 0);
  // stats[N, 2N): sum over them of exp(l - that max), rounded to float (0 when V_local == 0);
  // stats[2N, 3N): logits[n, targets[n] - vocab_begin] when the target is a real local column,
  //               else 0 (so the sum over ranks is the target's logit).
  // Over the whole vocabulary (vocab_begin 0) the max and the sum are cross_entropy_forward's
  // row statistics.
  virtual void cross_entropy_shard_statistics(float* stats, ConstActPtr logits, const int32_t* targets, int N,
                                              int V_local, int Vp_local, int vocab_begin) = 0;
  // gathered[shards * 3N]: the shards' stats blocks in rank order. row_max[n] = max over the
  // shards; row_sumexp[n] = sum over shards of sum_r * exp(max_r - row_max[n]) (in double,
  // rounded to float; an all-padding shard adds 0); target_logit[n] = sum of the shards'
  // target logits. Every rank computes the same values from the same blocks.
  virtual void cross_entropy_combine_shards(float* row_max, float* row_sumexp, float* target_logit,
                                            const float* gathered, int N, int shards) = 0;
  // With the GLOBAL row max and sum: dlogits[n,v] = (exp(l - max_n) / sum_n - [v is the
  // target]) * dloss on the real local columns, 0 on the padding. Overwrites; dlogits may alias
  // logits.
  virtual void cross_entropy_backward_sharded(ActPtr dlogits, ConstActPtr logits,
                                              const int32_t* targets, const float* row_max,
                                              const float* row_sumexp, float dloss, int N,
                                              int V_local, int Vp_local, int vocab_begin) = 0;

  // --- elementwise -----------------------------------------------------------------------------
  virtual void add(ActPtr out, ConstActPtr a, ConstActPtr b, std::size_t n) = 0;   // out = a+b
  virtual void accumulate(float* dst, const float* src, std::size_t n) = 0;          // dst += src
  virtual void scale(float* x, float factor, std::size_t n) = 0;                     // x *= factor
  // Sum of squares in double precision (for the global gradient norm).
  virtual double sum_squares(const float* x, std::size_t n) = 0;
  // The sums of squares of `count` ranges of base, each as sum_squares gives it, added in
  // order from 0: the gradient norm of a tensor rank > 0, whose replicated tensors leave gaps.
  // A device backend waits for the device once here, not once per range. Default: sum_squares
  // per range.
  virtual double sum_squares_of_ranges(const float* base, const ElementRange* ranges, std::size_t count);
  // dst[i] = src[i] rounded to `precision`'s storage (kernels/precision.h; dst may alias src):
  // 16-bit storage of activations, and the compute copy of fp32 master weights. kFp32 copies.
  virtual void round_to_precision(float* dst, const float* src, std::size_t n, Precision precision) = 0;
  // Between fp32 values and activation storage: dst[i] = src[i] rounded to dst's storage
  // (kernels/precision.h's encodings; an fp32 dst is a copy), and dst[i] = the exact value of
  // src[i]. The buffers may not overlap.
  virtual void narrow(ActPtr dst, const float* src, std::size_t n) = 0;
  virtual void widen(float* dst, ConstActPtr src, std::size_t n) = 0;

  // --- optimiser -------------------------------------------------------------------------------
  // m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2; mhat = m/(1-b1^t); vhat = v/(1-b2^t);
  // param -= lr * (mhat / (sqrt(vhat) + eps) + weight_decay * param).
  virtual void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n,
                            const AdamWArgs& args) = 0;
  // Mixed precision in one pass: the same update applied to the fp32 master weights, then
  // compute[i] = master[i] rounded to `compute_precision` (the model's copy): its bit pattern
  // when compute is a 16-bit buffer (whose storage must be compute_precision: std::logic_error
  // otherwise), the rounded float when it is fp32. Bit-identical to adamw_update(master, ...)
  // followed by narrow(compute, master, ...) (or round_to_precision for an fp32 compute).
  virtual void adamw_update_master(float* master, ActPtr compute, const float* grad, float* m, float* v,
                                   std::size_t n, const AdamWArgs& args, Precision compute_precision) = 0;
};

// Builds the backend for a device. threads: worker threads for the CPU backend (> 0); gpu: the
// index among the visible CUDA devices (src/app/device_choice.h chooses it).
// Throws DeviceRefusal (a std::runtime_error) when the device is not available in this build or
// machine, or has no kernel for an option (flash attention on the CPU, wgmma before Hopper, flash
// on a GPU with too little shared memory a block); another std::runtime_error for a fault of the
// device or its libraries.
std::unique_ptr<Backend> make_backend(Device device, int threads, int gpu = 0, BackendOptions options = {});

// The kernel families the backend of `device` computes on 16-bit operands itself, as its
// Backend::native_16bit answers, without building one: for memory estimates made before a
// backend exists (trident check, on a login node without a GPU). The CPU computes on fp32 only;
// CUDA reads 16 bits in every family, with either attention kernel (options is kept for a
// backend whose answer depends on them).
Native16BitKernels native_16bit_kernels(Device device, BackendOptions options = {});

}  // namespace trident::kernels
