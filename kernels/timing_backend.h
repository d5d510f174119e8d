// TimingBackend: wraps any Backend and adds up the wall time and the calls of each kernel, so a
// training step can be broken down by kernel (run.profile = true, docs/running.md;
// perf/bench_step --breakdown). While measuring it waits for the device before and after every
// call, so each kernel is timed alone, launch included, and nothing queued before it is billed to
// it; steps run slower than without it. While not measuring (validation, checkpoints) calls pass
// through untimed and unsynchronised.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "kernels/forwarding_backend.h"

namespace trident::kernels {

struct KernelTime {
  double seconds = 0.0;
  int64_t calls = 0;
};

// Per operation ("matmul_forward 768->2304": matmuls carry their shape C->OC).
using KernelTimes = std::map<std::string, KernelTime>;

// The table of where `steps` steps went: per operation, slowest first, ms per step, share of the
// step and calls per step, then all kernels together and the rest of the step's wall time
// (step_seconds over the same steps: communication, host work, waiting). The first line is
// `title`.
std::string kernel_time_table(const KernelTimes& totals, int64_t steps, double step_seconds, const std::string& title);

class TimingBackend final : public ForwardingBackend {
 public:
  explicit TimingBackend(Backend& inner) : ForwardingBackend(inner) {}

  // Times the calls from now on, or (as at construction) passes them through untimed.
  void set_measuring(bool on) { measuring_ = on; }
  bool measuring() const { return measuring_; }
  // Since the last reset, over the calls made while measuring.
  const KernelTimes& totals() const { return totals_; }
  void reset() { totals_.clear(); }

  std::string name() const override { return inner().name(); }
  // Memory calls are forwarded untimed (ForwardingBackend); every kernel is timed.
  void fill_zero(ActPtr p, std::size_t n) override;
  void embedding_forward(ActPtr out, const int32_t* tokens, ConstActPtr wte, ConstActPtr wpe, int B, int T, int C,
                         int vocab_begin, int vocab_end) override;
  void embedding_backward(float* dwte, float* dwpe, ConstActPtr dout, const int32_t* tokens, int B, int T, int C,
                          int vocab_begin, int vocab_end) override;
  void matmul_forward(ActPtr out, ConstActPtr inp, ConstActPtr weight, ConstActPtr bias, int N, int C,
                      int OC) override;
  void matmul_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                       ConstActPtr weight, int N, int C, int OC) override;
  // The fused pairs go to the inner backend whole (it may fuse them: the CUDA backend's cuBLASLt
  // epilogues), timed as one call.
  void matmul_gelu_forward(ActPtr out, ActPtr pre, ConstActPtr inp, ConstActPtr weight, ConstActPtr bias, int N,
                           int C, int OC) override;
  void matmul_backward_through_gelu(ActPtr dpre, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                                    ConstActPtr weight, ConstActPtr pre, int N, int C, int OC) override;
  void layernorm_forward(ActPtr out, float* mean, float* rstd, ConstActPtr inp, ConstActPtr weight,
                         ConstActPtr bias, int N, int C) override;
  void residual_layernorm_forward(ActPtr residual, ActPtr out, float* mean, float* rstd, ConstActPtr a, ConstActPtr b,
                                  ConstActPtr weight, ConstActPtr bias, int N, int C) override;
  void layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                          ConstActPtr weight, const float* mean, const float* rstd, int N, int C) override;
  void gelu_forward(ActPtr out, ConstActPtr inp, std::size_t n) override;
  void gelu_backward(ActPtr dinp, ConstActPtr inp, ConstActPtr dout, std::size_t n) override;
  void attention_forward(ActPtr out, float* lse, float* scratch, ConstActPtr qkv, int B, int T, int C,
                         int NH) override;
  void attention_backward(ActPtr dqkv, float* scratch, ConstActPtr dout, ConstActPtr qkv, ConstActPtr out,
                          const float* lse, int B, int T, int C, int NH) override;
  void cross_entropy_forward(float* losses, float* row_max, float* row_sumexp, ConstActPtr logits,
                             const int32_t* targets, int N, int V, int Vp) override;
  void cross_entropy_backward(ActPtr dlogits, ConstActPtr logits, const int32_t* targets, float dloss, int N, int V,
                              int Vp) override;
  void cross_entropy_shard_statistics(float* stats, ConstActPtr logits, const int32_t* targets, int N, int V_local,
                                      int Vp_local, int vocab_begin) override;
  void cross_entropy_combine_shards(float* row_max, float* row_sumexp, float* target_logit, const float* gathered,
                                    int N, int shards) override;
  void cross_entropy_forward_backward(float* losses, float* row_max, float* row_sumexp, ActPtr dlogits,
                                      ConstActPtr logits, const int32_t* targets, float dloss, int N, int V,
                                      int Vp) override;
  void cross_entropy_backward_sharded(ActPtr dlogits, ConstActPtr logits, const int32_t* targets,
                                      const float* row_max, const float* row_sumexp, float dloss, int N, int V_local,
                                      int Vp_local, int vocab_begin) override;
  void add(ActPtr out, ConstActPtr a, ConstActPtr b, std::size_t n) override;
  void accumulate(float* dst, const float* src, std::size_t n) override;
  void scale(float* x, float factor, std::size_t n) override;
  double sum_squares(const float* x, std::size_t n) override;
  double sum_squares_of_ranges(const float* base, const ElementRange* ranges, std::size_t count) override;
  void round_to_precision(float* dst, const float* src, std::size_t n, Precision precision) override;
  void narrow(ActPtr dst, const float* src, std::size_t n) override;
  void widen(float* dst, ConstActPtr src, std::size_t n) override;
  void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n,
                    const AdamWArgs& args) override;
  void adamw_update_master(float* master, ActPtr compute, const float* grad, float* m, float* v, std::size_t n,
                           const AdamWArgs& args, Precision compute_precision) override;

 private:
  // Runs f, timed under `op` while measuring: the device drained first, so that only f's work
  // is between the two clock readings.
  template <class F>
  void timed(const std::string& op, F&& f) {
    if (!measuring_) {
      f();
      return;
    }
    inner().synchronize();
    const auto start = std::chrono::steady_clock::now();
    f();
    inner().synchronize();
    KernelTime& t = totals_[op];
    t.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++t.calls;
  }

  bool measuring_ = false;
  KernelTimes totals_;
};

}  // namespace trident::kernels
