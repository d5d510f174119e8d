// The device's 16-bit wire casts (kernels/cuda/wire_cast.cuh, the NCCL gradient reduction in
// bf16 / fp16) against the CPU's encodings (kernels/precision.h, what MPI sends): every bit of
// the encoding of values across both formats' ranges (overflow, subnormals, ties), and the
// decoding of all 65536 patterns. NaNs only need to stay NaNs (the device writes its canonical
// NaN pattern).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cuda/wire_cast.cuh"
#include "kernels/precision.h"

namespace trident::kernels::gpu_test {
namespace {

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// A device copy of a host vector, freed at scope exit.
template <class T>
class DeviceVector {
 public:
  explicit DeviceVector(const std::vector<T>& host) : n_(host.size()) {
    EXPECT_EQ(cudaMalloc(&data_, n_ * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceVector() { cudaFree(data_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  T* get() { return data_; }
  std::vector<T> to_host() const {
    std::vector<T> host(n_);
    EXPECT_EQ(cudaMemcpy(host.data(), data_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  T* data_ = nullptr;
  std::size_t n_;
};

std::vector<float> probe_values() {
  std::mt19937 rng(911);
  std::uniform_int_distribution<uint32_t> any;
  std::vector<float> v;
  for (int i = 0; i < 300000; ++i) {
    uint32_t u = any(rng);
    float x;
    std::memcpy(&x, &u, sizeof x);
    v.push_back(x);  // every exponent, NaNs included
  }
  std::uniform_real_distribution<float> fp16_range(-70000.0f, 70000.0f), tiny(-1e-6f, 1e-6f);
  for (int i = 0; i < 100000; ++i) v.push_back(fp16_range(rng));
  for (int i = 0; i < 100000; ++i) v.push_back(tiny(rng));
  for (float x : {0.0f, -0.0f, 1.00390625f, 1.01171875f, 65504.0f, 65519.99f, 65520.0f, 5.9604645e-8f,
                  2.9802322e-8f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    v.push_back(x);
  }
  return v;
}

TEST(CudaWireCast, EncodingIsBitIdenticalToCpu) {
  const std::vector<float> values = probe_values();
  for (const Precision p : {Precision::kBf16, Precision::kFp16}) {
    SCOPED_TRACE(precision_name(p));
    DeviceVector<float> src(values);
    DeviceVector<uint16_t> wire(std::vector<uint16_t>(values.size(), 0));
    cuda::encode_16bit(wire.get(), src.get(), values.size(), p, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<uint16_t> got = wire.to_host();
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (std::isnan(values[i])) {
        ASSERT_TRUE(std::isnan(decode_16bit(got[i], p))) << "NaN at " << i;
      } else {
        ASSERT_EQ(got[i], encode_16bit(values[i], p)) << "x = " << values[i];
      }
    }
  }
}

TEST(CudaWireCast, DecodingEveryPatternIsExact) {
  std::vector<uint16_t> patterns(65536);
  for (uint32_t b = 0; b < 65536; ++b) patterns[b] = static_cast<uint16_t>(b);
  for (const Precision p : {Precision::kBf16, Precision::kFp16}) {
    SCOPED_TRACE(precision_name(p));
    DeviceVector<uint16_t> wire(patterns);
    DeviceVector<float> dst(std::vector<float>(patterns.size(), 7.0f));
    cuda::decode_16bit(dst.get(), wire.get(), patterns.size(), p, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> got = dst.to_host();
    for (uint32_t b = 0; b < 65536; ++b) {
      const float want = decode_16bit(static_cast<uint16_t>(b), p);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got[b])) << "pattern " << b;
      } else {
        ASSERT_EQ(bits_of(got[b]), bits_of(want)) << "pattern " << b;
      }
    }
  }
}

}  // namespace
}  // namespace trident::kernels::gpu_test
