// GELU, tanh approximation (GPT-2):  y = 0.5 x (1 + tanh(u)),  u = k (x + a x^3),
// k = sqrt(2/pi), a = 0.044715.
// Since 0.5 (1 + tanh u) = sigmoid(2u) = s, this is y = x s with one exponential and no
// cancellation, and
//   dy/dx = s + 2 x s (1 - s) k (1 + 3 a x^2)        (0.5 x (1 - tanh^2 u) = 2 x s (1 - s))
// The exponential is exp_approx so that the loop vectorises (glibc tanhf is a scalar call of
// ~30 ns, which made GELU as slow as the MLP matmul). Elementwise and memory-bound otherwise:
// one static parallel loop, contiguous chunks per thread, compiled per ISA (simd_dispatch.h).
#include "kernels/cpu/gelu.h"

#include <cstddef>

#include "kernels/cpu/simd_dispatch.h"  // TRIDENT_SIMD_CLONES
#include "kernels/cpu/vector_math.h"    // exp_approx

namespace trident::kernels::cpu {

namespace {
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluCubic = 0.044715f;
}  // namespace

TRIDENT_SIMD_CLONES
void gelu_forward(float* out, const float* inp, std::size_t n) {
  const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < count; i++) {
    const float x = inp[i];
    const float u = kGeluScale * (x + kGeluCubic * x * x * x);
    out[i] = x / (1.0f + exp_approx(-2.0f * u));
  }
}

TRIDENT_SIMD_CLONES
void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n) {
  const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < count; i++) {
    const float x = inp[i];
    const float u = kGeluScale * (x + kGeluCubic * x * x * x);
    const float s = 1.0f / (1.0f + exp_approx(-2.0f * u));
    const float local =
        s + 2.0f * x * s * (1.0f - s) * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
    dinp[i] = local * dout[i];  // after reading dout[i]: dinp may be dout
  }
}

}  // namespace trident::kernels::cpu
