// wgmma's asynchrony in the CUDA emulation (emulated_warpgroup.h says what is modelled and why).
// Compiled without the sanitizers, as the scheduler that owns the queues (CMakeLists.txt): the
// race checker sees a product's reads of shared memory at its issue, in the kernel's own code.
#include "tests/emulation/emulated_warpgroup.h"

#include <algorithm>
#include <cstring>

namespace cuda_emu {

std::string WarpgroupQueue::record(const WarpgroupProduct& product) {
  if (!fenced_) return "issued a wgmma product with no wgmma::fence since its last wgmma::wait (or its start)";
  const auto it = std::find_if(running_.begin(), running_.end(), [&](const Running& r) { return r.d == product.d; });
  if (it == running_.end()) {
    Running r{product.d, {}, 1};
    std::memcpy(r.values.data(), product.d, sizeof r.values);
    running_.push_back(r);
    for (int i = 0; i < 32; ++i) std::memcpy(product.d + i, &kUnfinished, sizeof kUnfinished);
  } else {
    ++it->unfinished;  // chained after the products already on these accumulators
  }
  pending_.push_back(Pending{product, -1});
  return "";
}

std::string WarpgroupQueue::commit() {
  for (Pending& p : pending_) {
    if (p.group < 0) p.group = committed_;
  }
  ++committed_;  // a group with no product is a group too (wgmma.commit_group)
  return "";
}

std::string WarpgroupQueue::wait(int in_flight) {
  fenced_ = false;
  if (!pending_.empty() && pending_.back().group < 0) {
    return "waited (wgmma::wait) with wgmma products issued since its last wgmma::commit";
  }
  const long until = committed_ - in_flight;
  std::size_t done = 0;
  for (; done < pending_.size() && pending_[done].group < until; ++done) {
    const std::string error = finish(pending_[done].product);
    if (!error.empty()) return error;
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(done));
  return "";
}

std::string WarpgroupQueue::finish(const WarpgroupProduct& product) {
  for (int i = 0; i < product.reads; ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, shared_window_pointer(product.read_address[i], sizeof bits), sizeof bits);
    if (bits != product.read_bits[i]) {
      return "wrote shared memory (window address " + std::to_string(product.read_address[i]) +
             ") that a wgmma product reads, between the product's issue and its wgmma::wait";
    }
  }
  const auto it = std::find_if(running_.begin(), running_.end(), [&](const Running& r) { return r.d == product.d; });
  if (!product.accumulate) it->values.fill(0.0f);
  product.finish(product, it->values.data());
  if (--it->unfinished > 0) return "";
  for (int i = 0; i < 32; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, product.d + i, sizeof bits);
    if (bits != kUnfinished) {
      return "wrote a wgmma product's accumulators between its issue and its wgmma::wait";
    }
  }
  std::memcpy(product.d, it->values.data(), sizeof it->values);
  running_.erase(it);
  return "";
}

std::string WarpgroupQueue::at_return() const {
  return pending_.empty() ? "" : "returned with wgmma products it never waited for (wgmma::wait)";
}

}  // namespace cuda_emu
