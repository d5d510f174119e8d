#include "kernels/cuda/side_stream.cuh"

#include "kernels/cuda/cuda_check.h"  // CUDA_CHECK, CUBLAS_CHECK

namespace trident::kernels::cuda {

SideStream::SideStream(cudaStream_t compute, cublasMath_t math) : compute_(compute) {
  CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  try {
    CUBLAS_CHECK(cublasCreate(&cublas_));
    CUBLAS_CHECK(cublasSetStream(cublas_, side_));
    CUBLAS_CHECK(cublasSetMathMode(cublas_, math));
    // Events only order the streams: no timing, so recording them costs the least.
    CUDA_CHECK(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&joined_, cudaEventDisableTiming));
  } catch (...) {
    if (forked_ != nullptr) cudaEventDestroy(forked_);
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    cudaStreamDestroy(side_);
    throw;
  }
}

SideStream::~SideStream() {
  // Never throws: errors here are of earlier work, already reported.
  (void)cudaStreamSynchronize(side_);
  (void)cudaEventDestroy(joined_);
  (void)cudaEventDestroy(forked_);
  (void)cublasDestroy(cublas_);
  (void)cudaStreamDestroy(side_);
  (void)cudaGetLastError();
}

void SideStream::set_math_mode(cublasMath_t math) { CUBLAS_CHECK(cublasSetMathMode(cublas_, math)); }

// An event may be recorded again as soon as the waits on its last record are queued: a queued
// wait keeps the record it was given.
void SideStream::fork() {
  CUDA_CHECK(cudaEventRecord(forked_, compute_));
  CUDA_CHECK(cudaStreamWaitEvent(side_, forked_, 0));
}

void SideStream::join() {
  CUDA_CHECK(cudaEventRecord(joined_, side_));
  CUDA_CHECK(cudaStreamWaitEvent(compute_, joined_, 0));
}

}  // namespace trident::kernels::cuda
