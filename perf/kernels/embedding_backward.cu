// Playground: the token-embedding backward, a scatter-add over positions:
//   for bt = 0, 1, ..., B*T - 1 in order, if vocab_begin <= tokens[bt] < vocab_end:
//     dwte[tokens[bt] - vocab_begin, :] += dout[bt, :]
// at GPT-2 124M shapes: B*T = 8192 positions (B = 8, T = 1024), C = 768, a vocabulary of
// 50304 (the padded GPT-2 vocabulary); once unsharded (rows [0, 50304)) and once as the upper
// half of a vocabulary-parallel shard (rows [25152, 50304): tokens below are skipped). Then
// once more at a ragged shape (C = 100, shard [V/5 + 1, V - V/7)) for the index arithmetic;
// its times mean nothing. Reference: the CPU twin trident::kernels::cpu::embedding_backward
// with dwpe = nullptr (the position table is a separate, already parallel kernel).
//
//   playground_embedding_backward [variant|all] [reps]
//   shape: EMB_B (8) x EMB_T (1024) positions, EMB_C (768) channels, EMB_V (50304) vocabulary
//
// Tokens are drawn from a Zipf distribution (probability ~ 1 / rank) over the vocabulary, ranks
// mapped to token ids by a fixed random permutation, from fixed seeds: as in text a few tokens
// take a large share of the positions (the most frequent ~9 %, ~700 of 8192) and most occur
// once or not at all. A frequent token is the hard case: its additions form one long chain.
//
// Variants:
//   1  production cuda::embedding_backward (kernels/cuda/embedding.cu, dwpe = nullptr): the
//      positions sorted by token on the device (CUB's stable radix sort of (token, position)
//      pairs), then one block per (run of a token, 128-channel tile) adds the run's dout rows in
//      position order into the token's row; blocks not at a run's start return at once.
//   2  bucketed by token. The launch copies the tokens to the host (the backend only has them
//      on the device), builds there the owned distinct tokens and, per token, its positions in
//      ascending order (CSR: one pass to count, one to place, O(B*T), into preallocated pinned
//      memory), copies that up in one transfer into a preallocated device buffer, and launches
//      one block row per distinct token (x: token, y: 256-channel tile; 128 threads, 2
//      channels each): a thread loads its dwte values once into registers, adds the bucket's
//      dout rows in position order (16 positions' loads issued before their adds), and stores
//      once. The timed figure INCLUDES the device-to-host copy, the host work and the upload:
//      what the backend would pay. Buckets go to blocks in order of first appearance, which
//      puts the frequent (long) buckets early, so they do not start last and form the tail.
//
//   3  the former production kernel (until the sort replaced it): one thread per channel walks
//      all B*T positions in order, a read-modify-write of dwte in global memory per position.
//      C = 768 threads in all.
//
// Every variant adds to each dwte element in the CPU twin's order (ascending positions), with
// the same fp32 additions (a bare add: nothing to contract into an FMA; a register holds an
// fp32 exactly as memory does, so variant 2's running sum rounds exactly as the twin's
// in-memory +=), so they must equal the twin BIT FOR BIT: tolerance 0.
//
// The rate column is the minimal traffic (the dout rows of owned positions and the tokens read
// once, the touched dwte rows read and written once), the same numerator for every variant.
#include <cuda_runtime.h>  // cudaMallocHost, dim3

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/embedding.h"      // cpu::embedding_backward (the reference)
#include "kernels/cuda/embedding.cuh"   // cuda::embedding_backward (variant 1), its scratch size
#include "kernels/cuda/launch_shape.cuh"  // blocks_for (variant 3)
#include "perf/kernels/playground.cuh"  // harness

