// Linear layers on 16-bit buffers through cuBLASLt, with the work that follows a GEMM done in its
// epilogue instead of a pass of its own (run.matmul_epilogues = fused):
//   forward_bias:   out = inp @ weight^T + bias          (no broadcast pass, no read of out)
//   forward_gelu:   pre = inp @ weight^T + bias, out = gelu(pre)   (one GEMM writes both)
//   backward_dgelu: dpre = (dout @ weight) * gelu'(pre)  (the GELU backward's read and write of
//                   the GEMM's result saved)
//   weight_gradient_bias_sums: dweight += dout^T @ inp in fp32, and the sums of dout over the
//                   tokens beside it (run.matmul_bias_gradients = epilogue: no pass over dout of
//                   its own for the bias gradient)
// Every operand is bf16 or fp16 (all one format; the weight gradient and the sums are fp32),
// products accumulate in fp32 and each stored value is rounded once, from the fp32 result: the
// GELU of the fp32 pre-activation, not of its rounded copy, and the GELU gradient times the
// unrounded product. So the fused results may differ from the separate kernels' by a unit of the
// 16-bit format (tests/gpu say how much).
// cuBLASLt's GELU is the tanh approximation, as GPT-2's and the CPU twin's.
//
// Under run.matmul_algorithms = timed (LtMatmul(true)) the backward's other two products run here
// as well (input_gradient, weight_gradient), and each product shape's first call times up to
// kTimedAnswers of the heuristic's answers on its own operands before it runs
// (algorithm_timing.h chooses; timed_shapes() says what was found). The answers chosen can be
// read as a choice table (kernels/choice_table.h) and taken from one, so that every rank runs the
// answers the ranks agreed on, and a restart those its checkpoint kept (src/train: the table is
// merged over the ranks after the first step and at each checkpoint, and kept in the checkpoint).
// Each launcher returns false, having queued nothing, when cuBLASLt has no algorithm for the call
// (a shape or alignment it does not handle or refuses, e.g. a leading dimension of the GELU input
// that is not a multiple of 8): the caller then runs the separate kernels. The answer is cached per
// shape, format and operand alignment, with the algorithm the heuristic chose, so the heuristic
// runs once per layer shape.
#pragma once

#include <cublasLt.h>      // cublasLtHandle_t, cublasLtEpilogue_t, descriptor types
#include <cuda_runtime.h>  // cudaStream_t, cudaDataType_t

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cuda/algorithm_timing.h"  // TimedMatmulShape

namespace trident::kernels::cuda {

class LtMatmul {
 public:
  // Makes the cuBLASLt handle and its workspace on the current device; OutOfMemory when the
  // workspace does not fit. timed: choose each shape's algorithm by timing (above).
  explicit LtMatmul(bool timed = false);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  // Bytes of device memory the workspace holds: what the heuristic may pick kernels for (32 MiB,
  // as usual on Hopper). Outside the memory estimate, like the other libraries' workspaces.
  static constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;
  // Answers of the heuristic a timed shape tries, and the margin by which another must beat the
  // first (the timing's noise between two runs of one kernel, a few percent).
  static constexpr int kTimedAnswers = 8;
  static constexpr float kTimedMargin = 0.02f;
  static constexpr int kTimedRepeats = 3;  // runs timed per answer, after one that warms it

  // What the timing found at each shape so far, the answers taken from a table among them (adopted).
  std::vector<TimedMatmulShape> timed_shapes() const;
  // The choice table of the shapes timed or adopted so far: a line "library | cuBLASLt VERSION on
  // DEVICE" (whose kernels the answers' indices number), then one a shape, "SHAPE | answer A of N
  // (first F ms, chosen C ms)"; empty when none.
  std::string chosen_answers() const;
  // Takes a table's answers: a shape met already switches to its answer, one met later takes it
  // without timing. Nothing when not timing, or when the table names another cuBLASLt or GPU (its
  // indices would number other kernels): then false.
  bool adopt_answers(const std::string& table);

