// Elementwise kernels: memory-bound, so one static parallel loop each (contiguous chunks per
// thread, no false sharing except at chunk edges) with a vectorised body. out may alias a or b.
// sum_squares accumulates in double: it feeds the global gradient norm over ~1e8 elements,
// where a float sum would lose the small terms.
#include "kernels/cpu/elementwise.h"

namespace trident::kernels::cpu {

void add(float* out, const float* a, const float* b, std::size_t n) {
  const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < count; i++) out[i] = a[i] + b[i];
}

void accumulate(float* dst, const float* src, std::size_t n) {
  const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < count; i++) dst[i] += src[i];
}

void scale(float* x, float factor, std::size_t n) {
  const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < count; i++) x[i] *= factor;
}

double sum_squares(const float* x, std::size_t n) {
  const auto count = static_cast<std::ptrdiff_t>(n);
  double total = 0.0;
#pragma omp parallel for simd schedule(static) reduction(+ : total)
  for (std::ptrdiff_t i = 0; i < count; i++) {
    const double xi = static_cast<double>(x[i]);
    total += xi * xi;
  }
  return total;
}

}  // namespace trident::kernels::cpu