namespace {

namespace pg = trident::playground;
namespace tk = trident::kernels;

// Page-locked host memory, freed with the object: copies from and to it are truly
// asynchronous and run at full PCIe speed.
template <typename T>
class PinnedBuffer {
 public:
  explicit PinnedBuffer(std::size_t count) : count_(count) {
    if (count_ > 0) {
      PG_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&data_), count_ * sizeof(T)));
    }
  }
  ~PinnedBuffer() {
    if (data_ != nullptr) {
      const cudaError_t status = cudaFreeHost(data_);
      if (status != cudaSuccess) pg::fail_cuda(status, "cudaFreeHost(data_)", __FILE__, __LINE__);
    }
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  T* data() const { return data_; }
  std::size_t size() const { return count_; }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

// ---- variant 2, host part: buckets of positions per owned token (CSR) ------------------------

// The CSR array, all int32, for `buckets` distinct owned tokens and `positions` owned positions:
//   rows       [0, buckets)                   the dwte row (token - vocab_begin) of each bucket
//   offsets    [buckets, 2 buckets + 1)       bucket k's positions: [offsets[k], offsets[k + 1])
//   positions  [2 buckets + 1, + positions)   ascending within each bucket
// At most 3 P + 1 entries for P positions. csr_offsets_at and csr_positions_at say where the
// parts start, for the host builder and the kernel alike.
__host__ __device__ inline std::size_t csr_offsets_at(int buckets) {
  return static_cast<std::size_t>(buckets);
}
__host__ __device__ inline std::size_t csr_positions_at(int buckets) {
  return 2 * static_cast<std::size_t>(buckets) + 1;
}

struct Buckets {
  int buckets = 0;
  int positions = 0;
  std::size_t entries() const {
    return csr_positions_at(buckets) + static_cast<std::size_t>(positions);
  }
};

// Builds the CSR array into csr (3 P + 1 entries) from tokens[P]. slot (vocab_end - vocab_begin
// entries) must be all -1 on entry and is all -1 again on return; count needs P entries. Buckets
// are numbered in order of first appearance; positions are placed in ascending order.
Buckets build_buckets(const std::int32_t* tokens, int P, int vocab_begin, int vocab_end,
                      std::vector<int>& slot, std::vector<int>& count, std::int32_t* csr) {
  Buckets b;
  std::int32_t* rows = csr;
  // Pass 1: number the distinct owned tokens, count their positions.
  for (int bt = 0; bt < P; bt++) {
    const std::int32_t token = tokens[bt];
    if (token < vocab_begin || token >= vocab_end) continue;
    int& s = slot[static_cast<std::size_t>(token - vocab_begin)];
    if (s < 0) {
      s = b.buckets;
      rows[b.buckets] = token - vocab_begin;
      count[static_cast<std::size_t>(b.buckets)] = 0;
      b.buckets++;
    }
    count[static_cast<std::size_t>(s)]++;
    b.positions++;
  }
  // Offsets; count becomes each bucket's next free place.
  std::int32_t* offsets = csr + csr_offsets_at(b.buckets);
  offsets[0] = 0;
  for (int k = 0; k < b.buckets; k++) {
    const int n = count[static_cast<std::size_t>(k)];
    count[static_cast<std::size_t>(k)] = offsets[k];
    offsets[k + 1] = offsets[k] + n;
  }
  // Pass 2: place the positions, ascending within each bucket because bt ascends.
  std::int32_t* positions = csr + csr_positions_at(b.buckets);
  for (int bt = 0; bt < P; bt++) {
    const std::int32_t token = tokens[bt];
    if (token < vocab_begin || token >= vocab_end) continue;
    const int s = slot[static_cast<std::size_t>(token - vocab_begin)];
    positions[count[static_cast<std::size_t>(s)]++] = bt;
  }
  for (int k = 0; k < b.buckets; k++) slot[static_cast<std::size_t>(rows[k])] = -1;
  return b;
}

// ---- variant 2, device part: one block per (bucket, channel tile) ----------------------------

constexpr int kBucketThreads = 128;    // threads per block, one per channel of a group
constexpr int kChannelsPerThread = 2;  // channels c0 + k * kBucketThreads, k < 2
constexpr int kBucketTile = kBucketThreads * kChannelsPerThread;  // 256 channels per block
constexpr int kPositionUnroll = 16;  // positions whose dout loads are issued before their adds

// The work of thread `thread` of block (bucket, tile), a __host__ __device__ function so that a
// host program can replay the grid. For its channels c < C of the bucket's row: load dwte
// once, add dout[p, c] for the bucket's positions p in ascending order, store once. The
// additions are the twin's (same values, same order, fp32): bit-identical results.
__host__ __device__ inline void bucket_thread(float* __restrict__ dwte,
                                              const float* __restrict__ dout,
                                              const std::int32_t* __restrict__ csr, int buckets,
                                              int C, int bucket, int tile, int thread) {
  const std::int32_t* offsets = csr + csr_offsets_at(buckets);
  const std::int32_t* positions = csr + csr_positions_at(buckets);
  const std::size_t row = static_cast<std::size_t>(csr[bucket]) * C;
  const int begin = offsets[bucket];
  const int end = offsets[bucket + 1];
  int col[kChannelsPerThread];
  float acc[kChannelsPerThread];
  for (int k = 0; k < kChannelsPerThread; k++) {
    col[k] = tile * kBucketTile + k * kBucketThreads + thread;
    acc[k] = col[k] < C ? dwte[row + col[k]] : 0.0f;
  }
  int p = begin;
  for (; p + kPositionUnroll <= end; p += kPositionUnroll) {
    float v[kPositionUnroll][kChannelsPerThread];
    for (int u = 0; u < kPositionUnroll; u++) {
      const std::size_t base = static_cast<std::size_t>(positions[p + u]) * C;
      for (int k = 0; k < kChannelsPerThread; k++) {
        v[u][k] = col[k] < C ? dout[base + col[k]] : 0.0f;
      }
    }
    for (int u = 0; u < kPositionUnroll; u++) {
      for (int k = 0; k < kChannelsPerThread; k++) acc[k] += v[u][k];  // position order
    }
  }
  for (; p < end; p++) {
    const std::size_t base = static_cast<std::size_t>(positions[p]) * C;
    for (int k = 0; k < kChannelsPerThread; k++) {
      if (col[k] < C) acc[k] += dout[base + col[k]];
    }
  }
  for (int k = 0; k < kChannelsPerThread; k++) {
    if (col[k] < C) dwte[row + col[k]] = acc[k];
  }
}

__global__ void __launch_bounds__(kBucketThreads)
    bucket_kernel(float* __restrict__ dwte, const float* __restrict__ dout,
                  const std::int32_t* __restrict__ csr, int buckets, int C) {
  bucket_thread(dwte, dout, csr, buckets, C, static_cast<int>(blockIdx.x),
                static_cast<int>(blockIdx.y), static_cast<int>(threadIdx.x));
}

// Everything variant 2 allocates once, outside the timed launch.
struct BucketWorkspace {
  BucketWorkspace(int P, int vocab_rows)
      : tokens(static_cast<std::size_t>(P)),
        csr(3 * static_cast<std::size_t>(P) + 1),
        d_csr(csr.size()),
        slot(static_cast<std::size_t>(vocab_rows), -1),
        count(static_cast<std::size_t>(P)) {}
  PinnedBuffer<std::int32_t> tokens;
  PinnedBuffer<std::int32_t> csr;
  pg::DeviceBuffer<std::int32_t> d_csr;
  std::vector<int> slot;
  std::vector<int> count;
};

// Variant 3: the former production kernel, one thread per channel, positions in order.
__global__ void thread_per_channel_kernel(float* dwte, const float* dout, const std::int32_t* tokens, int positions,
                                          int C, int vocab_begin, int vocab_end) {
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= C) return;
  for (int bt = 0; bt < positions; bt++) {
    const std::int32_t token = tokens[bt];
    if (token >= vocab_begin && token < vocab_end) {
      dwte[static_cast<std::size_t>(token - vocab_begin) * C + c] += dout[static_cast<std::size_t>(bt) * C + c];
    }
  }
}

