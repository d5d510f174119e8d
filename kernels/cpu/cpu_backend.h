// CpuBackend: the reference implementation of kernels::Backend on host memory.
// Each method forwards to the free function of its operation (kernels/cpu/<op>.h); this class
// only owns the thread budget.
#pragma once

#include "kernels/backend.h"

namespace trident::kernels::cpu {

class CpuBackend final : public Backend {
 public:
  // threads > 0: OpenMP and OpenBLAS threads used by this rank (set process-wide).
  explicit CpuBackend(int threads);
  int threads() const { return threads_; }

  Device device() const override { return Device::kCpu; }
  std::string name() const override;

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
  void synchronize() override {}

  void embedding_forward(ActPtr out, const int32_t* tokens, ConstActPtr wte, ConstActPtr wpe,
                         int B, int T, int C, int vocab_begin, int vocab_end) override;
  void embedding_backward(float* dwte, float* dwpe, ConstActPtr dout, const int32_t* tokens,
                          int B, int T, int C, int vocab_begin, int vocab_end) override;

  void matmul_forward(ActPtr out, ConstActPtr inp, ConstActPtr weight, ConstActPtr bias, int N,
                      int C, int OC) override;
  void matmul_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout,
                       ConstActPtr inp, ConstActPtr weight, int N, int C, int OC) override;

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
  // Does not read out: the row sum comes from P and dP (kernels/cpu/attention.cpp says why).
  void attention_backward(ActPtr dqkv, float* scratch, ConstActPtr dout, ConstActPtr qkv,
                          ConstActPtr out, const float* lse, int B, int T, int C,
                          int NH) override;
  std::size_t attention_scratch_size(int B, int T, int NH) const override;

  void cross_entropy_forward(float* losses, float* row_max, float* row_sumexp, ConstActPtr logits,
                             const int32_t* targets, int N, int V, int Vp) override;
  void cross_entropy_backward(ActPtr dlogits, ConstActPtr logits, const int32_t* targets,
                              float dloss, int N, int V, int Vp) override;
  void cross_entropy_shard_statistics(float* stats, ConstActPtr logits, const int32_t* targets, int N,
                                      int V_local, int Vp_local, int vocab_begin) override;
  void cross_entropy_combine_shards(float* row_max, float* row_sumexp, float* target_logit,
                                    const float* gathered, int N, int shards) override;
  void cross_entropy_backward_sharded(ActPtr dlogits, ConstActPtr logits, const int32_t* targets,
                                      const float* row_max, const float* row_sumexp, float dloss,
                                      int N, int V_local, int Vp_local, int vocab_begin) override;

  void add(ActPtr out, ConstActPtr a, ConstActPtr b, std::size_t n) override;
  void accumulate(float* dst, const float* src, std::size_t n) override;
  void scale(float* x, float factor, std::size_t n) override;
  double sum_squares(const float* x, std::size_t n) override;
  void round_to_precision(float* dst, const float* src, std::size_t n, Precision precision) override;
  void narrow(ActPtr dst, const float* src, std::size_t n) override;
  void widen(float* dst, ConstActPtr src, std::size_t n) override;

  void adamw_update_master(float* master, ActPtr compute, const float* grad, float* m, float* v, std::size_t n,
                           const AdamWArgs& args, Precision compute_precision) override;
  void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n,
                    const AdamWArgs& args) override;

 private:
  int threads_;  // OpenMP and OpenBLAS worker threads
};

}  // namespace trident::kernels::cpu
