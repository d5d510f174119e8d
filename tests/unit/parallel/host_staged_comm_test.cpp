// HostStagedComm (parallel/host_staged_comm.h): device buffers reach the inner communicator as
// host copies and the results come back; host buffers pass through untouched. "Device" memory
// is faked as one arena, and the inner communicator as rank 0 of a group of two whose other
// rank holds the same data (so a sum doubles).
#include "parallel/host_staged_comm.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

namespace trident::parallel {
namespace {

class FakeDevice final : public DeviceMemory {
 public:
  std::vector<float> arena = std::vector<float>(64, 0.0f);
  int copies_in = 0, copies_out = 0;
  bool is_device_memory(const void* p) const override {
    const auto* f = static_cast<const float*>(p);
    return f >= arena.data() && f < arena.data() + arena.size();
  }
  void copy_to_host(float* host, const float* device, std::size_t n) override {
    EXPECT_TRUE(is_device_memory(device));
    EXPECT_FALSE(is_device_memory(host));
    std::memcpy(host, device, n * sizeof(float));
    ++copies_in;
  }
  void copy_to_device(float* device, const float* host, std::size_t n) override {
    EXPECT_TRUE(is_device_memory(device));
    std::memcpy(device, host, n * sizeof(float));
    ++copies_out;
  }
  void copy_bytes_to_host(void* host, const void* device, std::size_t bytes) override {
    EXPECT_TRUE(is_device_memory(device));
    std::memcpy(host, device, bytes);
    ++copies_in;
  }
  void copy_bytes_to_device(void* device, const void* host, std::size_t bytes) override {
    EXPECT_TRUE(is_device_memory(device));
    std::memcpy(device, host, bytes);
    ++copies_out;
  }
  // The staging decorator keeps its copies on the host: it never asks for device memory.
  float* allocate_device(std::size_t) override {
    ADD_FAILURE() << "HostStagedComm allocated device memory";
    return nullptr;
  }
  void release_device(float*) override { ADD_FAILURE() << "HostStagedComm released device memory"; }
};

// Rank 0 of two identical ranks. Fails the test if it is handed device memory.
class TwinComm final : public Comm {
 public:
  explicit TwinComm(const FakeDevice& device) : device_(device) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  const std::string& name() const override { return name_; }
  void all_reduce_sum(kernels::ActPtr d, std::size_t n) override {
    host(d.get());
    for (std::size_t i = 0; i < n; ++i) set(d, i, 2 * get(d, i));
  }
  void all_reduce_sum(double* d, std::size_t n) override {
    for (std::size_t i = 0; i < n; ++i) d[i] *= 2;
  }
  std::unique_ptr<CommRequest> iall_reduce_sum(float* d, std::size_t n, WirePrecision wire) override {
    return doubling(d, n, wire, true);
  }
  // Rank 0 receives the sum only as the root; as another rank's contributor its values stay.
  std::unique_ptr<CommRequest> ireduce_sum(float* d, std::size_t n, int root, WirePrecision wire) override {
    return doubling(d, n, wire, root == 0);
  }
  int all_reduce_max(int v) override { return v; }
  void all_reduce_max(float* d, std::size_t) override { host(d); }
  void reduce_scatter_sum(kernels::ConstActPtr s, kernels::ActPtr r, std::size_t n) override {
    host(s.get());
    host(r.get());
    for (std::size_t i = 0; i < n; ++i) set(r, i, 2 * get(s, i));  // rank 0's block
  }
  void all_gather(kernels::ConstActPtr s, kernels::ActPtr r, std::size_t n) override {
    host(s.get());
    host(r.get());
    for (std::size_t i = 0; i < n; ++i) {
      set(r, i, get(s, i));
      set(r, n + i, get(s, i));
    }
  }
  void reduce_scatter_sum_in_place(kernels::ActPtr d, std::size_t n, WirePrecision wire) override {
    host(d.get());
    last_wire = wire;
    for (std::size_t i = 0; i < n; ++i) set(d, i, 2 * get(d, i));
  }
  void all_gather_in_place(kernels::ActPtr d, std::size_t n) override {
    host(d.get());
    for (std::size_t i = 0; i < n; ++i) set(d, n + i, get(d, i));
  }
  // From rank 1 (the twin), bytes 0xA5 arrive; from rank 0 the buffer is this rank's own.
  void broadcast(void* d, std::size_t bytes, int root) override {
    host(d);
    if (root != 0) std::memset(d, 0xA5, bytes);
  }
  void send(kernels::ConstActPtr d, std::size_t n, int) override {
    host(d.get());
    const auto* bytes = static_cast<const unsigned char*>(d.get());
    sent_bytes.assign(bytes, bytes + d.bytes(n));
    if (d.is_fp32()) sent.assign(d.f32(), d.f32() + n);
  }
  void recv(kernels::ActPtr d, std::size_t n, int) override {
    host(d.get());
    for (std::size_t i = 0; i < n; ++i) {
      if (d.is_fp32()) {
        d.f32()[i] = 7.0f;
      } else {
        d.bits16()[i] = static_cast<uint16_t>(0x4000u + i);
      }
    }
  }
  void barrier() override {}
  std::vector<float> sent;
  std::vector<unsigned char> sent_bytes;
  WirePrecision last_wire = WirePrecision::kFp32;
  const float* last_nonblocking_host = nullptr;  // the host buffer of the last non-blocking call

