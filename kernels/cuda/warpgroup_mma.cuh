// Warpgroup-level tensor-core products on Hopper (sm_90a): the PTX wgmma.mma_async m64n64k16
// (bf16 or fp16 inputs, fp32 accumulators) with its operands in shared memory, described by
// 64-bit matrix descriptors, or A in registers. Why: mma.sync (warp_mma.cuh) makes each warp
// load its own copy of every B fragment from shared memory into registers, 256 bytes an
// instruction, which at head size 64 keeps the flash kernels near the shared memory's bandwidth;
// wgmma reads B once for the warpgroup's four warps, straight from shared memory, and runs
// asynchronously beside the softmax's instructions. FlashAttention-3 and cuBLAS's Hopper kernels
// are built on it. Only options that are not the default use it so far (FlashProducts::kWarpgroup:
// flash_attention_wgmma.cu and flash_attention_wgmma_backward.cu); this header's check
// (tests/support/warpgroup_products.h) is there so that a GPU sitting says whether the layouts
// below are read right before more depends on them.
//
// The layouts (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"; read, with
// CUTLASS's cute/atom/mma_traits_sm90_gmma.hpp for the canonical shared layouts, not copied):
// - D (64 x 64, fp32): warp w of the warpgroup (threads 128 k + 32 w to + 31) holds rows
//   [16 w, 16 w + 16), as mma.sync's 16 x 8 accumulator repeated over the 8 column blocks:
//   d[4 j + i] is row 16 w + g (+ 8 for i >= 2), column 8 j + 2 t (+ 1 for odd i), with
//   g = lane / 4 and t = lane % 4. So the flash kernels' fragment loops carry over.
// - A in registers (16 x 16 per warp, its own 16 rows): mma.sync's A fragment exactly
//   (warp_mma.cuh), so an accumulator turns into the next product's A as before.
// - A and B in shared memory, in tiles of 64 rows of 64 16-bit values (128 bytes a row), with
//   the 128-byte swizzle: the 16-byte chunk c of row r is stored at chunk c ^ (r % 8) of its row
//   (address bits 4-6 XOR bits 7-9, on the absolute shared address: tiles start on 1024 bytes).
//   A tile's rows are either the operand's M or N index with its k along the row ("K-major":
//   Q and K for S = Q K^T), or its k with M or N along the row ("MN-major": V for P V, whose
//   rows are the keys, k). The descriptor of a k-step (16 values of k): K-major, the tile's
//   start plus 32 ks bytes (the hardware applies the swizzle after adding the row offsets);
//   MN-major, the start of rows [16 ks, 16 ks + 16), 2048 ks bytes on.
//   Descriptor fields: start address / 16 (bits 0-13), leading-dimension byte offset / 16
//   (16-29: unused by these tiles, 1 as is usual), stride-dimension byte offset / 16 (32-45: 1024
//   bytes from 8 rows to the next 8, K-major; from k's 8 rows to the next 8, MN-major; 64 here),
//   base offset 0 (49-51: tiles on 1024 bytes), swizzle mode 1 = 128 bytes (62-63).
//
// Order and visibility: shared memory written by ordinary stores (or cp.async) reaches wgmma,
// which reads through the async proxy, only after fence.proxy.async (fence_shared_for_async)
// and a barrier; wgmma.fence comes before the first wgmma that reads registers other
// instructions wrote (its accumulators, A); commit() closes a group of products and
// wait<N>() waits until at most N groups are in flight, after which the accumulators may be
// read (fence_operands keeps the compiler from moving their reads or writes across). Where
// ptxas cannot see that nothing but wgmma touches the accumulators between two products (a branch
// between them, say), it waits for the warpgroup there itself and says so (info C7519): a kernel
// built on this header should compile without that line.
//
// Where this runs: on the GPU, the PTX, when compiled for sm_90a (__CUDA_ARCH_FEAT_SM90_ALL:
// the machine code of CMAKE_CUDA_ARCHITECTURES' 90 is sm_90a's for the targets that use this
// header, trident_use_hopper_features; their compute_90 PTX, for later GPUs, leaves it out). In
// the CUDA emulation, a host model: at the issue each lane reads its operands through the
// descriptors decoded as above (the shared window of tests/emulation) or from its warp's A
// fragments; the product is computed at the wait that covers its group, summing k in order in
// fp32, and until then the accumulators hold a NaN, a write to them or to the shared operands is
// reported, and so is an issue with no fence since the last wait
// (tests/emulation/emulated_warpgroup.h). Like warp_mma.cuh's model, it holds to the layouts as
// read above; tests/gpu's WarpgroupMatrixProducts is what holds them to the hardware.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cuda/warp_mma.cuh"  // mma::emulated::gather and a_at (the model), TRIDENT_MMA_DEVICE
#include "kernels/stored_element.h"   // stored::Bf16, stored::Fp16

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TRIDENT_WGMMA_PTX 1
#endif

