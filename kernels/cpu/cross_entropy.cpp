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
//
// Sharded (vocabulary-parallel) pieces: the same row functions over a rank's V_local real
// columns. Each rank sums exp(l - its own max) (exponents <= 0 as in the fused kernel) in
// double and hands it over as a float (relative error 6e-8, well below the loss's own float
// rounding) with that max; the combination rescales each shard's sum to the row's max with one
// exp per shard. The backward knows the row's max and sum up front, so it writes each gradient
// in one pass: exp(l - max) * (dloss / sum), then the target's -dloss.
// The model runs that backward without tensor parallelism too, on the statistics the fused
// forward hands out (row_max, row_sumexp), so its backward is that one pass.
#include "kernels/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

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

// out[v] = exp(row[v] - row_max) * factor for v < V (out may alias row).
TRIDENT_SIMD_CLONES
void exp_scale_row(float* out, const float* row, float row_max, float factor, int V) {
#pragma omp simd
  for (int v = 0; v < V; v++) out[v] = exp_approx(row[v] - row_max) * factor;
}

// The local column of a global target id, or -1 when it is not a real column of this shard.
int local_target(int32_t target, int vocab_begin, int V_local) {
  const int local = target - vocab_begin;
  return local >= 0 && local < V_local ? local : -1;
}

}  // namespace

void cross_entropy_forward(float* losses, float* row_max, float* row_sumexp, const float* logits,
                           const int32_t* targets, int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float* row = logits + static_cast<std::size_t>(n) * Vp;
    const float max = row_max_of(row, V);
    const double sum = exp_sum(row, max, V);
    const double loss =
        std::log(sum) + static_cast<double>(max) - static_cast<double>(row[targets[n]]);
    losses[n] = static_cast<float>(loss);
    if (row_max != nullptr) {
      row_max[n] = max;
      row_sumexp[n] = static_cast<float>(sum);
    }
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

void cross_entropy_shard_statistics(float* stats, const float* logits, const int32_t* targets, int N,
                                    int V_local, int Vp_local, int vocab_begin) {
  const int real = std::max(V_local, 0);
  const auto rows = static_cast<std::size_t>(N);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float* row = logits + static_cast<std::size_t>(n) * Vp_local;
    const auto i = static_cast<std::size_t>(n);
    const float max = real > 0 ? row_max_of(row, real) : -std::numeric_limits<float>::infinity();
    stats[i] = max;
    stats[rows + i] = real > 0 ? static_cast<float>(exp_sum(row, max, real)) : 0.0f;
    const int t = local_target(targets[n], vocab_begin, real);
    stats[2 * rows + i] = t >= 0 ? row[t] : 0.0f;
  }
}

void cross_entropy_combine_shards(float* row_max, float* row_sumexp, float* target_logit, const float* gathered,
                                  int N, int shards) {
  const auto rows = static_cast<std::size_t>(N);
  for (std::size_t n = 0; n < rows; n++) {
    float max = -std::numeric_limits<float>::infinity();
    for (int r = 0; r < shards; r++) max = std::max(max, gathered[static_cast<std::size_t>(r) * 3 * rows + n]);
    double sum = 0.0, target = 0.0;
    for (int r = 0; r < shards; r++) {
      const float* block = gathered + static_cast<std::size_t>(r) * 3 * rows;
      // A shard without real columns (max -infinity) adds nothing; exp(-inf - max) would too,
      // but not when every shard's max is -infinity.
      if (block[n] != -std::numeric_limits<float>::infinity()) {
        sum += static_cast<double>(block[rows + n]) * std::exp(static_cast<double>(block[n]) - max);
      }
      target += block[2 * rows + n];
    }
    row_max[n] = max;
    row_sumexp[n] = static_cast<float>(sum);
    target_logit[n] = static_cast<float>(target);
  }
}

void cross_entropy_backward_sharded(float* dlogits, const float* logits, const int32_t* targets,
                                    const float* row_max, const float* row_sumexp, float dloss,
                                    int N, int V_local, int Vp_local, int vocab_begin) {
  const int real = std::max(V_local, 0);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float* row = logits + static_cast<std::size_t>(n) * Vp_local;
    float* drow = dlogits + static_cast<std::size_t>(n) * Vp_local;
    if (real > 0) {
      const float factor =
          static_cast<float>(static_cast<double>(dloss) / static_cast<double>(row_sumexp[n]));
      exp_scale_row(drow, row, row_max[n], factor, real);
      const int t = local_target(targets[n], vocab_begin, real);
      if (t >= 0) drow[t] -= dloss;
    }
    std::fill(drow + real, drow + Vp_local, 0.0f);
  }
}

}  // namespace trident::kernels::cpu
