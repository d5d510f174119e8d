// TimingBackend: wraps any kernels::Backend and adds up the wall time of each operation, so a
// training step can be broken down by kernel (perf/bench_step --breakdown). Synchronises after
// every call, so on an asynchronous device it measures each kernel alone.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "kernels/forwarding_backend.h"

namespace trident::perf {

class TimingBackend final : public kernels::ForwardingBackend {
 public:
  explicit TimingBackend(kernels::Backend& inner) : ForwardingBackend(inner), inner_(inner) {}
  const std::map<std::string, double>& seconds() const { return seconds_; }
  void reset() { seconds_.clear(); }

  // Memory calls are forwarded untimed (ForwardingBackend); every kernel is timed.
  std::string name() const override { return "timed " + inner_.name(); }
  void fill_zero(kernels::ActPtr p, std::size_t n) override { timed("fill_zero", [&] { inner_.fill_zero(p, n); }); }
  void embedding_forward(kernels::ActPtr o, const int32_t* t, kernels::ConstActPtr wte, kernels::ConstActPtr wpe, int B, int T, int C,
                         int vb, int ve) override {
    timed("embedding_forward", [&] { inner_.embedding_forward(o, t, wte, wpe, B, T, C, vb, ve); });
  }
  void embedding_backward(float* dwte, float* dwpe, kernels::ConstActPtr d, const int32_t* t, int B, int T, int C, int vb,
                          int ve) override {
    timed("embedding_backward", [&] { inner_.embedding_backward(dwte, dwpe, d, t, B, T, C, vb, ve); });
  }
  void matmul_forward(kernels::ActPtr o, kernels::ConstActPtr i, kernels::ConstActPtr w, kernels::ConstActPtr b, int N, int C, int OC) override {
    timed("matmul_forward " + shape(C, OC), [&] { inner_.matmul_forward(o, i, w, b, N, C, OC); });
  }
  void matmul_backward(kernels::ActPtr di, float* dw, float* db, kernels::ConstActPtr d, kernels::ConstActPtr i, kernels::ConstActPtr w, int N, int C,
                       int OC) override {
    timed("matmul_backward " + shape(C, OC), [&] { inner_.matmul_backward(di, dw, db, d, i, w, N, C, OC); });
  }
  void layernorm_forward(kernels::ActPtr o, float* m, float* r, kernels::ConstActPtr i, kernels::ConstActPtr w, kernels::ConstActPtr b, int N,
                         int C) override {
    timed("layernorm_forward", [&] { inner_.layernorm_forward(o, m, r, i, w, b, N, C); });
  }
  void residual_layernorm_forward(kernels::ActPtr res, kernels::ActPtr o, float* m, float* r, kernels::ConstActPtr a, kernels::ConstActPtr b,
                                  kernels::ConstActPtr w, kernels::ConstActPtr bias, int N, int C) override {
    timed("residual_layernorm_forward", [&] { inner_.residual_layernorm_forward(res, o, m, r, a, b, w, bias, N, C); });
  }
  void layernorm_backward(kernels::ActPtr di, float* dw, float* db, kernels::ConstActPtr d, kernels::ConstActPtr i, kernels::ConstActPtr w,
                          const float* m, const float* r, int N, int C) override {
    timed("layernorm_backward", [&] { inner_.layernorm_backward(di, dw, db, d, i, w, m, r, N, C); });
  }
  void gelu_forward(kernels::ActPtr o, kernels::ConstActPtr i, std::size_t n) override {
    timed("gelu_forward", [&] { inner_.gelu_forward(o, i, n); });
  }
  void gelu_backward(kernels::ActPtr di, kernels::ConstActPtr i, kernels::ConstActPtr d, std::size_t n) override {
    timed("gelu_backward", [&] { inner_.gelu_backward(di, i, d, n); });
  }
  void attention_forward(kernels::ActPtr o, float* lse, float* s, kernels::ConstActPtr qkv, int B, int T, int C, int NH) override {
    timed("attention_forward", [&] { inner_.attention_forward(o, lse, s, qkv, B, T, C, NH); });
  }
  void attention_backward(kernels::ActPtr dqkv, float* s, kernels::ConstActPtr d, kernels::ConstActPtr qkv, kernels::ConstActPtr o, const float* lse,
                          int B, int T, int C, int NH) override {
    timed("attention_backward", [&] { inner_.attention_backward(dqkv, s, d, qkv, o, lse, B, T, C, NH); });
  }
  void cross_entropy_forward(float* l, float* m, float* se, kernels::ConstActPtr lg, const int32_t* t, int N, int V,
                             int Vp) override {
    timed("cross_entropy_forward", [&] { inner_.cross_entropy_forward(l, m, se, lg, t, N, V, Vp); });
  }
  void cross_entropy_backward(kernels::ActPtr d, kernels::ConstActPtr lg, const int32_t* t, float s, int N, int V, int Vp) override {
    timed("cross_entropy_backward", [&] { inner_.cross_entropy_backward(d, lg, t, s, N, V, Vp); });
  }
  void cross_entropy_shard_statistics(float* st, kernels::ConstActPtr lg, const int32_t* t, int N, int V, int Vp,
                                      int vb) override {
    timed("cross_entropy_shard_statistics", [&] { inner_.cross_entropy_shard_statistics(st, lg, t, N, V, Vp, vb); });
  }
  void cross_entropy_combine_shards(float* m, float* s, float* tl, const float* g, int N, int shards) override {
    timed("cross_entropy_combine_shards", [&] { inner_.cross_entropy_combine_shards(m, s, tl, g, N, shards); });
  }
  void cross_entropy_backward_sharded(kernels::ActPtr d, kernels::ConstActPtr lg, const int32_t* t, const float* m, const float* s,
                                      float dl, int N, int V, int Vp, int vb) override {
    timed("cross_entropy_backward_sharded",
          [&] { inner_.cross_entropy_backward_sharded(d, lg, t, m, s, dl, N, V, Vp, vb); });
  }
  void add(kernels::ActPtr o, kernels::ConstActPtr a, kernels::ConstActPtr b, std::size_t n) override {
    timed("add", [&] { inner_.add(o, a, b, n); });
  }
  void accumulate(float* d, const float* s, std::size_t n) override {
    timed("accumulate", [&] { inner_.accumulate(d, s, n); });
  }
  void scale(float* x, float f, std::size_t n) override { timed("scale", [&] { inner_.scale(x, f, n); }); }
  double sum_squares(const float* x, std::size_t n) override {
    double r = 0;
    timed("sum_squares", [&] { r = inner_.sum_squares(x, n); });
    return r;
  }
  double sum_squares_of_ranges(const float* base, const kernels::ElementRange* ranges, std::size_t count) override {
    double r = 0;
    timed("sum_squares", [&] { r = inner_.sum_squares_of_ranges(base, ranges, count); });
    return r;
  }
  void round_to_precision(float* d, const float* s, std::size_t n, kernels::Precision p) override {
    timed("round_to_precision", [&] { inner_.round_to_precision(d, s, n, p); });
  }
  void narrow(kernels::ActPtr d, const float* s, std::size_t n) override {
    timed("narrow", [&] { inner_.narrow(d, s, n); });
  }
  void widen(float* d, kernels::ConstActPtr s, std::size_t n) override {
    timed("widen", [&] { inner_.widen(d, s, n); });
  }
  void adamw_update(float* p, const float* g, float* m, float* v, std::size_t n,
                    const kernels::AdamWArgs& a) override {
    timed("adamw_update", [&] { inner_.adamw_update(p, g, m, v, n, a); });
  }
  void adamw_update_master(float* master, kernels::ActPtr c, const float* g, float* m, float* v, std::size_t n,
                           const kernels::AdamWArgs& a, kernels::Precision p) override {
    timed("adamw_update_master", [&] { inner_.adamw_update_master(master, c, g, m, v, n, a, p); });
  }

 private:
  static std::string shape(int C, int OC) { return std::to_string(C) + "->" + std::to_string(OC); }
  template <typename F>
  void timed(const std::string& op, F&& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    inner_.synchronize();
    seconds_[op] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  kernels::Backend& inner_;
  std::map<std::string, double> seconds_;
};

}  // namespace trident::perf