#if defined(__CUDACC__) && !defined(TRIDENT_CUDA_EMULATION)
#define TRIDENT_WGMMA_HD __host__ __device__ __forceinline__
#else
#define TRIDENT_WGMMA_HD inline
#endif

namespace trident::kernels::cuda::wgmma {

// Whether this compilation runs wgmma: the sm_90a device pass, or the emulation's model.
// (On the host pass of nvcc it is false; device code asks it as a constant.)
#if defined(TRIDENT_WGMMA_PTX) || defined(TRIDENT_CUDA_EMULATION)
constexpr bool kAvailable = true;
#else
constexpr bool kAvailable = false;
#endif

// The tiles: 64 rows of 64 16-bit values, 128 bytes a row, swizzled, on 1024 bytes.
constexpr int kTileRows = 64;
constexpr int kTileRowElements = 64;
constexpr int kTileElements = kTileRows * kTileRowElements;
constexpr int kTileAlignment = 1024;
// Which index runs along a tile's rows: K-major (k along the row) or MN-major (M or N along it);
// the instruction's transpose immediates, 0 and 1.
enum class Major : int { kK = 0, kMN = 1 };

// The element offset in a tile of (row, column): column c's 16-byte chunk swizzled by the row.
TRIDENT_WGMMA_HD constexpr int swizzled_offset(int row, int column) {
  return row * kTileRowElements + (((column / 8) ^ (row % 8)) * 8) + column % 8;
}

// The address in the shared window of a pointer into shared memory.
TRIDENT_MMA_DEVICE uint32_t shared_address(const void* p) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
#elif defined(TRIDENT_CUDA_EMULATION)
  return ::cuda_emu::shared_window_address(p);
#else
  (void)p;
  return 0;
#endif
}

// The first element of `shared` whose shared address is on kTileAlignment bytes (the caller
// leaves kTileAlignment bytes to spare).
TRIDENT_MMA_DEVICE uint16_t* align_tiles(uint16_t* shared) {
  const uint32_t address = shared_address(shared);
  const uint32_t skip = (kTileAlignment - address % kTileAlignment) % kTileAlignment;
  return shared + skip / sizeof(uint16_t);
}

// The descriptor of k-step ks (k in [16 ks, 16 ks + 16)) of a tile at `tile` (aligned) holding
// an operand whose rows are `kMajor`'s.
constexpr uint64_t kSwizzle128 = uint64_t{1} << 62;
constexpr uint64_t kStrideField = uint64_t{1024 / 16} << 32;
constexpr uint64_t kLeadingField = uint64_t{1} << 16;
template <Major kMajor>
TRIDENT_MMA_DEVICE uint64_t descriptor(const uint16_t* tile, int ks) {
  const uint32_t step_bytes = kMajor == Major::kK ? 32u : 16u * 2u * kTileRowElements;
  const uint32_t start = shared_address(tile) + step_bytes * static_cast<uint32_t>(ks);
  return kSwizzle128 | kStrideField | kLeadingField | ((start >> 4) & 0x3fffu);
}

