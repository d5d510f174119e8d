// Softmax + cross-entropy, fused, so the [N,Vp] probabilities are never stored:
//   loss_n = log(sum_v exp(l_v - m)) + m - l_target,  m = max_v l_v   (stable: exponents <= 0)
//   dl_v   = (exp(l_v - m) / sum - [v == target]) * dloss
// One row per task (rows are independent). Backward recomputes m and the sum from the logits
// before it writes the row, so dlogits may alias logits (each element is read before it is
// overwritten, at the same index). The padded columns V..Vp are never read; backward writes
// them 0 so that the LM-head matmul backward sees no gradient there. The exponential sum is
// accumulated in double: V is ~50k terms and the loss is a small difference of large sums.
// Exponentials use exp_approx (vectorised, 2 ulp): glibc's scalar expf made these loops cost
// a third of the LM-head matmul.
#include "kernels/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "kernels/cpu/vector_math.h"  // exp_approx, max_of

namespace trident::kernels::cpu {

namespace {

struct RowStats {
  float max;
  double sum;  // sum_v exp(l_v - max)
};

RowStats row_stats(const float* row, int V) {
  const float m = max_of(row, V);
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int v = 0; v < V; v++) sum += static_cast<double>(exp_approx(row[v] - m));
  return {m, sum};
}

}  // namespace

void cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int N,
                           int V, int Vp) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float* row = logits + static_cast<std::size_t>(n) * Vp;
    const RowStats stats = row_stats(row, V);
    const double loss = std::log(stats.sum) + static_cast<double>(stats.max) -
                        static_cast<double>(row[targets[n]]);
    losses[n] = static_cast<float>(loss);
  }
}

void cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets,
                            float dloss, int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float* row = logits + static_cast<std::size_t>(n) * Vp;
    float* drow = dlogits + static_cast<std::size_t>(n) * Vp;
    const RowStats stats = row_stats(row, V);
    const float factor = static_cast<float>(static_cast<double>(dloss) / stats.sum);
    const int target = targets[n];
    const float row_max = stats.max;
#pragma omp simd
    for (int v = 0; v < V; v++) drow[v] = exp_approx(row[v] - row_max) * factor;
    drow[target] -= dloss;
    std::fill(drow + V, drow + Vp, 0.0f);
  }
}

}  // namespace trident::kernels::cpu
