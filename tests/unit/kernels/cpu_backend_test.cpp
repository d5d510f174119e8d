// CpuBackend itself: banner, aligned allocation, memory helpers.
#include <gtest/gtest.h>

#include <cstdint>
#include <new>
#include <vector>

#include "kernels/cpu/cpu_backend.h"              // CpuBackend
#include "kernels/out_of_memory.h"                // OutOfMemory
#include "tests/unit/kernels/kernel_test_util.h"  // kTestThreads

namespace trident::kernels::test {
namespace {

TEST(CpuBackend, NameAndDeviceDescribeTheBackend) {
  cpu::CpuBackend backend(kTestThreads);
  EXPECT_EQ(backend.name(), "cpu (OpenBLAS, 2 threads)");
  EXPECT_EQ(backend.device(), Device::kCpu);
  EXPECT_EQ(backend.threads(), 2);
  EXPECT_EQ(make_backend(Device::kCpu, kTestThreads)->name(), "cpu (OpenBLAS, 2 threads)");
}

// What trident check counts without a backend (native_16bit_kernels) is what the backends
// claim: the CPU nothing; CUDA every family, with either attention kernel (the GEMM path's
// products read 16 bits too: kernels/cuda/attention_schedule.h). The CUDA backend's own answer
// is compared with it in tests/gpu.
TEST(CpuBackend, ComputesOnFp32OnlyAsNative16BitKernelsSays) {
  EXPECT_EQ(make_backend(Device::kCpu, kTestThreads)->native_16bit(), native_16bit_kernels(Device::kCpu));
  EXPECT_FALSE(native_16bit_kernels(Device::kCpu).any());
}

TEST(Native16BitKernels, CudaClaimsEveryFamilyWithEitherAttentionKernel) {
  EXPECT_EQ(native_16bit_kernels(Device::kCuda), Native16BitKernels::all());
  BackendOptions flash;
  flash.attention = AttentionKernel::kFlash;
  EXPECT_EQ(native_16bit_kernels(Device::kCuda, flash), Native16BitKernels::all());
  EXPECT_FALSE(native_16bit_kernels(Device::kCpu, flash).any());
}

TEST(CpuBackend, RejectsNonPositiveThreadCount) {
  EXPECT_THROW(cpu::CpuBackend backend(0), std::invalid_argument);
}

TEST(CpuBackend, AllocationsAre64ByteAlignedForAnySize) {
  cpu::CpuBackend backend(kTestThreads);
  for (const std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{17}, std::size_t{1000}}) {
    float* p = backend.allocate(count);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u) << count << " floats";
    backend.release(p);
    int32_t* t = backend.allocate_tokens(count);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t) % 64, 0u) << count << " tokens";
    backend.release_tokens(t);
  }
}

// An allocation no machine can serve (4 PiB, beyond a 47-bit address space) fails as
// std::bad_alloc, and says which memory and how much.
TEST(CpuBackend, FailedAllocationSaysWhatRanOut) {
  cpu::CpuBackend backend(kTestThreads);
  const std::size_t floats = std::size_t{1} << 50;
  EXPECT_THROW(backend.allocate(floats), std::bad_alloc);
  try {
    backend.allocate(floats);
    ADD_FAILURE() << "a 4 PiB allocation succeeded";
  } catch (const OutOfMemory& e) {
    EXPECT_STREQ(e.what(), "out of host memory: an allocation of 4294967296.0 MiB failed");
  }
}

TEST(CpuBackend, CopiesAndZeroFillRoundTrip) {
  cpu::CpuBackend backend(kTestThreads);
  const std::vector<float> host{1.0f, -2.0f, 3.5f};
  float* dev = backend.allocate(host.size());
  backend.copy_to_device(dev, host.data(), host.size());
  std::vector<float> back(host.size());
  backend.copy_to_host(back.data(), dev, host.size());
  EXPECT_EQ(back, host);
  backend.fill_zero(dev, host.size());
  backend.copy_to_host(back.data(), dev, host.size());
  EXPECT_EQ(back, std::vector<float>(host.size(), 0.0f));
  backend.release(dev);

  const std::vector<int32_t> tokens{5, 0, 50256};
  int32_t* dev_tokens = backend.allocate_tokens(tokens.size());
  backend.copy_tokens_to_device(dev_tokens, tokens.data(), tokens.size());
  EXPECT_EQ(std::vector<int32_t>(dev_tokens, dev_tokens + tokens.size()), tokens);
  backend.release_tokens(dev_tokens);
}

}  // namespace
}  // namespace trident::kernels::test
