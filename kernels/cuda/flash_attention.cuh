// Flash attention on the device: causal multi-head self-attention under the Backend contract
// (kernels/backend.h), with nothing T x T in global memory. The alternative to the GEMM path of
// kernels/cuda/attention.cuh, chosen by run.attention = flash. Launchers queue on `stream`.
#pragma once

#include <cuda_runtime.h>  // cudaStream_t

#include <cstddef>

#include "kernels/act_ptr.h"                  // ActPtr, ConstActPtr
#include "kernels/cuda/flash_attention_mma.cuh"  // FlashMmaOptions

namespace trident::kernels::cuda {

// The head sizes the kernels handle: hs = C / NH = 64 (every GPT-2 size).
bool flash_attention_supported(int C, int NH);

// qkv, out, dout and dqkv are fp32 (scalar fp32 kernels), or all 16-bit of one format: read as
// they are by the tensor-core kernels (flash_attention_mma.cuh; P and dS rounded to the format as
// operands, fp32 accumulation, each stored value rounded once). lse and the scratch are fp32.
// `mma`: those kernels' speed options (flash_attention_mma.cuh; the playground times them).

// out[B,T,C] and lse[B,NH,T] from qkv[B,T,3C], as attention_forward; needs no scratch.
// Requires flash_attention_supported(C, NH) (std::logic_error otherwise).
void flash_attention_forward(ActPtr out, float* lse, ConstActPtr qkv, int B, int T, int C, int NH,
                             cudaStream_t stream, const FlashMmaOptions& mma = {});

// dqkv = gradient w.r.t. qkv (overwritten) from dout and the forward's out and lse: the arguments of
// Backend::attention_backward, in its order. scratch: flash_attention_scratch_size(B, T, NH, mma.dq)
// floats, 16-byte aligned (the row statistic D = rowsum(dout * out); with dQ in the key walk, the
// dQ sums after it).
void flash_attention_backward(ActPtr dqkv, float* scratch, ConstActPtr dout, ConstActPtr qkv, ConstActPtr out,
                              const float* lse, int B, int T, int C, int NH, cudaStream_t stream,
                              const FlashMmaOptions& mma = {});

// The most dynamic shared memory one block of the flash kernels asks for (the dK/dV kernel:
// 66,560 bytes, above the default 48 KiB, opted in at launch). GPUs before sm_80 allow less
// per block (sm_75: 64 KiB); the backend refuses flash attention there when it is built.
std::size_t flash_attention_shared_bytes();

// B * NH * T floats: one per (batch, head, query row); with dQ in the key walk, the dQ sums
// after them (kernels::flash_attention_scratch_floats).
std::size_t flash_attention_scratch_size(int B, int T, int NH, FlashDq dq = FlashDq::kSeparateWalk);

}  // namespace trident::kernels::cuda
