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

namespace {

// The per-call scalars, the bias corrections in double as above.
struct Scalars {
  float beta1, beta2, lr, eps, wd, inv_bc1, inv_bc2;
  explicit Scalars(const AdamWArgs& args)
      : beta1(args.beta1),
        beta2(args.beta2),
        lr(args.lr),
        eps(args.eps),
        wd(args.weight_decay),
        inv_bc1(static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(args.beta1), args.step)))),
        inv_bc2(static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(args.beta2), args.step)))) {}
};

// One element: updates m[i], v[i] and returns the new parameter value. The only copy of the
// arithmetic, so the plain and the master-weight updates agree bit for bit.
inline float updated(const Scalars& k, float param, float g, float& m, float& v) {
  const float mi = k.beta1 * m + (1.0f - k.beta1) * g;
  const float vi = k.beta2 * v + (1.0f - k.beta2) * g * g;
  m = mi;
  v = vi;
  const float mhat = mi * k.inv_bc1;
  const float vhat = vi * k.inv_bc2;
  return param - k.lr * (mhat / (std::sqrt(vhat) + k.eps) + k.wd * param);
}

}  // namespace

TRIDENT_SIMD_CLONES
void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n,
                  const AdamWArgs& args) {
  const Scalars k(args);
  const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < count; i++) param[i] = updated(k, param[i], grad[i], m[i], v[i]);
}

TRIDENT_SIMD_CLONES
void adamw_update_master(float* master, float* compute, const float* grad, float* m, float* v, std::size_t n,
                         const AdamWArgs& args, Precision precision) {
  const Scalars k(args);
  const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < count; i++) {
    const float p = updated(k, master[i], grad[i], m[i], v[i]);
    master[i] = p;
    compute[i] = round_to_precision(p, precision);
  }
}

}  // namespace trident::kernels::cpu
