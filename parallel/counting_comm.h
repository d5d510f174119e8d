// CountingComm: a Comm that forwards to another and adds up, per group, the payload bytes each
// rank hands to its collectives and point-to-point calls, and the wall time spent inside them
// (for non-blocking calls: the time spent waiting). The trainer reports them per step, against
// the analytic counts of docs/parallelism.md. Bytes are payload (count x 4, or x 2 for 16-bit
// activations and gradients reduced in 16 bits), not the bytes on the network, which depend on
// the library's algorithm.
#pragma once

#include <chrono>
#include <memory>

#include "parallel/comm.h"

namespace trident::parallel {

struct CommStats {
  double bytes = 0.0;
  double seconds = 0.0;
  long calls = 0;
};

class CountingComm final : public Comm {
 public:
  explicit CountingComm(std::unique_ptr<Comm> inner) : inner_(std::move(inner)) {}
  const CommStats& stats() const { return stats_; }
  // Puts a decorator between the counting and the communicator (e.g. host staging), so the
  // counts stay those of the group's calls.
  template <class Wrap>
  void wrap_inner(Wrap&& wrap) {
    inner_ = wrap(std::move(inner_));
  }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }
  CommBufferBytes buffer_bytes() const override { return inner_->buffer_bytes(); }

  void all_reduce_sum(kernels::ActPtr d, std::size_t n) override {
    timed(d.bytes(n), [&] { inner_->all_reduce_sum(d, n); });
  }
  void all_reduce_sum(double* d, std::size_t n) override { timed(n * 8, [&] { inner_->all_reduce_sum(d, n); }); }
  std::unique_ptr<CommRequest> iall_reduce_sum(float* d, std::size_t n, WirePrecision wire) override;
  std::unique_ptr<CommRequest> ireduce_sum(float* d, std::size_t n, int root, WirePrecision wire) override;
  int all_reduce_max(int v) override {
    int r = 0;
    timed(4, [&] { r = inner_->all_reduce_max(v); });
    return r;
  }
  void all_reduce_max(float* d, std::size_t n) override { timed(n * 4, [&] { inner_->all_reduce_max(d, n); }); }
  void reduce_scatter_sum(kernels::ConstActPtr s, kernels::ActPtr r, std::size_t n) override {
    timed(s.bytes(n) * static_cast<std::size_t>(size()), [&] { inner_->reduce_scatter_sum(s, r, n); });
  }
  void all_gather(kernels::ConstActPtr s, kernels::ActPtr r, std::size_t n) override {
    timed(s.bytes(n), [&] { inner_->all_gather(s, r, n); });
  }
  void reduce_scatter_sum_in_place(kernels::ActPtr d, std::size_t n, WirePrecision wire) override {
    timed(n * kernels::precision_bytes(in_place_wire(d, wire)) * static_cast<std::size_t>(size()),
          [&] { inner_->reduce_scatter_sum_in_place(d, n, wire); });
  }
  void all_gather_in_place(kernels::ActPtr d, std::size_t n) override {
    timed(d.bytes(n), [&] { inner_->all_gather_in_place(d, n); });
  }
  void broadcast(void* d, std::size_t bytes, int root) override {
    timed(bytes, [&] { inner_->broadcast(d, bytes, root); });
  }
  // Counted at the root only: what each rank hands over, as all_gather_in_place counts its own
  // block, so that ZeRO-1's parameter gather counts the same payload whichever form it takes.
  std::unique_ptr<CommRequest> ibroadcast(kernels::ActPtr d, std::size_t n, int root) override;
  void send(kernels::ConstActPtr d, std::size_t n, int peer) override {
    timed(d.bytes(n), [&] { inner_->send(d, n, peer); });
  }
  void recv(kernels::ActPtr d, std::size_t n, int peer) override { timed(0, [&] { inner_->recv(d, n, peer); }); }
  void barrier() override { timed(0, [&] { inner_->barrier(); }); }

  // Used by the counting request of a non-blocking call.
  void add_wait(double seconds) { stats_.seconds += seconds; }

 private:
  template <typename F>
  void timed(std::size_t bytes, F&& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    stats_.bytes += static_cast<double>(bytes);
    ++stats_.calls;
  }
  std::unique_ptr<Comm> inner_;
  CommStats stats_;
};

}  // namespace trident::parallel
