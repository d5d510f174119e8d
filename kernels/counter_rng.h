// Counter-based random numbers (Philox-4x32-10, Salmon et al., SC'11): the value for
// (key, counter) is a pure function, so any rank can generate exactly the elements it owns and
// the full tensor is the same for every layout. Header-only so device code can share it.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace trident::kernels {

struct Philox4x32 {
  uint32_t v[4];
};

inline Philox4x32 philox4x32_10(uint64_t counter_lo, uint64_t counter_hi, uint64_t key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {{c0, c1, c2, c3}};
}

// 64-bit FNV-1a: turns a tensor name into part of the key.
inline uint64_t fnv1a64(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char ch : text) {
    hash ^= ch;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

// A standard normal sample for (key, index), by Box-Muller on two 32-bit uniforms.
inline float counter_normal(uint64_t key, uint64_t index) {
  const Philox4x32 r = philox4x32_10(index, 0, key);
  // u1 in (0, 1] so log(u1) is finite; u2 in [0, 1).
  const double u1 = (static_cast<double>(r.v[0]) + 1.0) / 4294967296.0;
  const double u2 = static_cast<double>(r.v[1]) / 4294967296.0;
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2));
}

}  // namespace trident::kernels
