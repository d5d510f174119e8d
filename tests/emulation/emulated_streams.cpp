// Streams and events for the CUDA emulation (cuda_emulation.h): the order in which queued device
// work runs, and so the ordering bugs between streams that the emulation can show.
//
// Two schedules, chosen by TRIDENT_CUDA_EMULATION_STREAMS:
// - "deferred" (the default): work queued on a created stream runs only when something needs
//   it to have run: a cudaStreamSynchronize or cudaEventSynchronize, a copy into host memory, a
//   cudaStreamWaitEvent on another stream that is itself being run, cudaDeviceSynchronize,
//   cudaFree, or the legacy default stream (which waits for every blocking stream). That is a
//   schedule the GPU may choose too (a busy or slow stream), and it is the one that exposes a
//   missing event: work on stream B that reads what stream A writes, without waiting for A's
//   event, reads the old values, and the twin comparison fails. cudaEventQuery lets no work run
//   (it answers cudaErrorNotReady), except in a loop that polls the same record many times.
//   Before an NCCL call reads its send buffer, the other streams may also be run ahead, as far
//   as their event waits allow (run_other_streams_ahead): the schedule in which the NCCL stream
//   is the slow one, so that a write to the buffer that no event orders shows.
// - "immediate": every call runs its work at once, in the order made (the emulation's first
//   schedule; kept for narrowing a failure down).
//
// When everything must run (cudaDeviceSynchronize), streams run in the order they were created:
// for Trident, the compute stream before the NCCL stream.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <utility>

#include "tests/emulation/emulated_state.h"

