#include "src/train/peak_flops.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace trident::train {

namespace {

struct DatasheetEntry {
  const char* name_part;  // matched in the device name
  const char* label;
  double tensor_16bit_tflops;  // dense bf16 / fp16 on the tensor cores
  double fp32_tflops;          // fp32 on the CUDA cores
};

// NVIDIA's datasheet figures (dense, no sparsity), most specific names first.
constexpr DatasheetEntry kDatasheet[] = {
    {"H100 PCIe", "H100 PCIe", 756.0, 51.0},
    {"H100", "H100 SXM", 989.0, 67.0},
    {"H200", "H200", 989.0, 67.0},
    {"A100", "A100", 312.0, 19.5},
};

}  // namespace

double datasheet_peak_flops(const std::string& device, kernels::Precision precision, std::string& which) {
  if (device.rfind("cuda", 0) != 0) return 0.0;
  for (const DatasheetEntry& e : kDatasheet) {
    if (device.find(e.name_part) == std::string::npos) continue;
    const bool tensor = precision != kernels::Precision::kFp32;
    which = std::string(e.label) + (tensor ? ", dense " + std::string(kernels::precision_name(precision)) : ", fp32");
    return (tensor ? e.tensor_16bit_tflops : e.fp32_tflops) * 1e12;
  }
  return 0.0;
}

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
  backend.matmul_forward(c, a, b, nullptr, kSize, kSize, kSize);  // warm-up: threads, pages, library set-up
  backend.synchronize();
  double best = 0.0, timed = 0.0;
  for (int rep = 0; rep < kPeakMaxProducts && (rep < kPeakMinProducts || timed < kPeakWindowSeconds); ++rep) {
    const auto start = std::chrono::steady_clock::now();
    backend.matmul_forward(c, a, b, nullptr, kSize, kSize, kSize);
    backend.synchronize();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * kSize * kSize * kSize / s);
    timed += s;
  }
  backend.release(c);
  backend.release(b);
  backend.release(a);
  return best;
}

}  // namespace trident::train
