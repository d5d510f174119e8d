// Warp-level tensor-core instructions for 16-bit operands (sm_80 and later): the PTX
// mma.sync m16n8k16 (bf16 or fp16 inputs, fp32 accumulation) and ldmatrix m8n8.x4, which loads
// its operand fragments from shared memory. Why PTX and not WMMA: mma.sync's fragment layout is
// specified (WMMA's is not), so a kernel can rescale accumulator rows, mask them and turn them
// into the next product's operand in registers, without a trip through shared memory, as
// FlashAttention-2 does (kernels/cuda/flash_attention_mma.cu).
//
// The layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"), with
// g = lane / 4 and t = lane % 4, two 16-bit elements per 32-bit register, the lower column (or
// row, for B) in the low half:
//   A (16 x 16, row-major):   a[0] = A[g][2t, 2t+1]      a[1] = A[g+8][2t, 2t+1]
//                             a[2] = A[g][2t+8, 2t+9]    a[3] = A[g+8][2t+8, 2t+9]
//   B (16 x 8, k x n):        b[0] = B[2t, 2t+1][g]      b[1] = B[2t+8, 2t+9][g]
//   C, D (16 x 8, fp32):      c[0], c[1] = C[g][2t, 2t+1]   c[2], c[3] = C[g+8][2t, 2t+1]
// ldmatrix.x4: lanes 8j to 8j + 7 give the addresses of the 8 rows (16 bytes each, 16-byte
// aligned) of matrix j; lane L receives in r[j] row L / 4 of matrix j, columns 2(L % 4) and
// 2(L % 4) + 1. With .trans it receives column L / 4, rows 2(L % 4) and 2(L % 4) + 1. So:
//   - row-major A rows r0..r0+15, columns c0..c0+15: lane L gives row r0 + L % 16, column
//     c0 + 8 (L / 16), and r[0..3] are a[0..3];
//   - B = M^T for a row-major M (B[k][n] = M[n][k]: keys by dimensions, for Q K^T) is loaded
//     without .trans, B = M itself (for P V) with .trans; the kernels say which rows they give.
//
// Where this runs: on the GPU, the PTX. In the CUDA emulation (tests/emulation, where the
// kernels run on the CPU so that every CI checks them), a host model of the same layouts built
// on the emulation's warp exchange: every lane publishes its operands and waits for the warp,
// then computes its own accumulator elements from the others' (fp32 sums over k in order; the
// tensor cores' own summation order is unspecified, so the twin tolerances, not bits, hold the
// two together). The model and the PTX agree only if the layouts above are read right: the GPU
// twin tests (tests/gpu) are what check that.
#pragma once

#include <cstdint>

#include "kernels/stored_element.h"  // stored::Bf16, stored::Fp16

#if defined(__CUDACC__) && !defined(TRIDENT_CUDA_EMULATION)
#define TRIDENT_MMA_DEVICE __device__ __forceinline__
#else
#define TRIDENT_MMA_DEVICE inline
#endif

namespace trident::kernels::cuda::mma {

// Two stored 16-bit values in one register, `low` in bits 0-15: a pair of adjacent columns of an
// operand fragment.
template <class S>
TRIDENT_MMA_DEVICE uint32_t pack(float low, float high) {
  return static_cast<uint32_t>(S::store(low)) | (static_cast<uint32_t>(S::store(high)) << 16);
}

#if defined(TRIDENT_CUDA_EMULATION)
namespace emulated {

// The warp's 32 values of one lane-local operand (a publish, then 32 reads: one warp barrier).
template <int kWords>
inline void gather(const uint32_t (&mine)[kWords], uint32_t (&all)[32][kWords]) {
  ::cuda_emu::warp_publish(0xffffffffu, mine, sizeof(mine));
  for (int lane = 0; lane < 32; lane++) ::cuda_emu::warp_read(lane, all[lane], sizeof(mine));
}

template <class S>
inline float element(uint32_t pair, int which) {
  return S::load(static_cast<uint16_t>(which == 0 ? pair & 0xffffu : pair >> 16));
}

// A[row][col] and B[k][n] from the gathered fragments, by the layouts above.
template <class S>
inline float a_at(const uint32_t (&a)[32][4], int row, int col) {
  const int lane = 4 * (row % 8) + (col % 8) / 2;
  const int reg = (row / 8) + 2 * (col / 8);
  return element<S>(a[lane][reg], col % 2);
}
template <class S>
inline float b_at(const uint32_t (&b)[32][2], int k, int n) {
  const int lane = 4 * n + (k % 8) / 2;
  return element<S>(b[lane][k / 8], k % 2);
}

}  // namespace emulated
#endif

// c += A B for one 16 x 16 A and 16 x 8 B of stored elements S (stored::Bf16 or stored::Fp16),
// fp32 accumulators. Every lane of the warp calls it together (mma.sync).
template <class S>
TRIDENT_MMA_DEVICE void mma_16x8x16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (S::kPrecision == Precision::kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#elif defined(__CUDA_ARCH__)
  (void)c, (void)a, (void)b;
  __trap();  // built for a GPU before sm_80: the backend refuses flash attention there
#elif defined(TRIDENT_CUDA_EMULATION)
  uint32_t all_a[32][4];
  uint32_t all_b[32][2];
  emulated::gather(a, all_a);
  emulated::gather(b, all_b);
  const int lane = ::cuda_emu::lane_of_current_thread();
  const int g = lane / 4;
  const int t = lane % 4;
  for (int i = 0; i < 4; i++) {
    const int row = g + 8 * (i / 2);
    const int col = 2 * t + i % 2;
    float sum = c[i];
    for (int k = 0; k < 16; k++) sum += emulated::a_at<S>(all_a, row, k) * emulated::b_at<S>(all_b, k, col);
    c[i] = sum;
  }
#else
  (void)c, (void)a, (void)b;  // nvcc's host pass: device code, never called on the host
#endif
}

// ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: r[j] from the rows whose addresses lanes
// 8j to 8j + 7 give (`row`: this lane's row, 16-byte aligned, in shared memory).
template <bool kTranspose>
TRIDENT_MMA_DEVICE void load_matrix_x4(uint32_t (&r)[4], const uint16_t* row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if constexpr (kTranspose) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  }
#elif defined(__CUDA_ARCH__)
  (void)row;
  r[0] = r[1] = r[2] = r[3] = 0;
  __trap();
#elif defined(TRIDENT_CUDA_EMULATION)
  if (reinterpret_cast<std::uintptr_t>(row) % 16 != 0) __builtin_trap();  // the GPU faults on it
  const uint16_t* rows[32];
  ::cuda_emu::warp_publish(0xffffffffu, &row, sizeof(row));
  for (int lane = 0; lane < 32; lane++) ::cuda_emu::warp_read(lane, &rows[lane], sizeof(row));
  const int lane = ::cuda_emu::lane_of_current_thread();
  const int g = lane / 4;
  const int t = lane % 4;
  for (int j = 0; j < 4; j++) {
    const uint16_t* const* m = rows + 8 * j;  // matrix j's 8 rows
    const uint16_t low = kTranspose ? m[2 * t][g] : m[g][2 * t];
    const uint16_t high = kTranspose ? m[2 * t + 1][g] : m[g][2 * t + 1];
    r[j] = static_cast<uint32_t>(low) | (static_cast<uint32_t>(high) << 16);
  }
#else
  (void)row;
  r[0] = r[1] = r[2] = r[3] = 0;
#endif
}

}  // namespace trident::kernels::cuda::mma
