// 16-bit wire casts: grid-stride elementwise loops (launch_shape.cuh) over the device's own
// conversions, __float2bfloat16_rn and __float2half_rn, which round to nearest, ties to even,
// as the CPU's encode_16bit does (tests/gpu checks them bit for bit on non-NaN values).
#include <cuda_bf16.h>  // __float2bfloat16_rn, __bfloat16_as_ushort
#include <cuda_fp16.h>  // __float2half_rn, __half_as_ushort

#include "kernels/cuda/cuda_check.h"      // CUDA_CHECK_LAUNCH
#include "kernels/cuda/launch_shape.cuh"  // elementwise_blocks, grid_first_index, grid_stride
#include "kernels/cuda/wire_cast.cuh"

namespace trident::kernels::cuda {

namespace {

__global__ void encode_bf16_kernel(uint16_t* wire, const float* src, std::size_t n) {
  for (std::size_t i = grid_first_index(); i < n; i += grid_stride()) {
    wire[i] = __bfloat16_as_ushort(__float2bfloat16_rn(src[i]));
  }
}

__global__ void encode_fp16_kernel(uint16_t* wire, const float* src, std::size_t n) {
  for (std::size_t i = grid_first_index(); i < n; i += grid_stride()) wire[i] = __half_as_ushort(__float2half_rn(src[i]));
}

__global__ void decode_bf16_kernel(float* dst, const uint16_t* wire, std::size_t n) {
  for (std::size_t i = grid_first_index(); i < n; i += grid_stride()) dst[i] = __bfloat162float(__ushort_as_bfloat16(wire[i]));
}

__global__ void decode_fp16_kernel(float* dst, const uint16_t* wire, std::size_t n) {
  for (std::size_t i = grid_first_index(); i < n; i += grid_stride()) dst[i] = __half2float(__ushort_as_half(wire[i]));
}

}  // namespace

void encode_16bit(uint16_t* wire, const float* src, std::size_t n, Precision precision, cudaStream_t stream) {
  if (n == 0) return;
  if (precision == Precision::kFp16) {
    encode_fp16_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(wire, src, n);
  } else {
    encode_bf16_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(wire, src, n);
  }
  CUDA_CHECK_LAUNCH();
}

void decode_16bit(float* dst, const uint16_t* wire, std::size_t n, Precision precision, cudaStream_t stream) {
  if (n == 0) return;
  if (precision == Precision::kFp16) {
    decode_fp16_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(dst, wire, n);
  } else {
    decode_bf16_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(dst, wire, n);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace trident::kernels::cuda