namespace cuda_emu {
namespace {

// A queued item: device work, or a cudaStreamWaitEvent (which stream, how far).
struct Item {
  std::function<void()> work;
  cudaStream_t waits_for = nullptr;
  std::uint64_t position = 0;
};

struct Stream {
  std::uint64_t id = 0;  // creation order
  bool blocking = true;  // synchronises with the legacy default stream (not cudaStreamNonBlocking)
  std::deque<Item> pending;
  std::uint64_t queued = 0;  // items ever queued
  std::uint64_t done = 0;    // items ever run: item i (from 1) has run when done >= i
  bool running = false;
};

// The last cudaEventRecord of an event: the stream and how many of its items had been queued.
struct Recorded {
  cudaStream_t stream = nullptr;
  std::uint64_t position = 0;
  unsigned not_ready_answers = 0;  // cudaEventQuery's, for this record
};

constexpr unsigned kQueriesBeforeProgress = 1000;

struct Streams {
  // Held while work runs too: a stream's work may run another stream's (an event wait).
  std::recursive_mutex mutex;
  std::map<cudaStream_t, std::unique_ptr<Stream>> live;
  std::map<cudaEvent_t, Recorded> events;
  std::uint64_t created = 0;
  bool deferred = true;
};

Streams& streams() {
  // The emulated driver's queues: one per process.
  static Streams s{{}, {}, {}, 0, !env_choice("TRIDENT_CUDA_EMULATION_STREAMS", "deferred", "immediate")};
  return s;
}

[[noreturn]] void stop(const std::string& why) {
  std::fprintf(stderr, "cuda emulation: %s\n", why.c_str());
  std::abort();
}

Stream* find(Streams& s, cudaStream_t stream) {
  const auto it = s.live.find(stream);
  return it == s.live.end() ? nullptr : it->second.get();
}

// Runs the stream's next item.
void run_front(Stream& stream) {
  Item item = std::move(stream.pending.front());
  stream.pending.pop_front();
  item.work();
  ++stream.done;
}

// Runs the stream's items until `position` of them have run.
void run_until(Streams& s, cudaStream_t handle, std::uint64_t position) {
  Stream* stream = find(s, handle);
  if (stream == nullptr) return;  // destroyed: its work ran before
  if (stream->done >= position) return;
  if (stream->running) stop("a cycle of event waits between streams: the GPU would hang here");
  stream->running = true;
  while (stream->done < position) run_front(*stream);
  stream->running = false;
}

void run_all(Streams& s, cudaStream_t handle) {
  if (Stream* stream = find(s, handle)) run_until(s, handle, stream->queued);
}

// Every stream, in creation order (or only the blocking ones).
void run_every_stream(Streams& s, bool blocking_only) {
  std::map<std::uint64_t, cudaStream_t> by_creation;
  for (const auto& [handle, stream] : s.live) {
    if (!blocking_only || stream->blocking) by_creation.emplace(stream->id, handle);
  }
  for (const auto& entry : by_creation) run_all(s, entry.second);
}

bool event_complete(Streams& s, const Recorded& r) {
  const Stream* stream = find(s, r.stream);
  return stream == nullptr || stream->done >= r.position;
}

// Runs the stream's items from the front up to its first wait that is not yet met; true when
// one ran.
bool run_unblocked(Streams& s, Stream& stream) {
  bool ran = false;
  while (!stream.pending.empty()) {
    const Item& next = stream.pending.front();
    if (next.waits_for != nullptr && !event_complete(s, Recorded{next.waits_for, next.position, 0})) break;
    run_front(stream);
    ran = true;
  }
  return ran;
}

void enqueue_item(cudaStream_t handle, Item item) {
  Streams& s = streams();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  if (handle == nullptr) {
    // The legacy default stream: after all earlier work of the blocking streams, before theirs
    // to come. Run now, which satisfies both.
    if (s.deferred) run_every_stream(s, /*blocking_only=*/true);
    item.work();
    return;
  }
  Stream* stream = find(s, handle);
  if (stream == nullptr) stop("work queued on a stream that does not exist");
  if (!s.deferred) {
    item.work();
    ++stream->queued;
    ++stream->done;
    return;
  }
  stream->pending.push_back(std::move(item));
  ++stream->queued;
}

}  // namespace

void check_stream(cudaStream_t stream) {
  if (stream == nullptr) return;
  Streams& s = streams();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  if (find(s, stream) == nullptr) stop("work queued on a stream that does not exist");
}

void enqueue(cudaStream_t handle, std::function<void()> work) { enqueue_item(handle, Item{std::move(work)}); }

void run_other_streams_ahead(cudaStream_t slow) {
  Streams& s = streams();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  std::map<std::uint64_t, Stream*> by_creation;
  for (const auto& [handle, stream] : s.live) {
    // A running stream is part way through an item (an event wait that ran this one).
    if (handle != slow && !stream->running) by_creation.emplace(stream->id, stream.get());
  }
  // Until none moves: one stream's progress may meet another's wait.
  for (bool moved = true; moved;) {
    moved = false;
    for (const auto& entry : by_creation) {
      Stream& stream = *entry.second;
      stream.running = true;
      moved = run_unblocked(s, stream) || moved;
      stream.running = false;
    }
  }
}

void synchronize_stream(cudaStream_t handle) {
  Streams& s = streams();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  if (handle == nullptr) {
    run_every_stream(s, /*blocking_only=*/true);
    return;
  }
  run_all(s, handle);
}

void synchronize_device() {
  Streams& s = streams();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  run_every_stream(s, /*blocking_only=*/false);
}

}  // namespace cuda_emu