// The whole of variant 2, queued on `stream`; it waits for the tokens' copy to the host.
void bucketed_embedding_backward(float* dwte, const float* dout, const std::int32_t* d_tokens,
                                 int P, int C, int vocab_begin, int vocab_end, BucketWorkspace& ws,
                                 cudaStream_t stream) {
  PG_CUDA_CHECK(cudaMemcpyAsync(ws.tokens.data(), d_tokens, ws.tokens.size() * sizeof(std::int32_t),
                                cudaMemcpyDeviceToHost, stream));
  // Also guarantees that the previous launch's upload from ws.csr has ended.
  PG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const Buckets b =
      build_buckets(ws.tokens.data(), P, vocab_begin, vocab_end, ws.slot, ws.count, ws.csr.data());
  if (b.buckets == 0) return;  // no owned token: nothing to add
  PG_CUDA_CHECK(cudaMemcpyAsync(ws.d_csr.data(), ws.csr.data(), b.entries() * sizeof(std::int32_t),
                                cudaMemcpyHostToDevice, stream));
  const dim3 grid(static_cast<unsigned>(b.buckets),
                  static_cast<unsigned>((C + kBucketTile - 1) / kBucketTile));
  bucket_kernel<<<grid, kBucketThreads, 0, stream>>>(dwte, dout, ws.d_csr.data(), b.buckets, C);
  PG_CHECK_LAUNCH();
}