 private:
  void host(const void* p) const { EXPECT_FALSE(device_.is_device_memory(p)) << "device memory reached MPI"; }
  // A non-blocking sum of two equal ranks: d[n] doubles at the wait where this rank receives.
  std::unique_ptr<CommRequest> doubling(float* d, std::size_t n, WirePrecision wire, bool receives) {
    host(d);
    last_wire = wire;
    last_nonblocking_host = d;
    struct Doubling final : CommRequest {
      float* d;
      std::size_t n;
      bool receives;
      bool done = false;
      void wait() override {
        if (done) return;
        if (receives) {
          for (std::size_t i = 0; i < n; ++i) d[i] *= 2;
        }
        done = true;
      }
      bool test() override {
        wait();
        return true;
      }
    };
    auto r = std::make_unique<Doubling>();
    r->d = d;
    r->n = n;
    r->receives = receives;
    return r;
  }
  // Element i of an fp32 or 16-bit buffer, as a float.
  static float get(kernels::ConstActPtr p, std::size_t i) {
    return p.is_fp32() ? p.f32()[i] : kernels::decode_16bit(p.bits16()[i], p.storage());
  }
  static void set(kernels::ActPtr p, std::size_t i, float v) {
    if (p.is_fp32()) {
      p.f32()[i] = v;
    } else {
      p.bits16()[i] = kernels::encode_16bit(v, p.storage());
    }
  }
  const FakeDevice& device_;
  std::string name_ = "twin";
};

struct Fixture {
  FakeDevice device;
  TwinComm* twin = nullptr;
  std::unique_ptr<HostStagedComm> comm;
  Fixture() {
    auto inner = std::make_unique<TwinComm>(device);
    twin = inner.get();
    comm = std::make_unique<HostStagedComm>(std::move(inner), device);
    for (std::size_t i = 0; i < device.arena.size(); ++i) device.arena[i] = static_cast<float>(i);
  }
  float* at(std::size_t i) { return device.arena.data() + i; }
};

TEST(HostStagedComm, DeviceBuffersAreStagedAndResultsCopiedBack) {
  Fixture f;
  f.comm->all_reduce_sum(f.at(4), 3);
  EXPECT_EQ(f.device.arena[4], 8.0f);
  EXPECT_EQ(f.device.arena[6], 12.0f);
  EXPECT_EQ(f.device.arena[7], 7.0f);  // outside the range: untouched

  f.comm->reduce_scatter_sum(f.at(10), f.at(20), 2);  // send [10, 14), recv [20, 22)
  EXPECT_EQ(f.device.arena[20], 20.0f);
  EXPECT_EQ(f.device.arena[21], 22.0f);

  f.comm->all_gather(f.at(30), f.at(40), 2);  // recv [40, 44)
  EXPECT_EQ(f.device.arena[42], 30.0f);
  EXPECT_EQ(f.device.arena[43], 31.0f);

  f.comm->all_gather_in_place(f.at(50), 2);
  EXPECT_EQ(f.device.arena[52], 50.0f);

  f.comm->reduce_scatter_sum_in_place(f.at(56), 2, WirePrecision::kFp16);  // over [56, 60)
  EXPECT_EQ(f.device.arena[56], 112.0f);
  EXPECT_EQ(f.device.arena[57], 114.0f);
  EXPECT_EQ(f.twin->last_wire, WirePrecision::kFp16);

  f.comm->send(f.at(1), 2, 1);
  EXPECT_EQ(f.twin->sent, (std::vector<float>{1.0f, 2.0f}));
  f.comm->recv(f.at(60), 2, 1);
  EXPECT_EQ(f.device.arena[61], 7.0f);
}

TEST(HostStagedComm, SixteenBitActivationsAreStagedAsTheirBytes) {
  // Pipeline boundaries in bf16: an odd count of 16-bit patterns (not a whole number of floats)
  // leaves and arrives bit for bit, and the bytes next to the buffer are untouched.
  Fixture f;
  const uint16_t patterns[3] = {0x3f80, 0xbf00, 0x7fc1};
  std::memcpy(f.at(4), patterns, sizeof patterns);
  f.comm->send(kernels::ConstActPtr(reinterpret_cast<const uint16_t*>(f.at(4)), kernels::Precision::kBf16), 3, 1);
  ASSERT_EQ(f.twin->sent_bytes.size(), sizeof patterns);
  EXPECT_EQ(std::memcmp(f.twin->sent_bytes.data(), patterns, sizeof patterns), 0);
  f.device.arena[21] = 5.0f;  // bytes 4..7 of the receive range: patterns 2 and 3
  f.comm->recv(kernels::ActPtr(reinterpret_cast<uint16_t*>(f.at(20)), kernels::Precision::kBf16), 3, 1);
  uint16_t received[4];
  std::memcpy(received, f.at(20), sizeof received);
  EXPECT_EQ(received[0], 0x4000u);
  EXPECT_EQ(received[1], 0x4001u);
  EXPECT_EQ(received[2], 0x4002u);
  uint16_t untouched[2];
  const float five = 5.0f;
  std::memcpy(untouched, &five, sizeof untouched);
  EXPECT_EQ(received[3], untouched[1]);  // the fourth pattern is not part of the message
}

TEST(HostStagedComm, SixteenBitCollectivesAreStagedAsTheirBytes) {
  // Tensor parallelism on bf16 activations: odd counts of 16-bit values reach the inner
  // communicator as 16-bit host copies, the results come back, and the 16 bits after each
  // range are untouched.
  Fixture f;
  const auto bf16 = kernels::Precision::kBf16;
  auto at16 = [&](std::size_t float_index) {
    return kernels::ActPtr(reinterpret_cast<uint16_t*>(f.at(float_index)), bf16);
  };
  auto value = [&](kernels::ActPtr p, std::size_t i) { return kernels::decode_16bit(p.bits16()[i], bf16); };
  auto fill = [&](kernels::ActPtr p, std::size_t n, float first) {
    for (std::size_t i = 0; i < n + 1; ++i) p.bits16()[i] = kernels::encode_16bit(first + static_cast<float>(i), bf16);
  };
  const kernels::ActPtr a = at16(2);
  fill(a, 3, 1.0f);
  f.comm->all_reduce_sum(a, 3);
  EXPECT_EQ(value(a, 0), 2.0f);
  EXPECT_EQ(value(a, 2), 6.0f);
  EXPECT_EQ(value(a, 3), 4.0f);  // not part of the call

  const kernels::ActPtr send = at16(10), recv = at16(20);
  fill(send, 6, 1.0f);
  fill(recv, 3, 100.0f);
  f.comm->reduce_scatter_sum(send, recv, 3);  // send 2 x 3 values, recv 3
  EXPECT_EQ(value(recv, 0), 2.0f);
  EXPECT_EQ(value(recv, 2), 6.0f);
  EXPECT_EQ(value(recv, 3), 103.0f);

  fill(recv, 6, 100.0f);
  f.comm->all_gather(send, recv, 3);
  EXPECT_EQ(value(recv, 1), 2.0f);
  EXPECT_EQ(value(recv, 4), 2.0f);
  EXPECT_EQ(value(recv, 6), 106.0f);

  const kernels::ActPtr d = at16(30);
  fill(d, 6, 1.0f);
  f.comm->reduce_scatter_sum_in_place(d, 3, WirePrecision::kFp32);
  EXPECT_EQ(value(d, 2), 6.0f);
  EXPECT_EQ(value(d, 6), 7.0f);
  fill(d, 6, 1.0f);
  f.comm->all_gather_in_place(d, 3);
  EXPECT_EQ(value(d, 4), 2.0f);
  EXPECT_EQ(value(d, 6), 7.0f);
}

TEST(HostStagedComm, NonBlockingResultsArriveAtTheWait) {
  Fixture f;
  auto request = f.comm->iall_reduce_sum(f.at(2), 2, WirePrecision::kBf16);
  EXPECT_EQ(f.twin->last_wire, WirePrecision::kBf16);  // the 16-bit wire is the inner comm's
  EXPECT_EQ(f.device.arena[2], 2.0f);  // not yet
  request->wait();
  EXPECT_EQ(f.device.arena[2], 4.0f);
  EXPECT_EQ(f.device.arena[3], 6.0f);
}

// The gradient buckets reduce the same device buffers every step: each keeps one host mirror, so
// nothing is allocated after the first step and the inner communicator sees the same address
// (MpiComm keys its 16-bit wire buffers by it). One request per buffer may be in flight.
TEST(HostStagedComm, NonBlockingReductionsOfABufferReuseItsHostMirror) {
  Fixture f;
  f.comm->iall_reduce_sum(f.at(2), 2, WirePrecision::kFp32)->wait();
  const float* first = f.twin->last_nonblocking_host;
  auto other = f.comm->iall_reduce_sum(f.at(6), 2, WirePrecision::kFp32);  // another buffer, in flight
  EXPECT_NE(f.twin->last_nonblocking_host, first);
  auto again = f.comm->iall_reduce_sum(f.at(2), 2, WirePrecision::kFp32);
  EXPECT_EQ(f.twin->last_nonblocking_host, first);
  EXPECT_THROW(f.comm->iall_reduce_sum(f.at(2), 2, WirePrecision::kFp32), std::logic_error);
  again->wait();
  other->wait();
  EXPECT_EQ(f.device.arena[2], 8.0f);  // doubled twice
  EXPECT_EQ(f.device.arena[6], 12.0f);
  // A request dropped unwaited frees its mirror too.
  f.comm->iall_reduce_sum(f.at(2), 2, WirePrecision::kFp32).reset();
  EXPECT_NO_THROW(f.comm->iall_reduce_sum(f.at(2), 2, WirePrecision::kFp32)->wait());
}

// A reduction to a root: the root's device buffer receives the sum at the wait; another rank's
// keeps its values (nothing is copied back over them), and its mirror is free again after.
TEST(HostStagedComm, ReductionToARootReturnsOnlyAtTheRoot) {
  Fixture f;
  auto to_me = f.comm->ireduce_sum(f.at(2), 2, 0, WirePrecision::kFp16);
  EXPECT_EQ(f.twin->last_wire, WirePrecision::kFp16);
  EXPECT_EQ(f.device.arena[2], 2.0f);  // not yet
  to_me->wait();
  EXPECT_EQ(f.device.arena[2], 4.0f);
  EXPECT_EQ(f.device.arena[3], 6.0f);
  const int out_before = f.device.copies_out;
  auto to_other = f.comm->ireduce_sum(f.at(6), 2, 1, WirePrecision::kFp32);
  EXPECT_THROW(f.comm->ireduce_sum(f.at(6), 2, 1, WirePrecision::kFp32), std::logic_error);  // in flight
  f.device.arena[6] = 9.0f;  // what the device holds after the call is left alone by its wait
  to_other->wait();
  EXPECT_EQ(f.device.arena[6], 9.0f);
  EXPECT_EQ(f.device.copies_out, out_before);
  EXPECT_NO_THROW(f.comm->ireduce_sum(f.at(6), 2, 1, WirePrecision::kFp32)->wait());
}

// ZeRO-1's parameter pieces (ParameterGather): the root's 16-bit values go up and are not
// copied back; another root's arrive on the device, an odd count without touching the 16 bits
// after them; either way the request is complete when returned.
TEST(HostStagedComm, NonBlockingBroadcastIsStagedAndDoneAtOnce) {
  Fixture f;
  const kernels::ActPtr piece(reinterpret_cast<uint16_t*>(f.at(8)), kernels::Precision::kBf16);
  const uint16_t mine[4] = {0x3f80, 0x4000, 0x4040, 0x1234};
  std::memcpy(f.at(8), mine, sizeof mine);
  const int in_before = f.device.copies_in, out_before = f.device.copies_out;
  auto from_me = f.comm->ibroadcast(piece, 3, 0);
  EXPECT_TRUE(from_me->test());
  EXPECT_EQ(f.device.copies_in, in_before + 1);
  EXPECT_EQ(f.device.copies_out, out_before);
  auto from_twin = f.comm->ibroadcast(piece, 3, 1);
  EXPECT_TRUE(from_twin->test());
  uint16_t now[4];
  std::memcpy(now, f.at(8), sizeof now);
  EXPECT_EQ(now[0], 0xA5A5u);
  EXPECT_EQ(now[2], 0xA5A5u);
  EXPECT_EQ(now[3], 0x1234u);  // not part of the piece
  EXPECT_EQ(f.device.copies_out, out_before + 1);
}

TEST(HostStagedComm, HostBuffersPassThroughWithoutCopies) {
  Fixture f;
  std::vector<float> host{1.0f, 2.0f};
  f.comm->all_reduce_sum(host.data(), 2);
  EXPECT_EQ(host[1], 4.0f);
  double norm = 3.0;
  f.comm->all_reduce_sum(&norm, 1);
  EXPECT_EQ(norm, 6.0);
  auto request = f.comm->iall_reduce_sum(host.data(), 2, WirePrecision::kFp32);
  request->wait();
  EXPECT_EQ(host[0], 4.0f);
  EXPECT_EQ(f.device.copies_in, 0);
  EXPECT_EQ(f.device.copies_out, 0);
}

TEST(HostStagedComm, DoublesInDeviceMemoryAreALogicError) {
  Fixture f;
  EXPECT_THROW(f.comm->all_reduce_sum(reinterpret_cast<double*>(f.at(0)), 1), std::logic_error);
}

}  // namespace
}  // namespace trident::parallel
