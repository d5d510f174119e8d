// See multiply_add_probe.h. Translated and compiled with the options of the emulated kernels
// (trident_emulate_cuda_sources), the build type's optimisation level included.
#include "tests/emulation/multiply_add_probe.h"

namespace {

__global__ void multiply_add_kernel(float* out, const float* a, const float* b, const float* c, int n) {
  const int i = static_cast<int>(threadIdx.x);
  if (i < n) out[i] = a[i] * b[i] + c[i];
}

}  // namespace

void multiply_add_on_device(float* out, const float* a, const float* b, const float* c, int n) {
  multiply_add_kernel<<<1, n, 0, nullptr>>>(out, a, b, c, n);
}
