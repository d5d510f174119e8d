// Stored elements: how a kernel reads one element of a buffer in its storage precision as fp32,
// and stores an fp32 result into it. One policy type per storage (kernels/precision.h):
//   Fp32  the float itself, both ways;
//   Bf16  a bf16 bit pattern: read exactly (the pattern is the float's top half), stored rounded
//         to nearest, ties to even;
//   Fp16  an IEEE binary16 pattern: the same, with fp16's exponent range (overflow to infinity,
//         subnormals).
// A kernel templated on the policy computes in fp32 whatever the storage and rounds each stored
// value once: the semantics that kernels::RoundedStorageBackend gives by widening, without the
// fp32 copies. Host and device: nvcc compiles the device side with the GPU's own conversions
// (__float2bfloat16_rn, __float2half_rn), any C++ compiler the host side with precision.h's
// encode/decode functions, which round the same way (tests/gpu checks the two bit for bit on a
// GPU, tests/unit/cuda_host with the toolkit's host models of the intrinsics on every machine,
// over every tie and edge; NaN's bits alone differ), so a host replay of a device kernel's math
// stores the same bits.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "kernels/act_ptr.h"    // ActPtr, ConstActPtr
#include "kernels/precision.h"  // Precision, encode_bf16, decode_bf16, encode_fp16, decode_fp16

#if defined(__CUDACC__)
#include <cuda_bf16.h>  // __float2bfloat16_rn, __bfloat16_as_ushort
#include <cuda_fp16.h>  // __float2half_rn, __half_as_ushort, __ushort_as_half, __half2float
#define TRIDENT_STORED_HD __host__ __device__ __forceinline__
#else
#define TRIDENT_STORED_HD inline
#endif

namespace trident::kernels::stored {

struct Fp32 {
  using Element = float;
  static constexpr Precision kPrecision = Precision::kFp32;
  TRIDENT_STORED_HD static float load(float x) { return x; }
  TRIDENT_STORED_HD static float store(float x) { return x; }
};

struct Bf16 {
  using Element = uint16_t;
  static constexpr Precision kPrecision = Precision::kBf16;
  TRIDENT_STORED_HD static float load(uint16_t bits) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(static_cast<unsigned>(bits) << 16);
#else
    return decode_bf16(bits);
#endif
  }
  TRIDENT_STORED_HD static uint16_t store(float x) {
#ifdef __CUDA_ARCH__
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
#else
    return encode_bf16(x);
#endif
  }
};

struct Fp16 {
  using Element = uint16_t;
  static constexpr Precision kPrecision = Precision::kFp16;
  TRIDENT_STORED_HD static float load(uint16_t bits) {
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(bits));
#else
    return decode_fp16(bits);
#endif
  }
  TRIDENT_STORED_HD static uint16_t store(float x) {
#ifdef __CUDA_ARCH__
    return __half_as_ushort(__float2half_rn(x));
#else
    return encode_fp16(x);
#endif
  }
};

// ---- from a call's operands to a policy (host code) ----

// Calls f(policy) with the policy object of `storage`: one instantiation per storage.
template <class F>
void with_policy(Precision storage, F&& f) {
  switch (storage) {
    case Precision::kFp32: f(Fp32{}); return;
    case Precision::kBf16: f(Bf16{}); return;
    case Precision::kFp16: f(Fp16{}); return;
  }
}

// The elements of an operand, in the policy's element type.
template <class S>
typename S::Element* elements(ActPtr p) { return static_cast<typename S::Element*>(p.get()); }
template <class S>
const typename S::Element* elements(ConstActPtr p) { return static_cast<const typename S::Element*>(p.get()); }

// The one storage of a call's operands (null ones are skipped): a kernel instantiated for one
// policy reads them all the same way. std::logic_error naming the call when they differ.
inline Precision common_storage(std::initializer_list<ConstActPtr> operands, const char* call) {
  bool seen = false;
  Precision found = Precision::kFp32;
  for (ConstActPtr p : operands) {
    if (!p) continue;
    if (seen && p.storage() != found) {
      throw std::logic_error(std::string(call) + ": operands in " + precision_name(found) + " and " +
                             precision_name(p.storage()) + " mixed; a kernel reads one storage");
    }
    found = p.storage();
    seen = true;
  }
  return found;
}

}  // namespace trident::kernels::stored
