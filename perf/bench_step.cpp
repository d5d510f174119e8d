// A training step of GPT-2 124M on one rank (micro-batch 4 x sequence 64, fp32, CPU backend):
// forward, backward, global gradient norm and AdamW, timed against this machine's sgemm rate
// measured in the same program, so the ratio does not depend on which machine runs it.
//
//   OMP_NUM_THREADS=2 build/bin/bench_step --benchmark_min_time=5
//
// Counters: FLOPS = model FLOPs per second (6N + attention, docs/performance.md), sgemm_FLOPS
// = 1024^3 sgemm rate with the same threads, sgemm_fraction = FLOPS / sgemm_FLOPS.
#include <benchmark/benchmark.h>
#include <cblas.h>  // cblas_sgemm: the reference rate

#include <chrono>
#include <cstdio>
#include <string>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/timing_backend.h"
#include "src/model/gpt.h"
#include "src/train/adamw.h"

using namespace trident;

namespace {

int threads_from_env() {
  const char* text = std::getenv("OMP_NUM_THREADS");
  return text ? std::max(1, std::atoi(text)) : 2;
}

// Best-of sgemm rate on square 1024 matrices, over about half a second.
double sgemm_flops() {
  const int n = 1024;
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size());
  double best = 0.0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(600);
  for (int rep = 0; rep < 3 || std::chrono::steady_clock::now() < until; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rep > 0) best = std::max(best, 2.0 * n * n * n / s);
  }
  return best;
}

void BM_TrainStep(benchmark::State& state) {
  const int B = static_cast<int>(state.range(0)), T = static_cast<int>(state.range(1));
  auto backend = kernels::make_backend(kernels::Device::kCpu, threads_from_env());
  const model::GptConfig config{12, 12, 768, 1024, 50257, 50304};
  model::Gpt gpt(config, *backend, B, T);
  std::vector<float> init(gpt.params().total_count());
  model::initialize_parameters(gpt.params(), 1, init.data());
  gpt.set_parameters(0, init.data(), init.size());
  train::AdamW optimizer(gpt.params(), *backend, {0.9, 0.95, 1e-8, 0.1});
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> token(0, config.vocab - 1);
  std::vector<int32_t> tokens(static_cast<size_t>(B) * T), targets(tokens.size());
  for (auto& t : tokens) t = token(rng);
  for (auto& t : targets) t = token(rng);
  const double sgemm = sgemm_flops();
  int64_t step = 0;
  double seconds = 0.0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    gpt.zero_gradients();
    gpt.forward(tokens.data(), targets.data());
    gpt.backward(1.0f / static_cast<float>(B * T), {});
    const double norm_sq = backend->sum_squares(gpt.gradients(), gpt.params().total_count());
    benchmark::DoNotOptimize(norm_sq);
    optimizer.update(gpt.parameters(), gpt.gradients(), 1e-4, ++step);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const double flops_per_step = config.flops_per_token(T) * B * T;
  state.counters["FLOPS"] = benchmark::Counter(flops_per_step, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["sgemm_FLOPS"] = sgemm;
  const double model_flops = flops_per_step * static_cast<double>(state.iterations()) / seconds;
  state.counters["sgemm_fraction"] = model_flops / sgemm;
}

}  // namespace

// Per-kernel breakdown of `steps` steps (after one warm-up step), printed as a table.
void print_breakdown(int B, int T, int steps) {
  auto cpu = kernels::make_backend(kernels::Device::kCpu, threads_from_env());
  kernels::TimingBackend backend(*cpu);
  backend.set_measuring(true);
  const model::GptConfig config{12, 12, 768, 1024, 50257, 50304};
  model::Gpt gpt(config, backend, B, T);
  train::AdamW optimizer(gpt.params(), backend, {0.9, 0.95, 1e-8, 0.1});
  std::vector<int32_t> tokens(static_cast<size_t>(B) * T, 7), targets(tokens.size(), 11);
  double total = 0.0;
  for (int step = 0; step <= steps; ++step) {
    if (step == 1) backend.reset();
    const auto start = std::chrono::steady_clock::now();
    gpt.zero_gradients();
    gpt.forward(tokens.data(), targets.data());
    gpt.backward(1.0f / static_cast<float>(B * T), {});
    benchmark::DoNotOptimize(backend.sum_squares(gpt.gradients(), gpt.params().total_count()));
    optimizer.update(gpt.parameters(), gpt.gradients(), 1e-4, step + 1);
    if (step >= 1) total += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const std::string title = "breakdown of a GPT-2 124M step, B=" + std::to_string(B) + " T=" + std::to_string(T) +
                            ", " + std::to_string(threads_from_env()) + " threads, mean of " + std::to_string(steps) +
                            " steps after one warm-up step:";
  std::printf("%s", kernels::kernel_time_table(backend.totals(), steps, total, title).c_str());
}

BENCHMARK(BM_TrainStep)->Args({4, 64})->Unit(benchmark::kMillisecond)->UseRealTime();

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--breakdown") {
      print_breakdown(4, 64, 3);
      return 0;
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
