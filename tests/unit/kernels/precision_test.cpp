// Rounding to bf16 and fp16 storage (kernels/precision.h) against independent references:
// bf16 against exact rounding in double (the spacing of 8 significant bits, nearbyint's ties to
// even), fp16 against the compiler's _Float16 conversion. Then the backend's bulk version.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/precision.h"
#include "tests/unit/kernels/kernel_test_util.h"  // kTestThreads

namespace trident::kernels::test {
namespace {

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// The nearest value with 8 significant bits (ties to even), in double: exact for every finite
// float, overflowing to infinity past bf16's largest value like a float conversion would.
// Below 2^-126 bf16 is subnormal like float: a fixed spacing of 2^-133 (7 fraction bits).
float bf16_reference(float x) {
  if (x == 0.0f || !std::isfinite(x)) return x;
  int exponent = 0;
  std::frexp(static_cast<double>(x), &exponent);  // |x| in [2^(e-1), 2^e)
  const double spacing = std::ldexp(1.0, std::max(exponent - 8, -133));
  const double rounded = std::nearbyint(static_cast<double>(x) / spacing) * spacing;
  // bf16 has float's exponent range: the largest finite value is (2 - 2^-7) * 2^127.
  if (std::fabs(rounded) > 3.3895313892515355e38) return std::copysign(std::numeric_limits<float>::infinity(), x);
  return static_cast<float>(rounded);
}

float fp16_reference(float x) { return static_cast<float>(static_cast<_Float16>(x)); }

// Random bit patterns cover every exponent, subnormals and the far ends; values near the
// format's halfway points are added explicitly.
std::vector<float> probe_values(std::mt19937& rng) {
  std::vector<float> v;
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 200000; ++i) {
    const float x = from_bits(any(rng));
    if (!std::isnan(x)) v.push_back(x);
  }
  for (float x : {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 6.1035156e-5f, 5.9604645e-8f,
                  2.9802322e-8f, 2.9802326e-8f, 8.940697e-8f, 3.3895314e38f, 3.4028235e38f, 1e-40f}) {
    v.push_back(x);
  }
  // Exact ties of both formats (1 + half a unit of the last place), and one float step around.
  for (uint32_t base : {0x3f800000u, 0x3f810000u, 0x40490000u, 0xc2c80000u}) {
    for (uint32_t tie : {0x8000u, 0x1000u}) {
      for (int32_t step : {-1, 0, 1}) v.push_back(from_bits(base + tie + static_cast<uint32_t>(step)));
    }
  }
  return v;
}

// What the backend's bulk conversions are checked on: large values (beyond fp16's range), small
// ones (fp16 subnormals, below 6.1e-5) and the probe values (ties, specials; no NaN).
std::vector<float> bulk_values(std::mt19937& rng) {
  std::vector<float> x = random_floats(1001, rng, -70000.0f, 70000.0f);
  const std::vector<float> tiny = random_floats(1001, rng, -1e-4f, 1e-4f);
  const std::vector<float> probes = probe_values(rng);
  x.insert(x.end(), tiny.begin(), tiny.end());
  x.insert(x.end(), probes.begin(), probes.end());
  return x;
}

TEST(Precision, Bf16RoundsToNearestEvenLikeExactArithmetic) {
  std::mt19937 rng(401);
  int checked = 0;
  for (float x : probe_values(rng)) {
    const float got = round_to_bf16(x), want = bf16_reference(x);
    ASSERT_EQ(bits(got), bits(want)) << "x = " << x << " (bits " << std::hex << bits(x) << ")";
    ASSERT_EQ(bits(got) & 0xffffu, 0u) << "not a bf16 value: " << x;
    ++checked;
  }
  EXPECT_GT(checked, 100000);
  // Ties go to the even neighbour: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7.
  EXPECT_EQ(round_to_bf16(1.00390625f), 1.0f);
  EXPECT_EQ(round_to_bf16(1.01171875f), 1.015625f);  // halfway above an odd neighbour: up
}

TEST(Precision, Fp16MatchesTheCompilersHalfConversion) {
  std::mt19937 rng(402);
  for (float x : probe_values(rng)) {
    const float got = round_to_fp16(x), want = fp16_reference(x);
    ASSERT_EQ(bits(got), bits(want)) << "x = " << x << " (bits " << std::hex << bits(x) << ")";
  }
  EXPECT_EQ(round_to_fp16(65519.99f), 65504.0f);
  EXPECT_TRUE(std::isinf(round_to_fp16(65520.0f)));  // the overflow the loss scaler detects
  EXPECT_EQ(round_to_fp16(2.9802322e-8f), 0.0f);     // just below half the smallest subnormal
}

TEST(Precision, NaNStaysNaNAndInfinityStays) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float signalling = from_bits(0x7f800001u);
  for (Precision p : {Precision::kBf16, Precision::kFp16}) {
    EXPECT_TRUE(std::isnan(round_to_precision(nan, p)));
    EXPECT_TRUE(std::isnan(round_to_precision(signalling, p)));  // must not turn into infinity
    EXPECT_EQ(round_to_precision(inf, p), inf);
    EXPECT_EQ(round_to_precision(-inf, p), -inf);
  }
  EXPECT_EQ(bits(round_to_precision(0.1f, Precision::kFp32)), bits(0.1f));
}

