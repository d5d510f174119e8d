// kernels/stored_element.h converts between fp32 and the 16-bit storages in two ways: with
// CUDA's intrinsics where nvcc compiles device code (the __CUDA_ARCH__ branch) and with
// kernels/precision.h's bit arithmetic everywhere else (the CPU twin, the host replays, the CUDA
// emulation). A GPU's 16-bit tensors equal the CPU twin's only where the two agree bit for bit.
// tests/gpu checks that on a GPU, on random values; the emulation never compiles the device
// branch. This checks it on every machine with the CUDA toolkit, through the toolkit's host
// implementations of the same intrinsics (cuda_bf16.hpp, cuda_fp16.hpp: NVIDIA's software model
// of the cvt instructions, which its headers use on GPUs without them), and over the values where
// rounding can go wrong: every 16-bit pattern, every tie and its neighbours, the overflow and
// subnormal edges, and a sweep of all float bit patterns.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/stored_element.h"

namespace trident::kernels {
namespace {

using detail::bits_of;  // kernels/precision.h: a float's bit pattern and back
using detail::float_of;

// The device branch of stored::Bf16 and stored::Fp16, with the toolkit's host implementations.
uint16_t device_store_bf16(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
float device_load_bf16(uint16_t bits) { return __bfloat162float(__ushort_as_bfloat16(bits)); }
uint16_t device_store_fp16(float x) { return __half_as_ushort(__float2half_rn(x)); }
float device_load_fp16(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }

// Every float bit pattern with stride 251 (a prime, so every low-bit residue is visited), both
// signs: 17 million values across every exponent.
std::vector<float> float_sweep() {
  std::vector<float> values;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 251) values.push_back(float_of(static_cast<uint32_t>(bits)));
  return values;
}

// Infinities, NaNs (quiet and signalling, both signs) and the floats next to the infinities.
void add_specials(std::vector<float>& values) {
  for (const uint32_t sign : {0u, 0x80000000u}) {
    for (const uint32_t bits : {0x7f800000u, 0x7f7fffffu, 0x7fc00000u, 0x7f800001u, 0x7fffffffu, 0x7fa00000u}) {
      values.push_back(float_of(sign | bits));
    }
  }
}

// x and the floats on either side of it.
void add_with_neighbours(std::vector<float>& values, float x) {
  values.push_back(x);
  values.push_back(std::nextafter(x, std::numeric_limits<float>::infinity()));
  values.push_back(std::nextafter(x, -std::numeric_limits<float>::infinity()));
}

// Stores compare bits, except NaN: the device makes every NaN its canonical one (bf16 0x7fff,
// fp16 0x7fff), the host keeps the sign and the top payload bits. Both are NaN, and nothing in
// Trident reads a NaN's bits (the loss scaler and the checks test isnan), so NaN only has to stay
// NaN.
template <class Device, class Host, class Load>
void expect_stores_agree(const std::vector<float>& values, Device device, Host host, Load load, const char* what) {
  int mismatches = 0;
  for (const float x : values) {
    const uint16_t want = device(x);
    const uint16_t got = host(x);
    const bool same = std::isnan(x) ? std::isnan(load(want)) && std::isnan(load(got)) : want == got;
    if (!same && ++mismatches <= 5) {
      ADD_FAILURE() << what << " of " << x << " (bits 0x" << std::hex << bits_of(x) << "): device 0x" << want
                    << ", host 0x" << got;
    }
  }
  EXPECT_EQ(mismatches, 0) << what << " over " << values.size() << " values";
}

TEST(DeviceConversions, Bf16LoadsAgreeOnEveryPattern) {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    ASSERT_EQ(bits_of(device_load_bf16(b)), bits_of(stored::Bf16::load(b))) << "bf16 0x" << std::hex << bits;
  }
}

// A NaN loads as NaN both ways; the device's model makes it the canonical 0x7fffffff, the host
// keeps its sign and payload (as stores, nothing reads a NaN's bits).
TEST(DeviceConversions, Fp16LoadsAgreeOnEveryPattern) {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float want = device_load_fp16(h);
    const float got = stored::Fp16::load(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << "fp16 0x" << std::hex << bits;
    } else {
      ASSERT_EQ(bits_of(want), bits_of(got)) << "fp16 0x" << std::hex << bits;
    }
  }
}

TEST(DeviceConversions, Bf16StoresAgreeOnTiesEdgesAndASweepOfAllFloats) {
  std::vector<float> values = float_sweep();
  add_specials(values);
  // For every bf16 pattern: the float itself, the tie to the next pattern and its neighbours,
  // and the largest float that still truncates to it.
  for (uint32_t upper = 0; upper <= 0xffffu; ++upper) {
    for (const uint32_t lower : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      values.push_back(float_of(upper << 16 | lower));
    }
  }
  expect_stores_agree(values, device_store_bf16, stored::Bf16::store, device_load_bf16, "bf16 store");
}

TEST(DeviceConversions, Fp16StoresAgreeOnTiesEdgesAndASweepOfAllFloats) {
  std::vector<float> values = float_sweep();
  add_specials(values);
  // For every finite fp16 magnitude: its value, the tie halfway to the next one (exact in a
  // float: 12 significant bits) and the floats on either side of both, with both signs. The tie
  // above 65504 is 65520, the overflow edge; below the smallest subnormal, 2^-25 rounds to 0.
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    const float value = device_load_fp16(static_cast<uint16_t>(h));
    const float next = h + 1 < 0x7c00u ? device_load_fp16(static_cast<uint16_t>(h + 1)) : 65536.0f;
    for (const float sign : {1.0f, -1.0f}) {
      add_with_neighbours(values, sign * value);
      add_with_neighbours(values, sign * (value + (next - value) / 2));
    }
  }
  for (const float sign : {1.0f, -1.0f}) {
    add_with_neighbours(values, sign * std::ldexp(1.0f, -25));
    add_with_neighbours(values, sign * 65520.0f);
    add_with_neighbours(values, sign * std::numeric_limits<float>::max());
    add_with_neighbours(values, sign * std::numeric_limits<float>::denorm_min());
  }
  expect_stores_agree(values, device_store_fp16, stored::Fp16::store, device_load_fp16, "fp16 store");
}

}  // namespace
}  // namespace trident::kernels