#if defined(TRIDENT_CUDA_EMULATION)
namespace emulated {

// The shared window address of operand element (row, k) of a k-step: `row` its M or N index,
// `k` in [0, 16), through the descriptor as the hardware reads it (128-byte swizzle only; any
// other mode is not modelled).
inline uint32_t operand_address(uint64_t desc, Major major, int row, int k) {
  const uint32_t start = static_cast<uint32_t>(desc & 0x3fffu) << 4;
  const uint32_t leading = static_cast<uint32_t>((desc >> 16) & 0x3fffu) << 4;
  const uint32_t stride = static_cast<uint32_t>((desc >> 32) & 0x3fffu) << 4;
  if ((desc >> 62) != 1 || ((desc >> 49) & 7u) != 0) __builtin_trap();  // not the layout modelled
  const auto r = static_cast<uint32_t>(row), kk = static_cast<uint32_t>(k);
  uint32_t address = major == Major::kK
                         ? start + (r % 8) * 128 + (r / 8) * stride + kk * 2
                         : start + (r % 64) * 2 + (r / 64) * leading + (kk % 8) * 128 + (kk / 8) * stride;
  return address ^ (((address >> 7) & 7u) << 4);
}

// The element at (row, k), read as the issue reads it and noted in `product` for its wait.
template <class S>
inline float read_operand(::cuda_emu::WarpgroupProduct& product, uint64_t desc, Major major, int row, int k) {
  const uint32_t address = operand_address(desc, major, row, k);
  uint16_t bits;
  std::memcpy(&bits, ::cuda_emu::shared_window_pointer(address, sizeof bits), sizeof bits);
  product.read_address[product.reads] = address;
  product.read_bits[product.reads] = bits;
  ++product.reads;
  return S::load(bits);
}

// The running thread's warp within its warpgroup (the 4 warps of threads [128 k, 128 k + 128)).
inline int warp_in_warpgroup() {
  const auto linear = threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y;
  return static_cast<int>(linear / 32 % 4);
}

// A product's arithmetic, at its wait: each accumulator plus its row of A times its column of B,
// k in order in fp32. Internal to each kernel source, so that it is compiled as the kernels are
// (with nvcc's contractions, tests/emulation/CMakeLists.txt), whichever source the linker met first.
static inline void finish_product(const ::cuda_emu::WarpgroupProduct& product, float* values) {
  for (int j = 0; j < 8; j++) {
    for (int i = 0; i < 4; i++) {
      float sum = values[4 * j + i];
      for (int k = 0; k < 16; k++) sum += product.a[i / 2][k] * product.b[2 * j + i % 2][k];
      values[4 * j + i] = sum;
    }
  }
}

// Issues this lane's share of a 64 x 64 x 16 product: A's two rows from `a_at` (which notes its
// shared reads, if any), B's 16 columns from descriptor `b`; finished at the wait. Not inlined:
// the record is 3 KB, and under AddressSanitizer (no stack slot shared between scopes) a kernel
// with tens of inlined issues outgrew its fiber's 256 KiB stack.
template <class S, class AAt>
__attribute__((noinline)) void issue(float (&d)[8][4], AAt&& a_at, uint64_t b, Major b_major, bool accumulate) {
  ::cuda_emu::WarpgroupProduct product;
  product.d = &d[0][0];
  product.accumulate = accumulate;
  product.finish = &finish_product;
  const int warp = warp_in_warpgroup();
  const int lane = ::cuda_emu::lane_of_current_thread();
  const int g = lane / 4, t = lane % 4;
  for (int r = 0; r < 2; r++) {
    for (int k = 0; k < 16; k++) product.a[r][k] = a_at(product, 16 * warp + g + 8 * r, k);
  }
  for (int c = 0; c < 16; c++) {
    for (int k = 0; k < 16; k++) product.b[c][k] = read_operand<S>(product, b, b_major, 8 * (c / 2) + 2 * t + c % 2, k);
  }
  ::cuda_emu::record_warpgroup_product(product);
}

}  // namespace emulated
#endif

// The PTX of the two forms, one text for bf16 and fp16 (`type`: "bf16" or "f16"): accumulators
// %0 to %31, then the operands; scale-d (accumulate) as a predicate, the input scales 1.
#define TRIDENT_WGMMA_ACCUMULATORS \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define TRIDENT_WGMMA_ACCUMULATOR_OPERANDS(d) \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]),\
  "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),\
  "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),\
  "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]),\
  "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),\
  "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),\
  "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),\
  "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
#define TRIDENT_WGMMA_SHARED(type)                                                                 \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                       \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." type "." type " " TRIDENT_WGMMA_ACCUMULATORS \
               ", %32, %33, p, 1, 1, %35, %36;\n}\n"                                                \
               : TRIDENT_WGMMA_ACCUMULATOR_OPERANDS(d)                                            \
               : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)), "n"(static_cast<int>(kMajorA)), \
                 "n"(static_cast<int>(kMajorB)))
#define TRIDENT_WGMMA_REGISTERS(type)                                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                       \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." type "." type " " TRIDENT_WGMMA_ACCUMULATORS \
               ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"                                    \
               : TRIDENT_WGMMA_ACCUMULATOR_OPERANDS(d)                                            \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(static_cast<int>(accumulate)), \
                 "n"(static_cast<int>(kMajorB)))