// The 16-bit encodings gradients travel in: fp16 bits against the compiler's _Float16 bit
// pattern, bf16 bits against the top half of the rounded float; and back, exactly.
TEST(Precision, SixteenBitEncodingsMatchTheFormatsAndRoundTrip) {
  std::mt19937 rng(403);
  std::vector<float> values = probe_values(rng);
  for (float x : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), 6.0975552e-5f,
                  -6.1035156e-5f, 1.1920929e-7f}) {
    values.push_back(x);
  }
  for (float x : values) {
    const _Float16 h = static_cast<_Float16>(x);
    uint16_t half_bits;
    std::memcpy(&half_bits, &h, sizeof half_bits);
    ASSERT_EQ(encode_fp16(x), half_bits) << "x = " << x;
    ASSERT_EQ(bits(decode_fp16(encode_fp16(x))), bits(round_to_fp16(x))) << "x = " << x;
    ASSERT_EQ(encode_bf16(x), bits(round_to_bf16(x)) >> 16) << "x = " << x;
    ASSERT_EQ(bits(decode_bf16(encode_bf16(x))), bits(round_to_bf16(x))) << "x = " << x;
  }
  // Every one of the 65536 patterns decodes to a value that encodes back to itself (NaNs: to
  // a NaN).
  for (uint32_t b = 0; b < 65536; ++b) {
    for (Precision p : {Precision::kBf16, Precision::kFp16}) {
      const float value = decode_16bit(static_cast<uint16_t>(b), p);
      if (std::isnan(value)) {
        EXPECT_TRUE(std::isnan(decode_16bit(encode_16bit(value, p), p)));
      } else {
        ASSERT_EQ(encode_16bit(value, p), b) << precision_name(p) << " pattern " << b;
      }
    }
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(decode_fp16(encode_fp16(nan))));
  EXPECT_TRUE(std::isnan(decode_bf16(encode_bf16(nan))));
}

TEST(Precision, ParsesTheDeckSpelling) {
  EXPECT_EQ(parse_precision("bf16"), Precision::kBf16);
  EXPECT_EQ(parse_precision("fp16"), Precision::kFp16);
  EXPECT_EQ(parse_precision("fp32"), Precision::kFp32);
  EXPECT_THROW(parse_precision("fp8"), std::invalid_argument);
  EXPECT_STREQ(precision_name(Precision::kBf16), "bf16");
}

TEST(Precision, CpuBackendRoundsInBulkAndInPlace) {
  std::mt19937 rng(403);
  cpu::CpuBackend backend(kTestThreads);
  // The bulk routines (F16C on x86) against the scalar functions.
  const std::vector<float> x = bulk_values(rng);
  for (Precision p : {Precision::kBf16, Precision::kFp16, Precision::kFp32}) {
    std::vector<float> out(x.size());
    backend.round_to_precision(out.data(), x.data(), x.size(), p);
    std::vector<float> in_place = x;
    backend.round_to_precision(in_place.data(), in_place.data(), x.size(), p);
    for (std::size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(bits(out[i]), bits(round_to_precision(x[i], p))) << precision_name(p) << " at " << i;
      ASSERT_EQ(bits(in_place[i]), bits(out[i]));
    }
  }
}

// The backend's bulk 16-bit stores and loads (narrow, widen: F16C for fp16 on x86, a vectorised
// loop for bf16) against encode_16bit / decode_16bit, bit for bit; a NaN only has to stay a
// NaN (F16C keeps part of its payload, the scalar functions none). An odd count: the tail after
// the last whole group of eight takes the scalar path.
TEST(Precision, CpuBackendNarrowsAndWidensInBulkAsTheScalarFunctions) {
  std::mt19937 rng(404);
  cpu::CpuBackend backend(kTestThreads);
  std::vector<float> x = bulk_values(rng);
  for (uint32_t nan : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fbfe000u, 0xff812345u}) x.push_back(from_bits(nan));
  if (x.size() % 8 == 0) x.push_back(1.5f);
  std::vector<uint16_t> patterns(65536 + 3);  // every pattern, and three more for a tail
  for (std::size_t b = 0; b < patterns.size(); ++b) patterns[b] = static_cast<uint16_t>(b * 40503u);
  for (Precision p : {Precision::kBf16, Precision::kFp16}) {
    std::vector<uint16_t> stored(x.size());
    backend.narrow(ActPtr(stored.data(), p), x.data(), x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i])) {
        ASSERT_TRUE(std::isnan(decode_16bit(stored[i], p))) << precision_name(p) << " NaN at " << i;
      } else {
        ASSERT_EQ(stored[i], encode_16bit(x[i], p)) << precision_name(p) << " x = " << x[i];
      }
    }
    std::vector<float> loaded(patterns.size());
    backend.widen(loaded.data(), ConstActPtr(patterns.data(), p), patterns.size());
    for (std::size_t i = 0; i < patterns.size(); ++i) {
      const float want = decode_16bit(patterns[i], p);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(loaded[i])) << precision_name(p) << " pattern " << patterns[i];
      } else {
        ASSERT_EQ(bits(loaded[i]), bits(want)) << precision_name(p) << " pattern " << patterns[i];
      }
    }
  }
}

}  // namespace
}  // namespace trident::kernels::test
