// ForwardingBackend: a Backend that passes every call to another one. Decorators derive from it
// and override only what they change (kernels/rounded_storage_backend.h rounds stored outputs,
// kernels/timing_backend.h times each kernel). The exception are the fused pairs
// (matmul_gelu_forward, matmul_backward_through_gelu, cross_entropy_forward_backward): they run
// as their two parts on this object (Backend's defaults), so a decorator that changes a part
// changes the pair too, and one that can pass the pair on whole (the rounding decorator, for
// native 16-bit calls) says so.
#pragma once

#include <string>

#include "kernels/backend.h"

namespace trident::kernels {

class ForwardingBackend : public Backend {
 public:
  // inner must outlive this.
  explicit ForwardingBackend(Backend& inner) : inner_(inner) {}

  Device device() const override { return inner_.device(); }
  std::string name() const override { return inner_.name(); }
  float* allocate(std::size_t n) override { return inner_.allocate(n); }
  void release(float* p) override { inner_.release(p); }
  void fill_zero(ActPtr p, std::size_t n) override { inner_.fill_zero(p, n); }
  void copy_to_device(float* d, const float* s, std::size_t n) override { inner_.copy_to_device(d, s, n); }
  void copy_to_host(float* d, const float* s, std::size_t n) override { inner_.copy_to_host(d, s, n); }
  void copy_bytes_to_device(void* d, const void* s, std::size_t n) override { inner_.copy_bytes_to_device(d, s, n); }
  void copy_bytes_to_host(void* d, const void* s, std::size_t n) override { inner_.copy_bytes_to_host(d, s, n); }
  int32_t* allocate_tokens(std::size_t n) override { return inner_.allocate_tokens(n); }
  void release_tokens(int32_t* p) override { inner_.release_tokens(p); }
  void copy_tokens_to_device(int32_t* d, const int32_t* s, std::size_t n) override {
    inner_.copy_tokens_to_device(d, s, n);
  }
  void synchronize() override { inner_.synchronize(); }
  bool is_device_memory(const void* p) const override { return inner_.is_device_memory(p); }
  void* device_stream() const override { return inner_.device_stream(); }
  std::size_t device_bytes_high_water() const override { return inner_.device_bytes_high_water(); }
  std::string matmul_algorithm_report() const override { return inner_.matmul_algorithm_report(); }
  std::string matmul_algorithm_choices() const override { return inner_.matmul_algorithm_choices(); }
  bool adopt_matmul_algorithm_choices(const std::string& table) override {
    return inner_.adopt_matmul_algorithm_choices(table);
  }
  void set_gemm_input_precision(Precision inputs) override { inner_.set_gemm_input_precision(inputs); }
  Native16BitKernels native_16bit() const override { return inner_.native_16bit(); }

