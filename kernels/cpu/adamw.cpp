// AdamW (decoupled weight decay, Loshchilov & Hutter), bias-corrected:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  mhat = m / (1-b1^t);  vhat = v / (1-b2^t)
//   p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p)
// with g = grad * grad_scale (AdamWArgs::grad_scale), rounded to float before its first use.
// The bias corrections are computed once per call in double (b2^t for t ~ 1e5 underflows
// gracefully to 0 there), then the per-element update is float, parallel and vectorised
// (compiled per ISA, simd_dispatch.h: the sqrt and divide are the costly part at SSE2 width).
#include "kernels/cpu/adamw.h"

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cpu/simd_dispatch.h"  // TRIDENT_SIMD_CLONES

namespace trident::kernels::cpu {

namespace {

// The per-call scalars, the bias corrections in double as above.
struct Scalars {
  float beta1, beta2, lr, eps, wd, inv_bc1, inv_bc2, grad_scale;
  explicit Scalars(const AdamWArgs& args)
      : beta1(args.beta1),
        beta2(args.beta2),
        lr(args.lr),
        eps(args.eps),
        wd(args.weight_decay),
        inv_bc1(static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(args.beta1), args.step)))),
        inv_bc2(static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(args.beta2), args.step)))),
        grad_scale(args.grad_scale) {}
};

// One element: updates m[i], v[i] and returns the new parameter value. The only copy of the
// arithmetic, so the plain and the master-weight updates agree bit for bit.
inline float updated(const Scalars& k, float wd, float param, float grad, float& m, float& v) {
  // A product rounded to float on its own (it is no addend, so no contraction fuses it).
  const float g = grad * k.grad_scale;
  const float mi = k.beta1 * m + (1.0f - k.beta1) * g;
  const float vi = k.beta2 * v + (1.0f - k.beta2) * g * g;
  m = mi;
  v = vi;
  const float mhat = mi * k.inv_bc1;
  const float vhat = vi * k.inv_bc2;
  return param - k.lr * (mhat / (std::sqrt(vhat) + k.eps) + wd * param);
}

// The update of elements [begin, end) with one weight decay: the vectorised loops.
TRIDENT_SIMD_CLONES
void update_range(const Scalars& k, float wd, float* param, const float* grad, float* m, float* v,
                  std::ptrdiff_t begin, std::ptrdiff_t end) {
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = begin; i < end; i++) param[i] = updated(k, wd, param[i], grad[i], m[i], v[i]);
}

TRIDENT_SIMD_CLONES
void update_master_range(const Scalars& k, float wd, float* master, float* compute, const float* grad, float* m,
                         float* v, std::ptrdiff_t begin, std::ptrdiff_t end, Precision precision) {
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = begin; i < end; i++) {
    const float p = updated(k, wd, master[i], grad[i], m[i], v[i]);
    master[i] = p;
    compute[i] = round_to_precision(p, precision);
  }
}

// The same with a 16-bit compute copy: its bit patterns (encode_16bit rounds as above).
TRIDENT_SIMD_CLONES
void update_master16_range(const Scalars& k, float wd, float* master, uint16_t* compute, const float* grad, float* m,
                           float* v, std::ptrdiff_t begin, std::ptrdiff_t end, Precision precision) {
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = begin; i < end; i++) {
    const float p = updated(k, wd, master[i], grad[i], m[i], v[i]);
    master[i] = p;
    compute[i] = encode_16bit(p, precision);
  }
}

// Calls run(begin, end, decays) for each maximal run of elements of [0, n) with one decay bit
// (AdamWArgs::decay_mask), or once for all of them without a mask. The CPU does not need one
// pass (launches cost nothing here), and looking the bit up inside the vectorised loop made it
// about three times slower (docs/performance.md), so the mask is turned back into runs: whole
// words of equal bits at a time, bit by bit only inside the words where a tensor ends.
template <class Run>
void for_each_decay_run(const int32_t* decay_mask, std::size_t n, Run&& run) {
  if (decay_mask == nullptr) {
    run(std::size_t{0}, n, true);
    return;
  }
  const auto* words = reinterpret_cast<const uint32_t*>(decay_mask);
  auto bit = [words](std::size_t i) { return ((words[i / 32] >> (i % 32)) & 1u) != 0; };
  std::size_t begin = 0;
  while (begin < n) {
    const bool decays = bit(begin);
    const uint32_t uniform = decays ? ~0u : 0u;
    std::size_t end = begin + 1;
    while (end < n) {
      if (end % 32 == 0 && end + 32 <= n && words[end / 32] == uniform) {
        end += 32;
      } else if (bit(end) == decays) {
        ++end;
      } else {
        break;
      }
    }
    run(begin, end, decays);
    begin = end;
  }
}

}  // namespace

void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n, const AdamWArgs& args) {
  const Scalars k(args);
  for_each_decay_run(args.decay_mask, n, [&](std::size_t begin, std::size_t end, bool decays) {
    update_range(k, decays ? k.wd : 0.0f, param, grad, m, v, static_cast<std::ptrdiff_t>(begin),
                 static_cast<std::ptrdiff_t>(end));
  });
}

void adamw_update_master(float* master, ActPtr compute, const float* grad, float* m, float* v, std::size_t n,
                         const AdamWArgs& args, Precision precision) {
  const Scalars k(args);
  if (!compute.is_fp32() && compute.storage() != precision) {
    throw std::logic_error(std::string("adamw_update_master: a ") + precision_name(compute.storage()) +
                           " compute copy cannot hold " + precision_name(precision) + " values");
  }
  for_each_decay_run(args.decay_mask, n, [&](std::size_t begin, std::size_t end, bool decays) {
    const auto b = static_cast<std::ptrdiff_t>(begin), e = static_cast<std::ptrdiff_t>(end);
    if (compute.is_fp32()) {
      update_master_range(k, decays ? k.wd : 0.0f, master, compute.f32(), grad, m, v, b, e, precision);
    } else {
      update_master16_range(k, decays ? k.wd : 0.0f, master, compute.bits16(), grad, m, v, b, e, precision);
    }
  });
}

}  // namespace trident::kernels::cpu