// ---- data ---------------------------------------------------------------------------------------

// P tokens from a Zipf distribution over [0, V): rank r has weight 1 / (r + 1); rank -> token by
// a permutation shuffled from the seed, so frequent tokens fall anywhere in the vocabulary (in
// both halves of a shard split).
std::vector<std::int32_t> skewed_tokens(int P, int V, std::uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::vector<std::int32_t> token_of_rank(static_cast<std::size_t>(V));
  for (int r = 0; r < V; r++) token_of_rank[static_cast<std::size_t>(r)] = r;
  std::shuffle(token_of_rank.begin(), token_of_rank.end(), engine);
  std::vector<double> cumulative(static_cast<std::size_t>(V));
  double total = 0.0;
  for (int r = 0; r < V; r++) cumulative[static_cast<std::size_t>(r)] = total += 1.0 / (r + 1.0);
  std::uniform_real_distribution<double> uniform(0.0, total);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(P));
  for (std::int32_t& t : tokens) {
    const auto it = std::upper_bound(cumulative.begin(), cumulative.end(), uniform(engine));
    const std::size_t rank =
        std::min(static_cast<std::size_t>(it - cumulative.begin()), cumulative.size() - 1);
    t = token_of_rank[rank];
  }
  return tokens;
}

struct Case {
  int C;
  int vocab_begin;
  int vocab_end;
  const char* what;
};

// What every case shares.
struct Context {
  cudaStream_t stream;
  pg::Timer& timer;
  int B;
  int T;
  const std::vector<std::int32_t>& tokens;
  const pg::DeviceBuffer<std::int32_t>& d_tokens;
};