extern "C" {

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* handle, unsigned int flags) {
  cuda_emu::Streams& s = cuda_emu::streams();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  *handle = reinterpret_cast<cudaStream_t>(new char);  // a unique address, never read
  auto stream = std::make_unique<cuda_emu::Stream>();
  stream->id = s.created++;
  stream->blocking = (flags & cudaStreamNonBlocking) == 0;
  s.live.emplace(*handle, std::move(stream));
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t handle) {
  cuda_emu::Streams& s = cuda_emu::streams();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  if (cuda_emu::find(s, handle) == nullptr) {
    cuda_emu::set_last_error(cudaErrorInvalidResourceHandle, "cudaStreamDestroy of an unknown stream");
    return cudaErrorInvalidResourceHandle;
  }
  // The GPU finishes a destroyed stream's work before releasing it.
  cuda_emu::run_all(s, handle);
  s.live.erase(handle);
  delete reinterpret_cast<char*>(handle);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  cuda_emu::check_stream(stream);
  cuda_emu::synchronize_stream(stream);
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  cuda_emu::synchronize_device();
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int /*flags*/) {
  cuda_emu::Streams& s = cuda_emu::streams();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  *event = reinterpret_cast<cudaEvent_t>(new char);
  s.events.emplace(*event, cuda_emu::Recorded{});  // never recorded: complete, as CUDA's
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  cuda_emu::Streams& s = cuda_emu::streams();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  if (s.events.erase(event) == 0) {
    cuda_emu::set_last_error(cudaErrorInvalidResourceHandle, "cudaEventDestroy of an unknown event");
    return cudaErrorInvalidResourceHandle;
  }
  // Waits already queued on it keep their own copy of the recorded position.
  delete reinterpret_cast<char*>(event);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  cuda_emu::Streams& s = cuda_emu::streams();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  const auto it = s.events.find(event);
  if (it == s.events.end()) cuda_emu::stop("cudaEventRecord of an event that does not exist");
  if (stream == nullptr) {
    // The legacy stream's work runs at once: recorded there, the event is complete.
    cuda_emu::run_every_stream(s, /*blocking_only=*/true);
    it->second = cuda_emu::Recorded{};
    return cudaSuccess;
  }
  const cuda_emu::Stream* recorded_on = cuda_emu::find(s, stream);
  if (recorded_on == nullptr) cuda_emu::stop("cudaEventRecord on a stream that does not exist");
  it->second = cuda_emu::Recorded{stream, recorded_on->queued, 0};
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int /*flags*/) {
  cuda_emu::Streams& s = cuda_emu::streams();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  const auto it = s.events.find(event);
  if (it == s.events.end()) cuda_emu::stop("cudaStreamWaitEvent on an event that does not exist");
  // The wait is for the record made before this call, whatever is recorded later.
  const cuda_emu::Recorded r = it->second;
  if (r.stream == nullptr) return cudaSuccess;
  cuda_emu::enqueue_item(stream, cuda_emu::Item{[r] {
                                                  cuda_emu::Streams& all = cuda_emu::streams();
                                                  cuda_emu::run_until(all, r.stream, r.position);
                                                },
                                                r.stream, r.position});
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  cuda_emu::Streams& s = cuda_emu::streams();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  const auto it = s.events.find(event);
  if (it == s.events.end()) return cudaErrorInvalidResourceHandle;
  cuda_emu::run_until(s, it->second.stream, it->second.position);
  return cudaSuccess;
}

// The emulation keeps no device clock: both events are waited for, and the time between them is
// 0 ms. (The playground's programs time with events; their emulated runs only validate.) With
// TRIDENT_CUDA_EMULATION_EVENT_MS=random it is a random time in [0.5, 1.5) ms instead, different in
// every process: a test of what depends on timings (run.matmul_algorithms = timed) then sees them
// differ from run to run and from rank to rank, as on GPUs.
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  cuda_emu::Streams& s = cuda_emu::streams();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  for (cudaEvent_t event : {start, end}) {
    const auto it = s.events.find(event);
    if (it == s.events.end()) return cudaErrorInvalidResourceHandle;
    cuda_emu::run_until(s, it->second.stream, it->second.position);
  }
  static const bool random = [] {
    const char* value = std::getenv("TRIDENT_CUDA_EMULATION_EVENT_MS");
    return value != nullptr && std::string(value) == "random";
  }();
  static std::mt19937 clock{std::random_device{}()};  // under s.mutex
  *ms = random ? std::uniform_real_distribution<float>(0.5f, 1.5f)(clock) : 0.0f;
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  cuda_emu::Streams& s = cuda_emu::streams();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  const auto it = s.events.find(event);
  if (it == s.events.end()) return cudaErrorInvalidResourceHandle;
  cuda_emu::Recorded& r = it->second;
  if (cuda_emu::event_complete(s, r)) return cudaSuccess;
  // Not ready, and the runtime leaves that as the last error too. A query lets no work run (a
  // busy GPU), so that code which only polls still needs its wait; a loop that polls the same
  // record kQueriesBeforeProgress times is let through, as the GPU would finish eventually.
  cuda_emu::set_last_error(cudaErrorNotReady, "cudaEventQuery: not ready");
  if (++r.not_ready_answers >= cuda_emu::kQueriesBeforeProgress) cuda_emu::run_until(s, r.stream, r.position);
  return cudaErrorNotReady;
}

}  // extern "C"
