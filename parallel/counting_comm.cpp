#include "parallel/counting_comm.h"

namespace trident::parallel {

namespace {

// Times the waits of a non-blocking call into its CountingComm.
class CountingRequest final : public CommRequest {
 public:
  CountingRequest(std::unique_ptr<CommRequest> inner, CountingComm& owner)
      : inner_(std::move(inner)), owner_(owner) {}
  void wait() override {
    const auto start = std::chrono::steady_clock::now();
    inner_->wait();
    owner_.add_wait(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  bool test() override { return inner_->test(); }

 private:
  std::unique_ptr<CommRequest> inner_;
  CountingComm& owner_;
};

}  // namespace

std::unique_ptr<CommRequest> CountingComm::iall_reduce_sum(float* d, std::size_t n, WirePrecision wire) {
  std::unique_ptr<CommRequest> inner;
  timed(n * kernels::precision_bytes(wire), [&] { inner = inner_->iall_reduce_sum(d, n, wire); });
  return std::make_unique<CountingRequest>(std::move(inner), *this);
}

std::unique_ptr<CommRequest> CountingComm::ireduce_sum(float* d, std::size_t n, int root, WirePrecision wire) {
  std::unique_ptr<CommRequest> inner;
  timed(n * kernels::precision_bytes(wire), [&] { inner = inner_->ireduce_sum(d, n, root, wire); });
  return std::make_unique<CountingRequest>(std::move(inner), *this);
}

std::unique_ptr<CommRequest> CountingComm::ibroadcast(kernels::ActPtr d, std::size_t n, int root) {
  std::unique_ptr<CommRequest> inner;
  timed(rank() == root ? d.bytes(n) : 0, [&] { inner = inner_->ibroadcast(d, n, root); });
  return std::make_unique<CountingRequest>(std::move(inner), *this);
}

}  // namespace trident::parallel