// Validates and times both variants on one case; returns the exit status of run_variants.
int run_case(const pg::Args& args, const Context& ctx, const Case& cs) {
  const int P = ctx.B * ctx.T;
  const int C = cs.C;
  const int vocab_rows = cs.vocab_end - cs.vocab_begin;
  const std::size_t table = static_cast<std::size_t>(vocab_rows) * C;

  // The work, for the header and the rate: owned positions and distinct owned tokens.
  std::vector<std::size_t> occurrences(static_cast<std::size_t>(vocab_rows), 0);
  std::size_t owned = 0;
  std::size_t distinct = 0;
  std::size_t most = 0;
  for (const std::int32_t t : ctx.tokens) {
    if (t < cs.vocab_begin || t >= cs.vocab_end) continue;
    std::size_t& n = occurrences[static_cast<std::size_t>(t - cs.vocab_begin)];
    owned++;
    distinct += n == 0 ? 1 : 0;
    most = std::max(most, ++n);
  }
  std::printf("\nembedding backward dwte (%s): B*T = %d, C = %d, rows [%d, %d); %zu owned"
              " positions, %zu distinct tokens, the most frequent %zu times; %d reps (median)\n",
              cs.what, P, C, cs.vocab_begin, cs.vocab_end, owned, distinct, most, args.reps);

  const std::vector<float> dout =
      pg::random_floats(static_cast<std::size_t>(P) * C, 41, -1.0f, 1.0f);
  const std::vector<float> init = pg::random_floats(table, 42, -1.0f, 1.0f);
  std::vector<float> ref(init);
  tk::cpu::embedding_backward(ref.data(), nullptr, dout.data(), ctx.tokens.data(), ctx.B, ctx.T, C,
                              cs.vocab_begin, cs.vocab_end);

  const pg::DeviceBuffer<float> d_dout = pg::upload(dout);
  const pg::DeviceBuffer<float> d_init = pg::upload(init);
  const pg::DeviceBuffer<float> d_dwte(table);
  BucketWorkspace ws(P, vocab_rows);
  const pg::DeviceBuffer<unsigned char> d_sort_scratch(tk::cuda::embedding_backward_scratch_bytes(P));

  // Bit-identical to the twin (file comment): tolerance 0, i.e. |gpu - ref| = 0 everywhere.
  constexpr double kExact = 0.0;
  // dwte accumulates, so the validated run starts from init (copied on the device): a variant
  // that writes nothing leaves init and fails; untouched rows must keep init exactly.
  auto measure = [&](auto&& launch) {
    return [&, launch](int reps) {
      PG_CUDA_CHECK(cudaMemcpyAsync(d_dwte.data(), d_init.data(), d_dwte.bytes(),
                                    cudaMemcpyDeviceToDevice, ctx.stream));
      launch();
      pg::Outcome outcome;
      outcome.checks.push_back(pg::validate("dwte", pg::download(d_dwte), ref, kExact));
      outcome.median_ms = ctx.timer.median_ms(reps, launch);
      return outcome;
    };
  };
  auto production = [&] {
    tk::cuda::embedding_backward(d_dwte.data(), nullptr, d_dout.data(), ctx.d_tokens.data(), ctx.B,
                                 ctx.T, C, cs.vocab_begin, cs.vocab_end, d_sort_scratch.data(), ctx.stream);
  };
  auto thread_per_channel = [&] {
    thread_per_channel_kernel<<<tk::cuda::blocks_for(static_cast<std::size_t>(C), 32), 32, 0, ctx.stream>>>(
        d_dwte.data(), d_dout.data(), ctx.d_tokens.data(), P, C, cs.vocab_begin, cs.vocab_end);
    PG_CHECK_LAUNCH();
  };
  auto bucketed = [&] {
    bucketed_embedding_backward(d_dwte.data(), d_dout.data(), ctx.d_tokens.data(), P, C,
                                cs.vocab_begin, cs.vocab_end, ws, ctx.stream);
  };
  const std::vector<pg::Variant> variants = {
      {"production: device sort by token, a block per run", measure(production)},
      {"bucketed by token, host CSR (time includes D2H+host+H2D)", measure(bucketed)},
      {"former production: thread per channel, positions in order", measure(thread_per_channel)},
  };
  const double floats_moved =
      static_cast<double>(owned) * C + 2.0 * static_cast<double>(distinct) * C;
  return pg::run_variants(args, variants, pg::Workload{4.0 * floats_moved + 4.0 * P, 0.0});
}

}  // namespace

int main(int argc, char** argv) {
  const pg::Args args = pg::parse_args_or_exit(argc, argv, "playground_embedding_backward");
  pg::require_gpu();
  const int B = pg::env_int("EMB_B", 8);
  const int T = pg::env_int("EMB_T", 1024);
  const int C = pg::env_int("EMB_C", 768);
  const int V = pg::env_int("EMB_V", 50304);
  if (V < 8 || static_cast<long long>(B) * T > (1LL << 30)) {
    std::fprintf(stderr, "EMB_V must be at least 8 and EMB_B * EMB_T at most 2^30\n");
    return 2;
  }

  const pg::Stream stream;
  pg::Timer timer(stream.get());
  const std::vector<std::int32_t> tokens = skewed_tokens(B * T, V, 43);
  const pg::DeviceBuffer<std::int32_t> d_tokens = pg::upload(tokens);
  const Context ctx{stream.get(), timer, B, T, tokens, d_tokens};

  const Case cases[] = {
      {C, 0, V, "unsharded"},
      {C, V / 2, V, "vocabulary shard: upper half"},
      // 100 channels: a partial 256-channel tile, warps past C; an odd shard start.
      {100, V / 5 + 1, V - V / 7, "ragged check, times meaningless"},
  };
  int status = 0;
  for (const Case& cs : cases) status |= run_case(args, ctx, cs);
  return status;
}