// d (+)= A B, 64 x 64 x 16, A and B in shared memory (descriptors a and b of operands whose tiles'
// rows are kMajorA's and kMajorB's); accumulate = false: d = A B. The warpgroup's 128 threads call
// it together; it runs asynchronously until wait().
template <class S, Major kMajorA, Major kMajorB>
TRIDENT_MMA_DEVICE void multiply_shared(float (&d)[8][4], uint64_t a, uint64_t b, bool accumulate) {
#if defined(TRIDENT_WGMMA_PTX)
  if constexpr (S::kPrecision == Precision::kBf16) {
    TRIDENT_WGMMA_SHARED("bf16");
  } else {
    TRIDENT_WGMMA_SHARED("f16");
  }
#elif defined(__CUDA_ARCH__)
  (void)d, (void)a, (void)b, (void)accumulate;
  __trap();  // not built for sm_90a: callers check kAvailable
#elif defined(TRIDENT_CUDA_EMULATION)
  emulated::issue<S>(
      d,
      [a](::cuda_emu::WarpgroupProduct& product, int row, int k) {
        return emulated::read_operand<S>(product, a, kMajorA, row, k);
      },
      b, kMajorB, accumulate);
#else
  (void)d, (void)a, (void)b, (void)accumulate;  // nvcc's host pass
#endif
}

// d (+)= A B, 64 x 64 x 16, A in registers (this warp's 16 rows as mma.sync's A fragment), B in
// shared memory (descriptor b, tile rows kMajorB's).
template <class S, Major kMajorB>
TRIDENT_MMA_DEVICE void multiply_registers(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b, bool accumulate) {
#if defined(TRIDENT_WGMMA_PTX)
  if constexpr (S::kPrecision == Precision::kBf16) {
    TRIDENT_WGMMA_REGISTERS("bf16");
  } else {
    TRIDENT_WGMMA_REGISTERS("f16");
  }
#elif defined(__CUDA_ARCH__)
  (void)d, (void)a, (void)b, (void)accumulate;
  __trap();
#elif defined(TRIDENT_CUDA_EMULATION)
  uint32_t all_a[32][4];
  mma::emulated::gather(a, all_a);
  const int first = 16 * emulated::warp_in_warpgroup();
  emulated::issue<S>(
      d,
      [&all_a, first](::cuda_emu::WarpgroupProduct&, int row, int k) {
        return mma::emulated::a_at<S>(all_a, row - first, k);
      },
      b, kMajorB, accumulate);
#else
  (void)d, (void)a, (void)b, (void)accumulate;
#endif
}

// wgmma.fence: registers written by other instructions (the accumulators, A) are ready for the
// products that follow.
TRIDENT_MMA_DEVICE void fence() {
#if defined(TRIDENT_WGMMA_PTX)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#elif defined(TRIDENT_CUDA_EMULATION)
  ::cuda_emu::fence_warpgroup_products();
#endif
}
// Closes the group of products issued since the last commit.
TRIDENT_MMA_DEVICE void commit() {
#if defined(TRIDENT_WGMMA_PTX)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#elif defined(TRIDENT_CUDA_EMULATION)
  ::cuda_emu::commit_warpgroup_products();
#endif
}
// Waits until at most kInFlight committed groups are unfinished.
template <int kInFlight>
TRIDENT_MMA_DEVICE void wait() {
#if defined(TRIDENT_WGMMA_PTX)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kInFlight) : "memory");
#elif defined(TRIDENT_CUDA_EMULATION)
  ::cuda_emu::wait_warpgroup_products(kInFlight);
#endif
}
// This thread's ordinary writes to shared memory made visible to the async proxy (wgmma's
// reads); a barrier then makes every thread's so.
TRIDENT_MMA_DEVICE void fence_shared_for_async() {
#if defined(TRIDENT_WGMMA_PTX)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Keeps the compiler from moving reads or writes of the accumulators across this point (the
// products write them behind its back until wait()).
TRIDENT_MMA_DEVICE void fence_operands(float (&d)[8][4]) {
#if defined(TRIDENT_WGMMA_PTX)
  for (int j = 0; j < 8; j++) {
    for (int i = 0; i < 4; i++) asm volatile("" : "+f"(d[j][i])::"memory");
  }
#else
  (void)d;
#endif
}

}  // namespace trident::kernels::cuda::wgmma

#undef TRIDENT_WGMMA_ACCUMULATORS
#undef TRIDENT_WGMMA_ACCUMULATOR_OPERANDS
#undef TRIDENT_WGMMA_SHARED
#undef TRIDENT_WGMMA_REGISTERS
