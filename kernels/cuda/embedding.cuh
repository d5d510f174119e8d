// Token + position embedding on the device, vocabulary-parallel as Backend specifies
// (kernels/backend.h). Launchers queue on `stream`.
#pragma once

#include <cuda_runtime.h>  // cudaStream_t

#include <cstddef>
#include <cstdint>

#include "kernels/act_ptr.h"  // ActPtr, ConstActPtr

namespace trident::kernels::cuda {

// out, wte, wpe and dout are fp32, or all 16-bit of one format (read as they are, the sum
// rounded once when stored); std::logic_error if they mix. dwte and dwpe are fp32.

// out[b,t,:] = (owned tok ? wte[tok - vocab_begin,:] : 0) + (wpe ? wpe[t,:] : 0).
void embedding_forward(ActPtr out, const int32_t* tokens, ConstActPtr wte, ConstActPtr wpe, int B, int T, int C,
                       int vocab_begin, int vocab_end, cudaStream_t stream);

// dwte[tok - vocab_begin,:] += dout[b,t,:] for owned tokens; dwpe[t,:] += sum_b dout[b,t,:]
// when dwpe is not null. scratch: embedding_backward_scratch_bytes(B * T) bytes of device
// workspace (the sort of the positions by token), 256-byte aligned; contents undefined on entry
// and on exit.
void embedding_backward(float* dwte, float* dwpe, ConstActPtr dout, const int32_t* tokens, int B, int T, int C,
                        int vocab_begin, int vocab_end, void* scratch, cudaStream_t stream);
std::size_t embedding_backward_scratch_bytes(int positions);

}  // namespace trident::kernels::cuda
