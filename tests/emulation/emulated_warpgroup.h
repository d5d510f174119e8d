// wgmma's asynchrony in the CUDA emulation: the products a thread has issued and not yet waited
// for (kernels/cuda/warpgroup_mma.cuh's model makes them, emulated_grid.cpp keeps one queue per
// thread). On the GPU a product runs between its issue and the wgmma::wait that covers its group,
// reading its shared operands and writing its accumulators at times the kernel cannot know. So a
// kernel must not read or write the accumulators, nor write the shared memory the product reads,
// in between. The model finishes each product at that wait, the latest time the GPU could, and
// holds the kernel to it:
// - the accumulators hold a NaN from the issue to the wait (kUnfinished), so a kernel that reads
//   them early computes NaNs, and one that writes them early is reported at the wait;
// - the shared memory the issue read is read again at the wait, and a change is reported;
// - a product issued with no wgmma::fence since the thread's last wait (or its start), a wait with
//   products issued since the last commit, and a thread that returns with products unfinished are
//   reported.
// Products on the same accumulators chain in issue order, as the GPU runs them.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/emulation/cuda_emulation.h"

namespace cuda_emu {

class WarpgroupQueue {
 public:
  // Each returns "" when the kernel kept the rules above, else what it did.
  void fence() { fenced_ = true; }
  std::string record(const WarpgroupProduct& product);
  std::string commit();
  std::string wait(int in_flight);
  std::string at_return() const;

  // The bits the accumulators hold while their product is unfinished: a quiet NaN.
  static constexpr std::uint32_t kUnfinished = 0x7fc0ffeeu;

 private:
  struct Pending {
    WarpgroupProduct product;
    long group;  // -1 until committed
  };
  // The values a thread's accumulators will hold once their unfinished products are done.
  struct Running {
    float* d;
    std::array<float, 32> values;
    int unfinished;
  };
  std::string finish(const WarpgroupProduct& product);

  std::vector<Pending> pending_;
  std::vector<Running> running_;
  long committed_ = 0;  // groups committed so far
  bool fenced_ = false;
};

}  // namespace cuda_emu
