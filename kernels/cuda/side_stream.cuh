// A second stream beside the compute stream, with a cuBLAS handle of its own, for work that may
// overlap the compute stream's (the CUDA backend's matmul backward under
// run.matmul_backward_streams = two: the weight and bias gradients beside the input gradient).
//
// fork() makes the side stream wait for everything queued on the compute stream so far (so its
// work reads what that work wrote); join() makes the compute stream wait for everything queued on
// the side stream so far (so later compute work, copies and syncs of the compute stream cover it).
// Work queued between a fork and a join must neither write what the compute stream's work of the
// same interval reads or writes, nor read what it writes.
//
// The handle is the side stream's alone: cuBLAS keeps its results bit for bit from run to run
// when each concurrently used stream has a handle of its own (cuBLAS's "Results reproducibility":
// one handle switched between streams may pick other internal workspaces and kernels). The side
// stream is non-blocking, so that nothing on the legacy default stream orders it implicitly: only
// join() does.
#pragma once

#include <cublas_v2.h>     // cublasHandle_t, cublasMath_t
#include <cuda_runtime.h>  // cudaStream_t, cudaEvent_t

namespace trident::kernels::cuda {

class SideStream {
 public:
  // Creates the stream, its handle (in `math`, as the compute stream's handle) and two events on
  // the current device. Throws std::runtime_error (CUDA_CHECK, CUBLAS_CHECK) when one cannot be made.
  SideStream(cudaStream_t compute, cublasMath_t math);
  ~SideStream();  // waits for the side stream's work
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  cudaStream_t stream() const { return side_; }
  cublasHandle_t cublas() const { return cublas_; }
  // The side handle's math mode, kept equal to the compute stream's handle's.
  void set_math_mode(cublasMath_t math);

  void fork();
  void join();

 private:
  cudaStream_t compute_;
  cudaStream_t side_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudaEvent_t forked_ = nullptr;  // recorded on compute_, waited for by side_
  cudaEvent_t joined_ = nullptr;  // recorded on side_, waited for by compute_
};

}  // namespace trident::kernels::cuda