  // out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC]; bias not null.
  bool forward_bias(void* out, const void* inp, const void* weight, const void* bias, int N, int C, int OC,
                    cudaDataType_t type, cudaStream_t stream);
  // pre[N,OC] = inp @ weight^T + bias (bias may be null), out[N,OC] = gelu(pre).
  bool forward_gelu(void* out, void* pre, const void* inp, const void* weight, const void* bias, int N, int C, int OC,
                    cudaDataType_t type, cudaStream_t stream);
  // dpre[N,C] = (dout[N,OC] @ weight[OC,C]) * gelu'(pre[N,C]); overwrites dpre.
  bool backward_dgelu(void* dpre, const void* dout, const void* weight, const void* pre, int N, int C, int OC,
                      cudaDataType_t type, cudaStream_t stream);
  // dweight[OC,C] += dout[N,OC]^T @ inp[N,C] (fp32, accumulated), and bias_sums[OC] = the sums of
  // dout's N rows (fp32, overwritten: cuBLASLt's BGRADB epilogue writes the sums, it does not add
  // them). dout and inp in `type`.
  // Under timing only (the backend calls them then; they run the same with the heuristic's
  // first): dinp[N,C] = dout[N,OC] @ weight[OC,C] (overwritten), and dweight[OC,C] += dout^T @ inp
  // (fp32, accumulated), every other operand in `type`.
  bool input_gradient(void* dinp, const void* dout, const void* weight, int N, int C, int OC, cudaDataType_t type,
                      cudaStream_t stream);
  bool weight_gradient(float* dweight, const void* dout, const void* inp, int N, int C, int OC, cudaDataType_t type,
                       cudaStream_t stream);
  bool weight_gradient_bias_sums(float* dweight, float* bias_sums, const void* dout, const void* inp, int N, int C,
                                 int OC, cudaDataType_t type, cudaStream_t stream);

 private:
  // One GEMM in cuBLASLt's column-major terms: D (m x n, ld m) = op(A) op(B) (+ D when beta is 1)
  // with the epilogue, A stored (transa ? k x m : m x k), B stored (transb ? n x k : k x n).
  // Alignments are each pointer's largest power-of-two divisor up to 256 bytes: the heuristic picks
  // kernels for them.
  struct Key {
    int epilogue, type, d_type, bias_type, m, n, k, transa, transb;
    unsigned align_a, align_b, align_d, align_bias, align_aux;
    bool operator<(const Key& o) const {
      return std::tie(epilogue, type, d_type, bias_type, m, n, k, transa, transb, align_a, align_b, align_d,
                      align_bias, align_aux) < std::tie(o.epilogue, o.type, o.d_type, o.bias_type, o.m, o.n, o.k,
                                                        o.transa, o.transb, o.align_a, o.align_b, o.align_d,
                                                        o.align_bias, o.align_aux);
    }
  };
  // The key as a choice table writes it, and back (nullopt: not one).
  static std::string key_text(const Key& key);
  static std::optional<Key> parse_key(const std::string& text);
  struct Plan;
  struct Call {
    cublasLtEpilogue_t epilogue;
    cudaDataType_t type;    // A's and B's
    cudaDataType_t d_type;  // D's: type, or fp32 for a weight gradient
    int m, n, k;
    bool transa, transb;
    float beta;  // 0: D written, never read; 1: added to
    const void* a;
    const void* b;
    void* d;
    const void* bias;          // the bias, or where the bias gradient goes; null: none
    cudaDataType_t bias_type;  // the bias's format
    const void* aux;           // the GELU input (written by forward_gelu, read by backward_dgelu), ld m; null: none
  };
  bool run(const Call& call, cudaStream_t stream);
  Plan& plan_for(const Call& call, cudaStream_t stream);
  // Times the heuristic's `found` answers on the call's operands (a scratch D where the call adds
  // to D) and keeps the fastest in plan.algo.
  void time_answers(const Key& key, Plan& plan, const Call& call, const cublasLtMatmulHeuristicResult_t* answers,
                    int found, cudaStream_t stream);

  bool timed_ = false;
  std::string library_;                      // under timing: "cuBLASLt VERSION on DEVICE"
  std::map<Key, TimedMatmulShape> shapes_;   // each shape timed or adopted, and its answer
  std::map<Key, TimedMatmulShape> adopted_;  // the answers taken from tables, for shapes met later
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace trident::kernels::cuda
