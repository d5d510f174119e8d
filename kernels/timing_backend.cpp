#include "kernels/timing_backend.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace trident::kernels {

namespace {

// A matmul's key: its name and shape, C->OC (the forward's input and output widths), so that
// the block's four products and the LM head are told apart.
std::string with_shape(const char* op, int C, int OC) {
  return std::string(op) + " " + std::to_string(C) + "->" + std::to_string(OC);
}

}  // namespace

std::string kernel_time_table(const KernelTimes& totals, int64_t steps, double step_seconds, const std::string& title) {
  const double n = static_cast<double>(std::max<int64_t>(steps, 1));
  std::vector<std::pair<std::string, KernelTime>> rows(totals.begin(), totals.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  const double step_ms = 1e3 * step_seconds / n;
  const auto share = [&](double ms) { return step_ms > 0.0 ? 100.0 * ms / step_ms : 0.0; };
  std::string out = title + "\n";
  char line[200];
  std::snprintf(line, sizeof line, "  %-44s %10s %7s %10s\n", "kernel", "ms/step", "share", "calls/step");
  out += line;
  double kernels_ms = 0.0;
  for (const auto& [op, t] : rows) {
    const double ms = 1e3 * t.seconds / n;
    kernels_ms += ms;
    std::snprintf(line, sizeof line, "  %-44s %10.3f %6.1f%% %10.1f\n", op.c_str(), ms, share(ms),
                  static_cast<double>(t.calls) / n);
    out += line;
  }
  std::snprintf(line, sizeof line, "  %-44s %10.3f %6.1f%%\n", "all kernels", kernels_ms, share(kernels_ms));
  out += line;
  const double rest_ms = std::max(step_ms - kernels_ms, 0.0);
  std::snprintf(line, sizeof line, "  %-44s %10.3f %6.1f%%\n", "outside the kernels (communication, host)",
                rest_ms, share(rest_ms));
  out += line;
  std::snprintf(line, sizeof line, "  %-44s %10.3f\n", "step (wall time)", step_ms);
  return out + line;
}

void TimingBackend::fill_zero(ActPtr p, std::size_t n) {
  timed("fill_zero", [&] { inner().fill_zero(p, n); });
}
void TimingBackend::embedding_forward(ActPtr out, const int32_t* tokens, ConstActPtr wte, ConstActPtr wpe, int B,
                                      int T, int C, int vocab_begin, int vocab_end) {
  timed("embedding_forward", [&] { inner().embedding_forward(out, tokens, wte, wpe, B, T, C, vocab_begin, vocab_end); });
}
void TimingBackend::embedding_backward(float* dwte, float* dwpe, ConstActPtr dout, const int32_t* tokens, int B,
                                       int T, int C, int vocab_begin, int vocab_end) {
  timed("embedding_backward",
        [&] { inner().embedding_backward(dwte, dwpe, dout, tokens, B, T, C, vocab_begin, vocab_end); });
}
void TimingBackend::matmul_forward(ActPtr out, ConstActPtr inp, ConstActPtr weight, ConstActPtr bias, int N, int C,
                                   int OC) {
  timed(with_shape("matmul_forward", C, OC), [&] { inner().matmul_forward(out, inp, weight, bias, N, C, OC); });
}
void TimingBackend::matmul_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                                    ConstActPtr weight, int N, int C, int OC) {
  timed(with_shape("matmul_backward", C, OC),
        [&] { inner().matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC); });
}
void TimingBackend::matmul_gelu_forward(ActPtr out, ActPtr pre, ConstActPtr inp, ConstActPtr weight,
                                        ConstActPtr bias, int N, int C, int OC) {
  timed(with_shape("matmul_gelu_forward", C, OC),
        [&] { inner().matmul_gelu_forward(out, pre, inp, weight, bias, N, C, OC); });
}
void TimingBackend::matmul_backward_through_gelu(ActPtr dpre, float* dweight, float* dbias, ConstActPtr dout,
                                                 ConstActPtr inp, ConstActPtr weight, ConstActPtr pre, int N, int C,
                                                 int OC) {
  timed(with_shape("matmul_backward_through_gelu", C, OC),
        [&] { inner().matmul_backward_through_gelu(dpre, dweight, dbias, dout, inp, weight, pre, N, C, OC); });
}
void TimingBackend::layernorm_forward(ActPtr out, float* mean, float* rstd, ConstActPtr inp, ConstActPtr weight,
                                      ConstActPtr bias, int N, int C) {
  timed("layernorm_forward", [&] { inner().layernorm_forward(out, mean, rstd, inp, weight, bias, N, C); });
}
void TimingBackend::residual_layernorm_forward(ActPtr residual, ActPtr out, float* mean, float* rstd, ConstActPtr a,
                                               ConstActPtr b, ConstActPtr weight, ConstActPtr bias, int N, int C) {
  timed("residual_layernorm_forward",
        [&] { inner().residual_layernorm_forward(residual, out, mean, rstd, a, b, weight, bias, N, C); });
}
void TimingBackend::layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                                       ConstActPtr weight, const float* mean, const float* rstd, int N, int C) {
  timed("layernorm_backward",
        [&] { inner().layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C); });
}
void TimingBackend::gelu_forward(ActPtr out, ConstActPtr inp, std::size_t n) {
  timed("gelu_forward", [&] { inner().gelu_forward(out, inp, n); });
}
void TimingBackend::gelu_backward(ActPtr dinp, ConstActPtr inp, ConstActPtr dout, std::size_t n) {
  timed("gelu_backward", [&] { inner().gelu_backward(dinp, inp, dout, n); });
}
void TimingBackend::attention_forward(ActPtr out, float* lse, float* scratch, ConstActPtr qkv, int B, int T, int C,
                                      int NH) {
  timed("attention_forward", [&] { inner().attention_forward(out, lse, scratch, qkv, B, T, C, NH); });
}
void TimingBackend::attention_backward(ActPtr dqkv, float* scratch, ConstActPtr dout, ConstActPtr qkv,
                                       ConstActPtr out, const float* lse, int B, int T, int C, int NH) {
  timed("attention_backward",
        [&] { inner().attention_backward(dqkv, scratch, dout, qkv, out, lse, B, T, C, NH); });
}
void TimingBackend::cross_entropy_forward(float* losses, float* row_max, float* row_sumexp, ConstActPtr logits,
                                          const int32_t* targets, int N, int V, int Vp) {
  timed("cross_entropy_forward",
        [&] { inner().cross_entropy_forward(losses, row_max, row_sumexp, logits, targets, N, V, Vp); });
}
void TimingBackend::cross_entropy_backward(ActPtr dlogits, ConstActPtr logits, const int32_t* targets, float dloss,
                                           int N, int V, int Vp) {
  timed("cross_entropy_backward",
        [&] { inner().cross_entropy_backward(dlogits, logits, targets, dloss, N, V, Vp); });
}
void TimingBackend::cross_entropy_forward_backward(float* losses, float* row_max, float* row_sumexp,
                                                   ActPtr dlogits, ConstActPtr logits, const int32_t* targets,
                                                   float dloss, int N, int V, int Vp) {
  timed("cross_entropy_forward_backward", [&] {
    inner().cross_entropy_forward_backward(losses, row_max, row_sumexp, dlogits, logits, targets, dloss, N, V, Vp);
  });
}
void TimingBackend::cross_entropy_shard_statistics(float* stats, ConstActPtr logits, const int32_t* targets, int N,
                                                   int V_local, int Vp_local, int vocab_begin) {
  timed("cross_entropy_shard_statistics",
        [&] { inner().cross_entropy_shard_statistics(stats, logits, targets, N, V_local, Vp_local, vocab_begin); });
}
void TimingBackend::cross_entropy_combine_shards(float* row_max, float* row_sumexp, float* target_logit,
                                                 const float* gathered, int N, int shards) {
  timed("cross_entropy_combine_shards",
        [&] { inner().cross_entropy_combine_shards(row_max, row_sumexp, target_logit, gathered, N, shards); });
}
void TimingBackend::cross_entropy_backward_sharded(ActPtr dlogits, ConstActPtr logits, const int32_t* targets,
                                                   const float* row_max, const float* row_sumexp, float dloss, int N,
                                                   int V_local, int Vp_local, int vocab_begin) {
  timed("cross_entropy_backward_sharded", [&] {
    inner().cross_entropy_backward_sharded(dlogits, logits, targets, row_max, row_sumexp, dloss, N, V_local,
                                           Vp_local, vocab_begin);
  });
}
void TimingBackend::add(ActPtr out, ConstActPtr a, ConstActPtr b, std::size_t n) {
  timed("add", [&] { inner().add(out, a, b, n); });
}
void TimingBackend::accumulate(float* dst, const float* src, std::size_t n) {
  timed("accumulate", [&] { inner().accumulate(dst, src, n); });
}
void TimingBackend::scale(float* x, float factor, std::size_t n) {
  timed("scale", [&] { inner().scale(x, factor, n); });
}
double TimingBackend::sum_squares(const float* x, std::size_t n) {
  double r = 0.0;
  timed("sum_squares", [&] { r = inner().sum_squares(x, n); });
  return r;
}
double TimingBackend::sum_squares_of_ranges(const float* base, const ElementRange* ranges, std::size_t count) {
  double r = 0.0;
  timed("sum_squares", [&] { r = inner().sum_squares_of_ranges(base, ranges, count); });
  return r;
}
void TimingBackend::round_to_precision(float* dst, const float* src, std::size_t n, Precision precision) {
  timed("round_to_precision", [&] { inner().round_to_precision(dst, src, n, precision); });
}
void TimingBackend::narrow(ActPtr dst, const float* src, std::size_t n) {
  timed("narrow", [&] { inner().narrow(dst, src, n); });
}
void TimingBackend::widen(float* dst, ConstActPtr src, std::size_t n) {
  timed("widen", [&] { inner().widen(dst, src, n); });
}
void TimingBackend::adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n,
                                 const AdamWArgs& args) {
  timed("adamw_update", [&] { inner().adamw_update(param, grad, m, v, n, args); });
}
void TimingBackend::adamw_update_master(float* master, ActPtr compute, const float* grad, float* m, float* v,
                                        std::size_t n, const AdamWArgs& args, Precision compute_precision) {
  timed("adamw_update_master",
        [&] { inner().adamw_update_master(master, compute, grad, m, v, n, args, compute_precision); });
}

}  // namespace trident::kernels
