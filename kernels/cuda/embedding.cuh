// Token + position embedding on the device, vocabulary-parallel as Backend specifies
// (kernels/backend.h). Launchers queue on `stream`.
#pragma once

#include <cuda_runtime.h>  // cudaStream_t

#include <cstdint>

namespace trident::kernels::cuda {

// out[b,t,:] = (owned tok ? wte[tok - vocab_begin,:] : 0) + (wpe ? wpe[t,:] : 0).
void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B,
                       int T, int C, int vocab_begin, int vocab_end, cudaStream_t stream);

// dwte[tok - vocab_begin,:] += dout[b,t,:] for owned tokens; dwpe[t,:] += sum_b dout[b,t,:]
// when dwpe is not null.
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B,
                        int T, int C, int vocab_begin, int vocab_end, cudaStream_t stream);

}  // namespace trident::kernels::cuda