  void embedding_forward(ActPtr out, const int32_t* tokens, ConstActPtr wte, ConstActPtr wpe, int B, int T, int C,
                         int vocab_begin, int vocab_end) override {
    inner_.embedding_forward(out, tokens, wte, wpe, B, T, C, vocab_begin, vocab_end);
  }
  void embedding_backward(float* dwte, float* dwpe, ConstActPtr dout, const int32_t* tokens, int B, int T, int C,
                          int vocab_begin, int vocab_end) override {
    inner_.embedding_backward(dwte, dwpe, dout, tokens, B, T, C, vocab_begin, vocab_end);
  }
  void matmul_forward(ActPtr out, ConstActPtr inp, ConstActPtr weight, ConstActPtr bias, int N, int C,
                      int OC) override {
    inner_.matmul_forward(out, inp, weight, bias, N, C, OC);
  }
  void matmul_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                       ConstActPtr weight, int N, int C, int OC) override {
    inner_.matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  }
  void layernorm_forward(ActPtr out, float* mean, float* rstd, ConstActPtr inp, ConstActPtr weight,
                         ConstActPtr bias, int N, int C) override {
    inner_.layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
  }
  void residual_layernorm_forward(ActPtr residual, ActPtr out, float* mean, float* rstd, ConstActPtr a, ConstActPtr b,
                                  ConstActPtr weight, ConstActPtr bias, int N, int C) override {
    inner_.residual_layernorm_forward(residual, out, mean, rstd, a, b, weight, bias, N, C);
  }
  void layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                          ConstActPtr weight, const float* mean, const float* rstd, int N, int C) override {
    inner_.layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  }
  void gelu_forward(ActPtr out, ConstActPtr inp, std::size_t n) override { inner_.gelu_forward(out, inp, n); }
  void gelu_backward(ActPtr dinp, ConstActPtr inp, ConstActPtr dout, std::size_t n) override {
    inner_.gelu_backward(dinp, inp, dout, n);
  }
  void attention_forward(ActPtr out, float* lse, float* scratch, ConstActPtr qkv, int B, int T, int C,
                         int NH) override {
    inner_.attention_forward(out, lse, scratch, qkv, B, T, C, NH);
  }
  void attention_backward(ActPtr dqkv, float* scratch, ConstActPtr dout, ConstActPtr qkv, ConstActPtr out,
                          const float* lse, int B, int T, int C, int NH) override {
    inner_.attention_backward(dqkv, scratch, dout, qkv, out, lse, B, T, C, NH);
  }
  std::size_t attention_scratch_size(int B, int T, int NH) const override {
    return inner_.attention_scratch_size(B, T, NH);
  }
  void cross_entropy_forward(float* losses, float* row_max, float* row_sumexp, ConstActPtr logits,
                             const int32_t* targets, int N, int V, int Vp) override {
    inner_.cross_entropy_forward(losses, row_max, row_sumexp, logits, targets, N, V, Vp);
  }
  void cross_entropy_backward(ActPtr dlogits, ConstActPtr logits, const int32_t* targets, float dloss, int N, int V,
                              int Vp) override {
    inner_.cross_entropy_backward(dlogits, logits, targets, dloss, N, V, Vp);
  }
  void cross_entropy_shard_statistics(float* stats, ConstActPtr logits, const int32_t* targets, int N, int V_local,
                                      int Vp_local, int vocab_begin) override {
    inner_.cross_entropy_shard_statistics(stats, logits, targets, N, V_local, Vp_local, vocab_begin);
  }
  void cross_entropy_combine_shards(float* row_max, float* row_sumexp, float* target_logit, const float* gathered,
                                    int N, int shards) override {
    inner_.cross_entropy_combine_shards(row_max, row_sumexp, target_logit, gathered, N, shards);
  }
  void cross_entropy_backward_sharded(ActPtr dlogits, ConstActPtr logits, const int32_t* targets,
                                      const float* row_max, const float* row_sumexp, float dloss, int N, int V_local,
                                      int Vp_local, int vocab_begin) override {
    inner_.cross_entropy_backward_sharded(dlogits, logits, targets, row_max, row_sumexp, dloss, N, V_local, Vp_local,
                                          vocab_begin);
  }
  void add(ActPtr out, ConstActPtr a, ConstActPtr b, std::size_t n) override { inner_.add(out, a, b, n); }
  void accumulate(float* dst, const float* src, std::size_t n) override { inner_.accumulate(dst, src, n); }
  void scale(float* x, float factor, std::size_t n) override { inner_.scale(x, factor, n); }
  double sum_squares(const float* x, std::size_t n) override { return inner_.sum_squares(x, n); }
  double sum_squares_of_ranges(const float* base, const ElementRange* ranges, std::size_t count) override {
    return inner_.sum_squares_of_ranges(base, ranges, count);
  }
  void round_to_precision(float* dst, const float* src, std::size_t n, Precision precision) override {
    inner_.round_to_precision(dst, src, n, precision);
  }
  void narrow(ActPtr dst, const float* src, std::size_t n) override { inner_.narrow(dst, src, n); }
  void widen(float* dst, ConstActPtr src, std::size_t n) override { inner_.widen(dst, src, n); }
  void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n,
                    const AdamWArgs& args) override {
    inner_.adamw_update(param, grad, m, v, n, args);
  }
  void adamw_update_master(float* master, ActPtr compute, const float* grad, float* m, float* v, std::size_t n,
                           const AdamWArgs& args, Precision compute_precision) override {
    inner_.adamw_update_master(master, compute, grad, m, v, n, args, compute_precision);
  }

 protected:
  Backend& inner() { return inner_; }
  const Backend& inner() const { return inner_; }

 private:
  Backend& inner_;
};

}  // namespace trident::kernels
