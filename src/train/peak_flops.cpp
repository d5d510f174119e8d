#include "src/train/peak_flops.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace trident::train {

double measure_matmul_flops(kernels::Backend& backend) {
  constexpr int kSize = 512;
  constexpr std::size_t kElems = static_cast<std::size_t>(kSize) * kSize;
  float* a = backend.allocate(kElems);
  float* b = backend.allocate(kElems);
  float* c = backend.allocate(kElems);
  std::vector<float> host(kElems);
  for (std::size_t i = 0; i < kElems; ++i) host[i] = static_cast<float>(i % 7) * 0.01f;
  backend.copy_to_device(a, host.data(), kElems);
  backend.copy_to_device(b, host.data(), kElems);
  double best = 0.0;
  for (int rep = 0; rep < 6; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    backend.matmul_forward(c, a, b, nullptr, kSize, kSize, kSize);
    backend.synchronize();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rep > 0) best = std::max(best, 2.0 * kSize * kSize * kSize / s);  // rep 0 warms up
  }
  backend.release(c);
  backend.release(b);
  backend.release(a);
  return best;
}

}  // namespace trident::train
