// CPU kernel benchmarks at GPT-2 124M shapes, micro-batch 4 x sequence 64 (N = 256 tokens,
// C = 768, NH = 12, Vp = 50304), next to the raw cblas_sgemm rate they should approach.
//
//   OMP_NUM_THREADS=2 build/bin/bench_kernels --benchmark_min_time=0.5
//
// Threads come from OMP_NUM_THREADS (default 2) and are given to one CpuBackend, which sets
// both the OpenMP and the OpenBLAS thread counts. Every benchmark uses wall-clock time (the
// kernels are multi-threaded; Google Benchmark's default CPU time is the main thread's only).
// FLOPS counters count multiply-adds as 2 FLOPs; attention counts the full (non-causal)
// T x T products of the model, as the MFU formula does: not the scores the backward recomputes
// (its rate understates what it executes by a fifth).
#include <benchmark/benchmark.h>
#include <cblas.h>  // cblas_sgemm

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"  // CpuBackend

namespace {

using trident::kernels::AdamWArgs;
using trident::kernels::cpu::CpuBackend;

constexpr int kB = 4, kT = 64, kN = kB * kT, kC = 768, kNH = 12, kV = 50257, kVp = 50304;

int env_threads() {
  const char* value = std::getenv("OMP_NUM_THREADS");
  const int threads = value ? std::atoi(value) : 0;
  return threads > 0 ? threads : 2;
}

CpuBackend& backend() {
  static CpuBackend instance(env_threads());
  return instance;
}

// A backend buffer filled with uniform values in [lo, hi), released on scope exit.
class Buffer {
 public:
  explicit Buffer(std::size_t count, float lo = -1.0f, float hi = 1.0f)
      : data_(backend().allocate(count)), count_(count) {
    std::mt19937 rng(static_cast<unsigned>(count));
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> host(count);
    for (auto& x : host) x = dist(rng);
    backend().copy_to_device(data_, host.data(), count);
  }
  ~Buffer() { backend().release(data_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  float* get() const { return data_; }
  std::size_t size() const { return count_; }

 private:
  float* data_;
  std::size_t count_;
};

std::vector<int32_t> random_tokens(std::size_t count, int32_t vocab) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
  std::vector<int32_t> tokens(count);
  for (auto& t : tokens) t = dist(rng);
  return tokens;
}

void set_flops(benchmark::State& state, double flops_per_iteration) {
  state.counters["FLOPS"] = benchmark::Counter(
      flops_per_iteration * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void set_bytes(benchmark::State& state, double bytes_per_iteration) {
  state.SetBytesProcessed(static_cast<int64_t>(bytes_per_iteration * static_cast<double>(state.iterations())));
}

// --- raw sgemm: the ceiling. Args: M, N, K for C[M,N] = A[M,K] @ B[N,K]^T (the forward layout).
void BM_Sgemm(benchmark::State& state) {
  const int M = static_cast<int>(state.range(0)), N = static_cast<int>(state.range(1)),
            K = static_cast<int>(state.range(2));
  backend();  // thread counts set
  Buffer a(static_cast<std::size_t>(M) * K), b(static_cast<std::size_t>(N) * K),
      c(static_cast<std::size_t>(M) * N);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a.get(), K, b.get(), K,
                0.0f, c.get(), N);
    benchmark::ClobberMemory();
  }
  set_flops(state, 2.0 * M * N * K);
}
BENCHMARK(BM_Sgemm)
    ->ArgNames({"M", "N", "K"})
    ->Args({1024, 1024, 1024})
    ->Args({kN, 3 * kC, kC})
    ->Args({kN, 4 * kC, kC})
    ->Args({kN, kC, 4 * kC})
    ->Args({kN, kVp, kC})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

// --- matmul (N = 256). Args: C, OC. -----------------------------------------------------------
void BM_MatmulForward(benchmark::State& state) {
  const int C = static_cast<int>(state.range(0)), OC = static_cast<int>(state.range(1));
  Buffer inp(static_cast<std::size_t>(kN) * C), w(static_cast<std::size_t>(OC) * C), bias(OC),
      out(static_cast<std::size_t>(kN) * OC);
  for (auto _ : state) {
    backend().matmul_forward(out.get(), inp.get(), w.get(), bias.get(), kN, C, OC);
    benchmark::ClobberMemory();
  }
  set_flops(state, 2.0 * kN * C * OC);
}

void BM_MatmulBackward(benchmark::State& state) {
  const int C = static_cast<int>(state.range(0)), OC = static_cast<int>(state.range(1));
  Buffer inp(static_cast<std::size_t>(kN) * C), w(static_cast<std::size_t>(OC) * C),
      dout(static_cast<std::size_t>(kN) * OC), dinp(static_cast<std::size_t>(kN) * C),
      dw(static_cast<std::size_t>(OC) * C), db(OC);
  for (auto _ : state) {
    backend().matmul_backward(dinp.get(), dw.get(), db.get(), dout.get(), inp.get(), w.get(), kN,
                              C, OC);
    benchmark::ClobberMemory();
  }
  set_flops(state, 4.0 * kN * C * OC);
}

#define TRIDENT_MATMUL_SHAPES                                                         \
  ArgNames({"C", "OC"})                                                               \
      ->Args({kC, 3 * kC})     /* attention qkv */                                    \
      ->Args({kC, 4 * kC})     /* MLP up */                                           \
      ->Args({4 * kC, kC})     /* MLP down */                                         \
      ->Args({kC, kVp})        /* LM head */                                          \
      ->Unit(benchmark::kMicrosecond)                                                 \
      ->UseRealTime()
BENCHMARK(BM_MatmulForward)->TRIDENT_MATMUL_SHAPES;
BENCHMARK(BM_MatmulBackward)->TRIDENT_MATMUL_SHAPES;
#undef TRIDENT_MATMUL_SHAPES

// --- attention (B=4, T=64, C=768, NH=12) ------------------------------------------------------
void BM_AttentionForward(benchmark::State& state) {
  Buffer qkv(static_cast<std::size_t>(kN) * 3 * kC), out(static_cast<std::size_t>(kN) * kC),
      lse(static_cast<std::size_t>(kB) * kNH * kT),
      scratch(backend().attention_scratch_size(kB, kT, kNH));
  for (auto _ : state) {
    backend().attention_forward(out.get(), lse.get(), scratch.get(), qkv.get(), kB, kT, kC, kNH);
    benchmark::ClobberMemory();
  }
  set_flops(state, 4.0 * kB * kT * kT * kC);
}
BENCHMARK(BM_AttentionForward)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_AttentionBackward(benchmark::State& state) {
  Buffer qkv(static_cast<std::size_t>(kN) * 3 * kC), out(static_cast<std::size_t>(kN) * kC),
      lse(static_cast<std::size_t>(kB) * kNH * kT), dout(static_cast<std::size_t>(kN) * kC),
      dqkv(static_cast<std::size_t>(kN) * 3 * kC),
      scratch(backend().attention_scratch_size(kB, kT, kNH));
  backend().attention_forward(out.get(), lse.get(), scratch.get(), qkv.get(), kB, kT, kC, kNH);
  for (auto _ : state) {
    backend().attention_backward(dqkv.get(), scratch.get(), dout.get(), qkv.get(), out.get(),
                                 lse.get(), kB, kT, kC, kNH);
    benchmark::ClobberMemory();
  }
  set_flops(state, 8.0 * kB * kT * kT * kC);
}
BENCHMARK(BM_AttentionBackward)->Unit(benchmark::kMicrosecond)->UseRealTime();

// --- layernorm, GELU (N = 256) ----------------------------------------------------------------
void BM_LayerNormForward(benchmark::State& state) {
  Buffer inp(static_cast<std::size_t>(kN) * kC), out(inp.size()), w(kC), b(kC), mean(kN),
      rstd(kN);
  for (auto _ : state) {
    backend().layernorm_forward(out.get(), mean.get(), rstd.get(), inp.get(), w.get(), b.get(), kN,
                                kC);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2.0 * sizeof(float) * kN * kC);
}
BENCHMARK(BM_LayerNormForward)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_LayerNormBackward(benchmark::State& state) {
  Buffer inp(static_cast<std::size_t>(kN) * kC), out(inp.size()), w(kC), b(kC), mean(kN),
      rstd(kN), dout(inp.size()), dinp(inp.size()), dw(kC), db(kC);
  backend().layernorm_forward(out.get(), mean.get(), rstd.get(), inp.get(), w.get(), b.get(), kN,
                              kC);
  for (auto _ : state) {
    backend().layernorm_backward(dinp.get(), dw.get(), db.get(), dout.get(), inp.get(), w.get(),
                                 mean.get(), rstd.get(), kN, kC);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 4.0 * sizeof(float) * kN * kC);
}
BENCHMARK(BM_LayerNormBackward)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_GeluForward(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(kN) * 4 * kC;
  Buffer inp(n, -4.0f, 4.0f), out(n);
  for (auto _ : state) {
    backend().gelu_forward(out.get(), inp.get(), n);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2.0 * sizeof(float) * static_cast<double>(n));
}
BENCHMARK(BM_GeluForward)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_GeluBackward(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(kN) * 4 * kC;
  Buffer inp(n, -4.0f, 4.0f), dout(n), dinp(n);
  for (auto _ : state) {
    backend().gelu_backward(dinp.get(), inp.get(), dout.get(), n);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 4.0 * sizeof(float) * static_cast<double>(n));
}
BENCHMARK(BM_GeluBackward)->Unit(benchmark::kMicrosecond)->UseRealTime();

// --- cross-entropy (N = 256, V = 50257 padded to 50304) -----------------------------------------
void BM_CrossEntropyForward(benchmark::State& state) {
  Buffer logits(static_cast<std::size_t>(kN) * kVp, -5.0f, 5.0f), losses(kN);
  const auto targets = random_tokens(kN, kV);
  for (auto _ : state) {
    backend().cross_entropy_forward(losses.get(), nullptr, nullptr, logits.get(), targets.data(), kN, kV, kVp);
    benchmark::ClobberMemory();
  }
  set_bytes(state, sizeof(float) * static_cast<double>(logits.size()));
}
BENCHMARK(BM_CrossEntropyForward)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_CrossEntropyBackward(benchmark::State& state) {
  Buffer logits(static_cast<std::size_t>(kN) * kVp, -5.0f, 5.0f), dlogits(logits.size());
  const auto targets = random_tokens(kN, kV);
  for (auto _ : state) {
    backend().cross_entropy_backward(dlogits.get(), logits.get(), targets.data(), 1.0f / kN, kN,
                                     kV, kVp);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2.0 * sizeof(float) * static_cast<double>(logits.size()));
}
BENCHMARK(BM_CrossEntropyBackward)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Vocabulary-parallel pieces on the last of Arg(0) = tp shards (Vp / tp columns, the padding
// included), without the all-gather between them: the shard's statistics (the forward; the
// combination of the gathered blocks is per row, not per logit), then the backward. At tp = 1
// they compare with the fused kernels above.
void BM_CrossEntropyShardedForward(benchmark::State& state) {
  const int tp = static_cast<int>(state.range(0));
  const int vp_local = kVp / tp, vocab_begin = (tp - 1) * vp_local, v_local = kV - vocab_begin;
  Buffer logits(static_cast<std::size_t>(kN) * vp_local, -5.0f, 5.0f), stats(3 * static_cast<std::size_t>(kN));
  const auto targets = random_tokens(kN, kV);
  for (auto _ : state) {
    backend().cross_entropy_shard_statistics(stats.get(), logits.get(), targets.data(), kN, v_local, vp_local,
                                             vocab_begin);
    benchmark::ClobberMemory();
  }
  set_bytes(state, sizeof(float) * static_cast<double>(logits.size()));
}
BENCHMARK(BM_CrossEntropyShardedForward)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_CrossEntropyShardedBackward(benchmark::State& state) {
  const int tp = static_cast<int>(state.range(0));
  const int vp_local = kVp / tp, vocab_begin = (tp - 1) * vp_local, v_local = kV - vocab_begin;
  Buffer logits(static_cast<std::size_t>(kN) * vp_local, -5.0f, 5.0f), dlogits(logits.size()),
      stats(3 * static_cast<std::size_t>(kN));
  const auto targets = random_tokens(kN, kV);
  backend().cross_entropy_shard_statistics(stats.get(), logits.get(), targets.data(), kN, v_local, vp_local,
                                           vocab_begin);
  const float* row_max = stats.get();
  const float* row_sumexp = stats.get() + kN;
  for (auto _ : state) {
    backend().cross_entropy_backward_sharded(dlogits.get(), logits.get(), targets.data(),
                                             row_max, row_sumexp, 1.0f / kN, kN,
                                             v_local, vp_local, vocab_begin);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2.0 * sizeof(float) * static_cast<double>(logits.size()));
}
BENCHMARK(BM_CrossEntropyShardedBackward)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

// --- embedding (B=4, T=64, C=768, Vp=50304) ----------------------------------------------------
void BM_EmbeddingBackward(benchmark::State& state) {
  Buffer dwte(static_cast<std::size_t>(kVp) * kC, 0.0f, 0.0f), dwpe(static_cast<std::size_t>(kT) * kC),
      dout(static_cast<std::size_t>(kN) * kC);
  const auto tokens = random_tokens(kN, kV);
  for (auto _ : state) {
    backend().embedding_backward(dwte.get(), dwpe.get(), dout.get(), tokens.data(), kB, kT, kC, 0,
                                 kVp);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_EmbeddingBackward)->Unit(benchmark::kMicrosecond)->UseRealTime();

// --- per-step passes over every parameter: AdamW, gradient zeroing, gradient norm ------------
// Arg: parameter count. 1M fits in the L3 cache (compute-bound view); 124M is GPT-2 small,
// where the passes stream from memory as they do in a training step.
constexpr std::int64_t kCacheParams = 1 << 20;
constexpr std::int64_t kModelParams = 124'475'904;  // GPT-2 124M with Vp = 50304

void BM_AdamW(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  Buffer param(n), grad(n, -0.01f, 0.01f), m(n, 0.0f, 0.0f), v(n, 0.0f, 0.0f);
  AdamWArgs args;
  args.lr = 3e-4f;
  args.weight_decay = 0.1f;
  for (auto _ : state) {
    backend().adamw_update(param.get(), grad.get(), m.get(), v.get(), n, args);
    args.step++;
    benchmark::ClobberMemory();
  }
  set_bytes(state, 7.0 * sizeof(float) * static_cast<double>(n));  // 4 streams read, 3 written
}
BENCHMARK(BM_AdamW)->Arg(kCacheParams)->Arg(kModelParams)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same update with a decay mask (src/train/adamw.cpp: one call over tensors with and
// without decay). The CPU backend turns the mask back into runs of one decay (whole words at a
// time) and updates each run as the unmasked call does: the cost is the scan and one parallel
// loop per run. The pattern alternates 65536 decayed and 768 undecayed elements (a matrix and a
// bias): 16 pairs of runs in 1M, 1876 in 124M, where GPT-2 124M itself has about 100.
void BM_AdamWDecayMask(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  Buffer param(n), grad(n, -0.01f, 0.01f), m(n, 0.0f, 0.0f), v(n, 0.0f, 0.0f);
  std::vector<int32_t> words(trident::kernels::adamw_decay_mask_words(n), 0);
  for (std::size_t i = 0; i < n; ++i) {
    if (i % (65536 + 768) < 65536) words[i / 32] = static_cast<int32_t>(static_cast<uint32_t>(words[i / 32]) | (1u << (i % 32)));
  }
  AdamWArgs args;
  args.lr = 3e-4f;
  args.weight_decay = 0.1f;
  args.decay_mask = words.data();  // CPU backend: host memory is its device memory
  for (auto _ : state) {
    backend().adamw_update(param.get(), grad.get(), m.get(), v.get(), n, args);
    args.step++;
    benchmark::ClobberMemory();
  }
  set_bytes(state, (7.0 * sizeof(float) + 1.0 / 8.0) * static_cast<double>(n));
}
BENCHMARK(BM_AdamWDecayMask)->Arg(kCacheParams)->Arg(kModelParams)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_FillZero(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  Buffer x(n, 0.0f, 0.0f);
  for (auto _ : state) {
    backend().fill_zero(x.get(), n);
    benchmark::ClobberMemory();
  }
  set_bytes(state, sizeof(float) * static_cast<double>(n));
}
BENCHMARK(BM_FillZero)->Arg(kCacheParams)->Arg(kModelParams)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SumSquares(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  Buffer x(n, -0.01f, 0.01f);
  for (auto _ : state) benchmark::DoNotOptimize(backend().sum_squares(x.get(), n));
  set_bytes(state, sizeof(float) * static_cast<double>(n));
}
BENCHMARK(BM_SumSquares)->Arg(kCacheParams)->Arg(kModelParams)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
