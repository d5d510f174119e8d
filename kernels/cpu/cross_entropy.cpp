// Softmax + cross-entropy, fused, so the [N,Vp] probabilities are never stored:
//   loss_n = log(sum_v exp(l_v - m)) + m - l_target,  m = max_v l_v   (stable: exponents <= 0)
//   dl_v   = (exp(l_v - m) / sum - [v == target]) * dloss
// One row per task (rows are independent). The padded columns V..Vp are never read; backward
// writes them 0 so that the LM-head matmul backward sees no gradient there. The exponential
// sum is accumulated in double: V is ~50k terms and the loss is a small difference of large
// sums. Exponentials use exp_approx (vectorised, 2 ulp): glibc's scalar expf made these loops
// cost a third of the LM-head matmul.
//
// Cost: the logits (N x Vp, ~51 MB at GPT-2 shapes) do not fit in cache, but one row (~200 KB)
// fits in L2, so only the first pass over a row (the max) comes from memory. The backward
// computes each exponential once: the exp-and-sum pass stores exp(l_v - m) into dlogits, and a
// last pass scales it by dloss / sum. dlogits may alias logits: every pass reads and writes
// the same index, and the logit is read before it is overwritten. The row functions are
// compiled per ISA (simd_dispatch.h); at AVX-512 width the exponentials cost ~4x less.
#include "kernels/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "kernels/cpu/simd_dispatch.h"  // TRIDENT_SIMD_CLONES
#include "kernels/cpu/vector_math.h"    // exp_approx, max_of

namespace trident::kernels::cpu {

namespace {

// sum_v exp(row[v] - row_max), v < V, in double.
TRIDENT_SIMD_CLONES
double exp_sum(const float* row, float row_max, int V) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int v = 0; v < V; v++) sum += static_cast<double>(exp_approx(row[v] - row_max));
  return sum;
}

// Writes out[v] = exp(row[v] - row_max) for v < V (out may alias row) and returns their sum,
// in double.
TRIDENT_SIMD_CLONES
double exp_store_sum(float* out, const float* row, float row_max, int V) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int v = 0; v < V; v++) {
    const float e = exp_approx(row[v] - row_max);
    out[v] = e;
    sum += static_cast<double>(e);
  }
  return sum;
}

TRIDENT_SIMD_CLONES
float row_max_of(const float* row, int V) { return max_of(row, V); }

TRIDENT_SIMD_CLONES
void scale_row(float* row, float factor, int V) {
#pragma omp simd
  for (int v = 0; v < V; v++) row[v] *= factor;
}

}  // namespace

void cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int N,
                           int V, int Vp) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float* row = logits + static_cast<std::size_t>(n) * Vp;
    const float row_max = row_max_of(row, V);
    const double sum = exp_sum(row, row_max, V);
    const double loss =
        std::log(sum) + static_cast<double>(row_max) - static_cast<double>(row[targets[n]]);
    losses[n] = static_cast<float>(loss);
  }
}

void cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets,
                            float dloss, int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float* row = logits + static_cast<std::size_t>(n) * Vp;
    float* drow = dlogits + static_cast<std::size_t>(n) * Vp;
    const float row_max = row_max_of(row, V);
    const double sum = exp_store_sum(drow, row, row_max, V);
    scale_row(drow, static_cast<float>(static_cast<double>(dloss) / sum), V);
    drow[targets[n]] -= dloss;
    std::fill(drow + V, drow + Vp, 0.0f);
  }
}

}  // namespace trident::kernels::cpu
