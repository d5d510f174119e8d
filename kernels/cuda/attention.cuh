// Causal multi-head self-attention on the device, the GEMM path (GPT-2 layout: qkv[B,T,3C],
// heads side by side; forward keeps out and the row log-sum-exp lse[B,NH,T], backward recomputes
// the probabilities). The contract is Backend's (kernels/backend.h). Launchers queue on
// `stream`, which must be the stream of `cublas`.
#pragma once

#include <cublas_v2.h>     // cublasHandle_t
#include <cuda_runtime.h>  // cudaStream_t

#include <cstddef>

#include "kernels/act_ptr.h"  // ActPtr, ConstActPtr

namespace trident::kernels::cuda {

// qkv, out, dout and dqkv are fp32, or all 16-bit of one format (read as they are, products
// accumulated in fp32 on the tensor cores, each stored value rounded once; the probabilities and
// the score gradient between the products are rounded to the same format:
// attention_schedule.h says why and what it costs); lse and the scratch are fp32.

// How the products run (attention_schedule.h). CudaBackend passes the deck's choice
// (run.attention_blocks, run.attention_batching), the defaults unless a deck asks; perf/kernels'
// attention variants and perf/gpu_bench.sh time the others, and a GPU's measurements choose the
// defaults. Forward and backward must be given the same options for backward's recomputed
// scores to have forward's bits.
struct GemmAttentionOptions {
  // null: each product min(B, NH) strided batched cuBLAS calls (per causal block); or device
  // room for attention_matrix_pointers(B, NH) pointers (8-byte aligned, as cudaMalloc's are),
  // contents undefined on entry and exit: then each product whose matrices all start on 16
  // bytes is one pointer-array batched call (attention variant 6).
  void** matrix_pointers = nullptr;
  // Causal row blocks: 1, each product over the full T x T square; k, each product per block
  // of about T / k queries (whole groups of 8 rows: attention_schedule.h) against the keys below
  // the block's end, about (k - 1) / 2k of the square left out for k times the calls (attention
  // variants 7 and 8: 2 and 4).
  int causal_blocks = 1;
};

// out[B,T,C] = softmax(q k^T / sqrt(hs), causal) v per head, hs = C / NH; lse[B,NH,T] gets the
// log-sum-exp of each row of scaled scores over its causal columns. scratch:
// attention_scratch_size(B,T,NH) floats, contents undefined on entry and exit.
void attention_forward(ActPtr out, float* lse, float* scratch, ConstActPtr qkv, int B, int T, int C, int NH,
                       cublasHandle_t cublas, cudaStream_t stream, const GemmAttentionOptions& options = {});

// dqkv[B,T,3C] = gradient w.r.t. qkv (overwritten), recomputing the probabilities from qkv and lse.
// scratch as for forward.
void attention_backward(ActPtr dqkv, float* scratch, ConstActPtr dout, ConstActPtr qkv, const float* lse, int B,
                        int T, int C, int NH, cublasHandle_t cublas, cudaStream_t stream,
                        const GemmAttentionOptions& options = {});

// Two T x T fp32 slots per (batch, head): attention_schedule.h's regions A and B.
std::size_t attention_scratch_size(int B, int T, int NH);

// Device pointers a pointer-array product needs: one per matrix of A, B and C (3 B NH).
std::size_t attention_matrix_pointers(int B, int NH);

}  // namespace trident::kernels::cuda
