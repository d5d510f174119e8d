// AdamW (decoupled weight decay, Loshchilov & Hutter), bias-corrected:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  mhat = m / (1-b1^t);  vhat = v / (1-b2^t)
//   p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p)
// The bias corrections are computed once per call in double (b2^t for t ~ 1e5 underflows
// gracefully to 0 there), then the per-element update is float, parallel and vectorised
// (compiled per ISA, simd_dispatch.h: the sqrt and divide are the costly part at SSE2 width).
#include "kernels/cpu/adamw.h"

#include <cmath>

#include "kernels/cpu/simd_dispatch.h"  // TRIDENT_SIMD_CLONES

namespace trident::kernels::cpu {

TRIDENT_SIMD_CLONES
void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n,
                  const AdamWArgs& args) {
  const float beta1 = args.beta1;
  const float beta2 = args.beta2;
  const float lr = args.lr;
  const float eps = args.eps;
  const float wd = args.weight_decay;
  const auto inv_bc1 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(beta1), args.step)));
  const auto inv_bc2 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(beta2), args.step)));
  const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < count; i++) {
    const float g = grad[i];
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float mhat = mi * inv_bc1;
    const float vhat = vi * inv_bc2;
    param[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + wd * param[i]);
  }
}

}  // namespace trident::kernels::cpu
