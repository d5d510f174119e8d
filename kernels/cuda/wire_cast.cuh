// Casts between float buffers and their 16-bit encodings on the device: the wire of gradient
// reductions in bf16 or fp16 (parallel.grad_reduce; parallel/nccl packs a bucket, reduces it
// with NCCL in the 16-bit type, and unpacks the sum). The bit patterns are those of
// kernels/precision.h's encode_16bit / decode_16bit (IEEE round-to-nearest-even; NaNs stay NaNs,
// with the device's canonical NaN pattern). Launchers queue on `stream`.
#pragma once

#include <cuda_runtime.h>  // cudaStream_t

#include <cstddef>
#include <cstdint>

#include "kernels/precision.h"

namespace trident::kernels::cuda {

// wire[i] = the bf16 or fp16 bit pattern of src[i] rounded; precision kBf16 or kFp16.
void encode_16bit(uint16_t* wire, const float* src, std::size_t n, Precision precision, cudaStream_t stream);
// dst[i] = the value of wire[i], exactly.
void decode_16bit(float* dst, const uint16_t* wire, std::size_t n, Precision precision, cudaStream_t stream);

}  // namespace trident::kernels::cuda
