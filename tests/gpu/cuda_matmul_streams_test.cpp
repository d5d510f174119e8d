// run.matmul_backward_streams = two (MatmulBackwardStreams::kTwo: a linear layer's weight and bias
// gradients queued on a second stream beside its input gradient, kernels/cuda/side_stream.cuh)
// against the default one stream: the same bits in every output, in fp32 and bf16, with and
// without the input gradient and the bias, through the MLP's fused GELU gradient and through its
// separate kernels. And the side stream's two orderings, which the CUDA emulation's deferred
// schedule (a stream's work runs only when something needs it) shows when one is missing: work
// forked onto the side stream sees what the compute stream queued before the fork, and the
// compute stream's work after the join sees what the side stream did.
// And run.matmul_bias_gradients = epilogue (MatmulBiasGradients::kEpilogue: a 16-bit layer's bias
// gradient summed in its weight gradient's cuBLASLt GEMM) against the column sums: the same input
// gradient bits, the weight and bias gradients equal to rounding, accumulated over two calls.
// And run.matmul_algorithms = timed (MatmulAlgorithms::kTimed: each cuBLASLt product shape's
// kernel chosen by timing the heuristic's answers on the first call's operands, the backward's
// two products on cuBLASLt too) against the heuristic's first: every output equal to rounding,
// the weight gradient accumulated once a call (the timing's runs go to a scratch), and the
// forward's outputs those of the call (the timing's runs write them first).
#include <gtest/gtest.h>

#include <cublas_v2.h>     // CUBLAS_DEFAULT_MATH
#include <cuda_runtime.h>  // the orderings' streams and copies

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"              // make_backend, BackendOptions, MatmulBackwardStreams
#include "kernels/choice_table.h"         // choice_table_lines
#include "kernels/cuda/algorithm_timing.h"  // parse_chosen_answer, format_chosen_answer
#include "kernels/cuda/cuda_backend.h"    // cuda::CudaBackend::epilogue_counts
#include "kernels/cuda/side_stream.cuh"   // cuda::SideStream
#include "kernels/precision.h"            // Precision, encode_bf16
#include "tests/gpu/twin_test_support.h"  // count_of, bits_of

namespace trident::kernels::gpu_test {
namespace {

// A buffer on one backend holding host words (fp32 values, or 16-bit patterns two to a float),
// read back as bits, so that 16-bit pairs that read as NaN still compare.
class Words {
 public:
  Words(Backend& backend, const std::vector<float>& words)
      : backend_(&backend), count_(words.size()), ptr_(backend.allocate(words.size())) {
    backend.copy_to_device(ptr_, words.data(), count_);
  }
  ~Words() { backend_->release(ptr_); }
  Words(const Words&) = delete;
  Words& operator=(const Words&) = delete;

  float* get() { return ptr_; }
  std::vector<uint32_t> bits() {
    std::vector<float> host(count_);
    backend_->copy_to_host(host.data(), ptr_, count_);
    return bits_of(host);
  }

 private:
  Backend* backend_;
  std::size_t count_;
  float* ptr_;
};

// `n` values uniform in [lo, hi] as `precision` stores them: fp32 values, or bf16 patterns two to
// a float.
std::vector<float> stored_values(std::size_t n, float lo, float hi, Precision precision, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  if (precision == Precision::kFp32) return values;
  std::vector<uint16_t> halves(n + n % 2, 0);
  for (std::size_t i = 0; i < n; ++i) halves[i] = encode_bf16(values[i]);
  std::vector<float> words(halves.size() / 2);
  std::memcpy(words.data(), halves.data(), words.size() * sizeof(float));
  return words;
}

struct Case {
  std::string name;
  Precision precision;
  MatmulEpilogues epilogues;
  bool through_gelu;  // matmul_backward_through_gelu (dinp is then dpre, and always made)
  bool with_dinp, with_bias;
  int N, C, OC;
};

std::vector<float> dweight_start(const Case& c) {
  return stored_values(count_of(c.OC, c.C), -1.0f, 1.0f, Precision::kFp32, 6);
}

// Two backward calls of `c` (the second accumulating onto the first's parameter gradients, as
// micro-batches do) on a backend with `streams` and `bias_gradients`; every output's bits: dinp (or
// dpre), dweight, dbias. `epilogues_run`, when given, counts the calls cuBLASLt took.
// `algorithms` and `timed` (when given: what the timing found) for run.matmul_algorithms.
std::vector<std::vector<uint32_t>> backward_bits(const Case& c, MatmulBackwardStreams streams,
                                                 MatmulBiasGradients bias_gradients = MatmulBiasGradients::kColumnSums,
                                                 std::size_t* epilogues_run = nullptr,
                                                 MatmulAlgorithms algorithms = MatmulAlgorithms::kHeuristic,
                                                 std::vector<cuda::TimedMatmulShape>* timed = nullptr) {
  auto backend = make_backend(Device::kCuda, 1, 0,
                              {.matmul_epilogues = c.epilogues,
                               .matmul_backward_streams = streams,
                               .matmul_bias_gradients = bias_gradients,
                               .matmul_algorithms = algorithms});
  const Precision p = c.precision;
  Words dout(*backend, stored_values(count_of(c.N, c.OC), -1.0f, 1.0f, p, 1));
  Words inp(*backend, stored_values(count_of(c.N, c.C), -1.0f, 1.0f, p, 2));
  Words weight(*backend, stored_values(count_of(c.OC, c.C), -0.5f, 0.5f, p, 3));
  Words pre(*backend, stored_values(count_of(c.N, c.C), -3.0f, 3.0f, p, 4));
  Words dinp(*backend, stored_values(count_of(c.N, c.C), 5.0f, 9.0f, p, 5));  // stale: overwritten
  Words dweight(*backend, dweight_start(c));
  Words dbias(*backend, stored_values(count_of(c.OC, 1), -1.0f, 1.0f, Precision::kFp32, 7));
  auto act = [&](Words& w) {
    return p == Precision::kFp32 ? ActPtr(w.get()) : ActPtr(reinterpret_cast<uint16_t*>(w.get()), p);
  };
  for (int call = 0; call < 2; ++call) {
    float* db = c.with_bias ? dbias.get() : nullptr;
    if (c.through_gelu) {
      backend->matmul_backward_through_gelu(act(dinp), dweight.get(), db, act(dout), act(inp), act(weight), act(pre),
                                            c.N, c.C, c.OC);
    } else {
      backend->matmul_backward(c.with_dinp ? act(dinp) : ActPtr(nullptr), dweight.get(), db,
                               act(dout), act(inp), act(weight), c.N, c.C, c.OC);
    }
  }
  if (epilogues_run != nullptr) *epilogues_run = dynamic_cast<cuda::CudaBackend&>(*backend).epilogue_counts().fused;
  if (timed != nullptr) *timed = dynamic_cast<cuda::CudaBackend&>(*backend).timed_matmul_shapes();
  // No synchronize first: the copies back are queued on the compute stream, so only the join
  // makes them wait for the side stream.
  return {dinp.bits(), dweight.bits(), dbias.bits()};
}

// max |a - b| / max |b| over a tensor (twin_test_support.h's measure) of bits read as floats; a
// NaN or infinity in either (a sum of stale or unwritten memory) makes it infinite.
double relative_difference(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  double worst = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    float x = 0.0f, y = 0.0f;
    std::memcpy(&x, &a[i], sizeof x);
    std::memcpy(&y, &b[i], sizeof y);
    if (!std::isfinite(x) || !std::isfinite(y)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, static_cast<double>(std::fabs(x - y)));
    scale = std::max(scale, static_cast<double>(std::fabs(y)));
  }
  return scale > 0.0 ? worst / scale : worst;
}

// The bias sums in the weight GEMM's epilogue against the column sums: the input gradient is the
// same call (the same bits); the weight gradient is another GEMM's (another algorithm may add in
// another order) and the bias sums are another reduction's, both over N terms: equal to fp32
// rounding (kReductionTolerance), while a sum over the wrong axis, a missed accumulation (the
// epilogue overwrites its output) or a stale scratch shows as 1e-2 or more. Through the fused
// DGELU as well, and on the side stream of run.matmul_backward_streams = two (with a cuBLASLt of
// its own, beside the DGELU GEMM); where the epilogue does not apply (fp32, no bias), the column
// sums' very bits.
TEST(MatmulBiasGradients, TheEpilogueSumsAgreeWithTheColumnSums) {
  const MatmulEpilogues fused = MatmulEpilogues::kFused;
  const Precision fp32 = Precision::kFp32, bf16 = Precision::kBf16;
  struct Applies {
    Case c;
    MatmulBackwardStreams streams;
    bool epilogue;  // whether the bias sums go to the epilogue here
  };
  const MatmulBackwardStreams one = MatmulBackwardStreams::kOne, two = MatmulBackwardStreams::kTwo;
  const Applies cases[] = {
      {{"bf16, all outputs", bf16, fused, false, true, true, 128, 64, 192}, one, true},
      {{"bf16, no input gradient", bf16, fused, false, false, true, 96, 64, 128}, one, true},
      {{"bf16 through GELU, cuBLASLt's DGELU epilogue", bf16, fused, true, true, true, 128, 256, 64}, one, true},
      {{"bf16, two streams: on the side stream", bf16, fused, false, true, true, 128, 64, 192}, two, true},
      {{"bf16 through GELU, two streams: beside the DGELU GEMM", bf16, fused, true, true, true, 128, 256, 64}, two,
       true},
      {{"bf16, no bias: nothing to sum", bf16, fused, false, true, false, 128, 64, 64}, one, false},
      {{"fp32: no cuBLASLt", fp32, MatmulEpilogues::kSeparate, false, true, true, 96, 64, 192}, one, false},
  };
  for (const Applies& a : cases) {
    SCOPED_TRACE(a.c.name);
    std::size_t plain_run = 0, epilogue_run = 0;
    const auto sums = backward_bits(a.c, a.streams, MatmulBiasGradients::kColumnSums, &plain_run);
    const auto in_gemm = backward_bits(a.c, a.streams, MatmulBiasGradients::kEpilogue, &epilogue_run);
    EXPECT_EQ(in_gemm[0], sums[0]) << "dinp";
    if (!a.epilogue) {
      EXPECT_EQ(in_gemm[1], sums[1]) << "dweight";
      EXPECT_EQ(in_gemm[2], sums[2]) << "dbias";
      EXPECT_EQ(epilogue_run, plain_run);
      continue;
    }
    EXPECT_LE(relative_difference(in_gemm[1], sums[1]), kReductionTolerance) << "dweight";
    EXPECT_LE(relative_difference(in_gemm[2], sums[2]), kReductionTolerance) << "dbias";
    EXPECT_NE(sums[2], bits_of(stored_values(count_of(a.c.OC, 1), -1.0f, 1.0f, Precision::kFp32, 7)))
        << "dbias was not accumulated";
#ifdef TRIDENT_CUDA_EMULATION
    // The emulated cuBLASLt offers the epilogue: two more calls ran in it (one per backward).
    EXPECT_EQ(epilogue_run, plain_run + 2);
#else
    // A GPU's cuBLASLt may refuse it (then the column sums ran, and the values above held them):
    // said, for the sitting that times it.
    std::printf("[ info ] %s: cuBLASLt %s the bias-gradient epilogue\n", a.c.name.c_str(),
                epilogue_run == plain_run + 2 ? "took" : "refused");
#endif
  }
}

// max |a - b| / max |b| over 16-bit bf16 patterns, two to a word (the 16-bit outputs' bits).
double bf16_relative_difference(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  std::vector<uint32_t> wide_a, wide_b;
  for (std::size_t i = 0; i < a.size(); ++i) {
    for (int half = 0; half < 2; ++half) {
      wide_a.push_back(((a[i] >> (16 * half)) & 0xffffu) << 16);
      wide_b.push_back(((b[i] >> (16 * half)) & 0xffffu) << 16);
    }
  }
  return relative_difference(wide_a, wide_b);
}

// One bf16 unit of the largest value (2^-7 of max |ref|): two kernels' sums in another order
// may round a 16-bit output to its neighbour, no more.
constexpr double kBf16Unit = 1.0 / 128;

// The timing found answers to time at every shape (the emulated cuBLASLt offers three, a GPU's
// heuristic one or more; a shape with one is not timed) and kept one of them.
void expect_timed(const std::vector<cuda::TimedMatmulShape>& shapes, std::size_t at_least) {
#ifdef TRIDENT_CUDA_EMULATION
  EXPECT_GE(shapes.size(), at_least);
#else
  (void)at_least;  // a GPU's heuristic may offer one answer at a shape: nothing to time there
#endif
  for (const auto& s : shapes) {
    EXPECT_GE(s.answers, 2) << s.m << " x " << s.n << " x " << s.k;
    EXPECT_GE(s.chosen, 0);
    EXPECT_LT(s.chosen, s.answers);
    EXPECT_GE(s.first_ms, 0.0f);
    EXPECT_GE(s.chosen_ms, 0.0f);
#ifdef TRIDENT_CUDA_EMULATION
    EXPECT_EQ(s.answers, 3);
#else
    std::printf("[ info ] %d x %d x %d: answer %d of %d, %.4f ms against the first's %.4f ms\n", s.m, s.n, s.k,
                s.chosen + 1, s.answers, static_cast<double>(s.chosen_ms), static_cast<double>(s.first_ms));
#endif
  }
}

TEST(MatmulAlgorithms, TimedBackwardAgreesWithTheHeuristicsFirst) {
  const MatmulEpilogues fused = MatmulEpilogues::kFused;
  const Precision bf16 = Precision::kBf16;
  const MatmulBackwardStreams one = MatmulBackwardStreams::kOne, two = MatmulBackwardStreams::kTwo;
  const MatmulBiasGradients sums = MatmulBiasGradients::kColumnSums, epilogue = MatmulBiasGradients::kEpilogue;
  struct Timed {
    Case c;
    MatmulBackwardStreams streams;
    MatmulBiasGradients bias_gradients;
    std::size_t shapes;  // product shapes timed at least
  };
  const Timed cases[] = {
      {{"bf16, all outputs", bf16, fused, false, true, true, 128, 64, 192}, one, sums, 2},
      {{"bf16, no input gradient", bf16, fused, false, false, true, 96, 64, 128}, one, sums, 1},
      {{"bf16 through GELU, cuBLASLt's DGELU epilogue", bf16, fused, true, true, true, 128, 256, 64}, one, sums, 2},
      {{"bf16, two streams: the weight gradient timed on the side stream", bf16, fused, false, true, true, 128, 64,
        192},
       two, sums, 2},
      {{"bf16, the bias sums in the epilogue, timed", bf16, fused, false, true, true, 128, 64, 192}, one, epilogue, 2},
  };
  for (const Timed& t : cases) {
    SCOPED_TRACE(t.c.name);
    std::vector<cuda::TimedMatmulShape> shapes;
    const auto first = backward_bits(t.c, t.streams, t.bias_gradients);
    const auto timed = backward_bits(t.c, t.streams, t.bias_gradients, nullptr, MatmulAlgorithms::kTimed, &shapes);
    EXPECT_LE(bf16_relative_difference(timed[0], first[0]), kBf16Unit) << "dinp";
    EXPECT_LE(relative_difference(timed[1], first[1]), kReductionTolerance) << "dweight";
    EXPECT_LE(relative_difference(timed[2], first[2]), kReductionTolerance) << "dbias";
    EXPECT_NE(first[1], bits_of(dweight_start(t.c))) << "dweight was not accumulated";
    expect_timed(shapes, t.shapes);
  }
}

TEST(MatmulAlgorithms, TimedForwardAgreesWithTheHeuristicsFirst) {
  const int N = 128, C = 64, OC = 192;
  const Precision p = Precision::kBf16;
  std::vector<std::vector<uint32_t>> results[2];
  std::vector<cuda::TimedMatmulShape> shapes;
  for (int timed = 0; timed < 2; ++timed) {
    auto backend = make_backend(
        Device::kCuda, 1, 0, {.matmul_algorithms = timed == 1 ? MatmulAlgorithms::kTimed : MatmulAlgorithms::kHeuristic});
    Words inp(*backend, stored_values(count_of(N, C), -1.0f, 1.0f, p, 1));
    Words weight(*backend, stored_values(count_of(OC, C), -0.5f, 0.5f, p, 2));
    Words bias(*backend, stored_values(count_of(OC, 1), -0.5f, 0.5f, p, 3));
    Words out(*backend, stored_values(count_of(N, OC), 5.0f, 9.0f, p, 4));  // stale: overwritten
    Words gelu_out(*backend, stored_values(count_of(N, OC), 5.0f, 9.0f, p, 5));
    Words pre(*backend, stored_values(count_of(N, OC), 5.0f, 9.0f, p, 6));
    auto act = [&](Words& w) { return ActPtr(reinterpret_cast<uint16_t*>(w.get()), p); };
    backend->matmul_forward(act(out), act(inp), act(weight), act(bias), N, C, OC);
    backend->matmul_gelu_forward(act(gelu_out), act(pre), act(inp), act(weight), act(bias), N, C, OC);
    results[timed] = {out.bits(), gelu_out.bits(), pre.bits()};
    if (timed == 1) {
      shapes = dynamic_cast<cuda::CudaBackend&>(*backend).timed_matmul_shapes();
      const std::string report = backend->matmul_algorithm_report();
      const std::string want = "matmul algorithms: " + std::to_string(shapes.size()) + " cuBLASLt product shapes timed";
      if (shapes.empty()) {
        EXPECT_EQ(report, "");  // a GPU's heuristic with one answer a shape: nothing timed
      } else {
        EXPECT_EQ(report.rfind(want, 0), 0u) << report;
      }
    }
  }
  const char* names[] = {"out", "gelu out", "pre"};
  for (int i = 0; i < 3; ++i) {
    // Plus 1e-3 for the GELU: another kernel's epilogue may evaluate its tanh otherwise.
    EXPECT_LE(bf16_relative_difference(results[1][i], results[0][i]), kBf16Unit + (i == 1 ? 1e-3 : 0.0)) << names[i];
  }
  expect_timed(shapes, 2);
}

TEST(MatmulAlgorithms, TheBackendLineNamesTheTiming) {
  auto timed = make_backend(Device::kCuda, 1, 0, {.matmul_algorithms = MatmulAlgorithms::kTimed});
  EXPECT_NE(timed->name().find("cuBLASLt algorithms timed per product shape"), std::string::npos) << timed->name();
  auto first = make_backend(Device::kCuda, 1, 0);
  EXPECT_EQ(first->name().find("timed"), std::string::npos) << first->name();
  EXPECT_EQ(first->matmul_algorithm_report(), "");  // nothing timed
}

// A timed backend's bf16 linear layer, forward with its bias and backward with both gradients;
// `table`, when given, taken before the calls (`before`) or between the forward and the backward.
// The outputs' bits, and what the backend says it chose.
struct LayerRun {
  std::vector<std::vector<uint32_t>> bits;  // out, dinp, dweight (fp32, accumulated onto a start)
  std::vector<cuda::TimedMatmulShape> shapes;
  std::string table;   // matmul_algorithm_choices() after the calls
  std::string report;  // matmul_algorithm_report()
  bool taken = false;
};
LayerRun timed_layer(const std::string* table = nullptr, bool before = true) {
  const int N = 128, C = 64, OC = 192;
  const Precision p = Precision::kBf16;
  auto backend = make_backend(Device::kCuda, 1, 0, {.matmul_algorithms = MatmulAlgorithms::kTimed});
  Words inp(*backend, stored_values(count_of(N, C), -1.0f, 1.0f, p, 1));
  Words weight(*backend, stored_values(count_of(OC, C), -0.5f, 0.5f, p, 2));
  Words bias(*backend, stored_values(count_of(OC, 1), -0.5f, 0.5f, p, 3));
  Words out(*backend, stored_values(count_of(N, OC), 5.0f, 9.0f, p, 4));
  Words dout(*backend, stored_values(count_of(N, OC), -1.0f, 1.0f, p, 5));
  Words dinp(*backend, stored_values(count_of(N, C), 5.0f, 9.0f, p, 6));
  Words dweight(*backend, stored_values(count_of(OC, C), -1.0f, 1.0f, Precision::kFp32, 7));
  auto act = [&](Words& w) { return ActPtr(reinterpret_cast<uint16_t*>(w.get()), p); };
  LayerRun run;
  if (table != nullptr && before) run.taken = backend->adopt_matmul_algorithm_choices(*table);
  backend->matmul_forward(act(out), act(inp), act(weight), act(bias), N, C, OC);
  if (table != nullptr && !before) run.taken = backend->adopt_matmul_algorithm_choices(*table);
  backend->matmul_backward(act(dinp), dweight.get(), nullptr, act(dout), act(inp), act(weight), N, C, OC);
  run.bits = {out.bits(), dinp.bits(), dweight.bits()};
  run.shapes = dynamic_cast<cuda::CudaBackend&>(*backend).timed_matmul_shapes();
  run.table = backend->matmul_algorithm_choices();
  run.report = backend->matmul_algorithm_report();
  return run;
}

// The table with every shape on its last answer (the emulated cuBLASLt's third, whose sums round
// otherwise than the first's), and the number of shapes changed.
std::string on_last_answers(const std::string& table, int* changed) {
  std::string out;
  *changed = 0;
  for (const auto& [key, value] : choice_table_lines(table)) {
    std::optional<cuda::TimedMatmulShape> shape = cuda::parse_chosen_answer(value);
    const bool change = shape && shape->chosen != shape->answers - 1;
    if (change) {
      shape->chosen = shape->answers - 1;
      ++*changed;
    }
    out += key + " | " + (change ? cuda::format_chosen_answer(*shape) : value) + "\n";
  }
  return out;
}

// Each shape's answer in a table ("SHAPE: A of N"), without the times, which a shape this run
// timed itself keeps its own of.
std::vector<std::string> answers_of(const std::string& table) {
  std::vector<std::string> answers;
  for (const auto& [key, value] : choice_table_lines(table)) {
    const auto shape = cuda::parse_chosen_answer(value);
    answers.push_back(key + ": " + (shape ? std::to_string(shape->chosen) + " of " + std::to_string(shape->answers)
                                          : value));
  }
  return answers;
}

// The ranks agree on one table and a restart takes its checkpoint's (src/train): a backend that
// takes a table runs the table's kernel at each of its shapes, untimed, whether it takes it before
// the shape's first call or after (the kernel switched); one made by another cuBLASLt or GPU is
// refused. Without the taking, the emulated run keeps the heuristic's first answer and its bits.
TEST(MatmulAlgorithms, ATableTakenRunsItsKernels) {
  const LayerRun timed = timed_layer();
  ASSERT_FALSE(timed.table.empty()) << "nothing timed";
  ASSERT_EQ(timed.table.rfind("library | cuBLASLt ", 0), 0u) << timed.table;
  int changed = 0;
  const std::string last = on_last_answers(timed.table, &changed);
  if (changed == 0) GTEST_SKIP() << "every shape timed on its last answer already (a GPU's choice): nothing to switch";
  for (bool before : {true, false}) {
    SCOPED_TRACE(before ? "taken before the first calls" : "taken between the forward and the backward");
    const LayerRun taken = timed_layer(&last, before);
    EXPECT_TRUE(taken.taken);
    EXPECT_EQ(answers_of(taken.table), answers_of(last)) << "the backend's choices are not the table's";
    int adopted = 0;
    for (const auto& s : taken.shapes) adopted += s.adopted ? 1 : 0;
    // Taken before: every shape; after the forward: the backward's (the forward's switched too,
    // unless it was already on that answer).
    EXPECT_GE(adopted, before ? static_cast<int>(taken.shapes.size()) : 1);
    EXPECT_NE(taken.report.find("; " + std::to_string(adopted) + " of them on the answer another rank or the "
                                "checkpoint chose"),
              std::string::npos)
        << taken.report;
    if (before) {
      // The same kernels as a third backend that took the table: the same bits.
      const LayerRun again = timed_layer(&last, true);
      for (std::size_t i = 0; i < again.bits.size(); ++i) EXPECT_EQ(again.bits[i], taken.bits[i]) << i;
    }
#ifdef TRIDENT_CUDA_EMULATION
    // The third answer's fp32 weight gradient rounds otherwise than the first's.
    EXPECT_NE(taken.bits[2], timed.bits[2]) << "the table's kernels did not run";
#endif
  }
  // Another library's table: refused, the shapes timed here as usual.
  std::string other = last;
  other.replace(0, other.find('\n'), "library | cuBLASLt 1 on another GPU");
  const LayerRun refused = timed_layer(&other, true);
  EXPECT_FALSE(refused.taken);
  for (const auto& s : refused.shapes) EXPECT_FALSE(s.adopted);
#ifdef TRIDENT_CUDA_EMULATION
  EXPECT_EQ(answers_of(refused.table), answers_of(timed.table));  // the emulation's timing: the first answers
  EXPECT_EQ(refused.bits, timed.bits);
#endif
}

TEST(MatmulBiasGradients, TheBackendLineNamesTheEpilogue) {
  auto epilogue = make_backend(Device::kCuda, 1, 0, {.matmul_bias_gradients = MatmulBiasGradients::kEpilogue});
  EXPECT_NE(epilogue->name().find("bias gradients in the weight GEMM's epilogue"), std::string::npos)
      << epilogue->name();
  auto sums = make_backend(Device::kCuda, 1, 0);
  EXPECT_EQ(sums->name().find("bias gradients in"), std::string::npos) << sums->name();
}

TEST(MatmulBackwardStreams, TwoStreamsGiveTheOneStreamsBits) {
  const MatmulEpilogues fused = MatmulEpilogues::kFused, separate = MatmulEpilogues::kSeparate;
  const Precision fp32 = Precision::kFp32, bf16 = Precision::kBf16;
  const Case cases[] = {
      {"fp32, all outputs", fp32, separate, false, true, true, 96, 64, 192},
      {"fp32, no input gradient (nothing to overlap)", fp32, separate, false, false, true, 96, 64, 192},
      {"fp32, no bias, ragged", fp32, separate, false, true, false, 37, 24, 40},
      {"fp32 through GELU (separate kernels)", fp32, separate, true, true, true, 64, 128, 32},
      {"bf16, all outputs", bf16, fused, false, true, true, 128, 64, 192},
      {"bf16, no bias", bf16, fused, false, true, false, 128, 64, 64},
      {"bf16 through GELU, cuBLASLt's DGELU epilogue", bf16, fused, true, true, true, 128, 256, 64},
      {"bf16 through GELU, separate kernels", bf16, separate, true, true, true, 128, 256, 64},
      {"bf16 through GELU, a width the epilogue refuses (falls back)", bf16, fused, true, true, true, 64, 36, 48},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto one = backward_bits(c, MatmulBackwardStreams::kOne);
    const auto two = backward_bits(c, MatmulBackwardStreams::kTwo);
    const char* names[] = {"dinp", "dweight", "dbias"};
    for (std::size_t i = 0; i < one.size(); ++i) EXPECT_EQ(two[i], one[i]) << names[i];
    // The gradients were made at all (not the start values in both runs alike).
    EXPECT_NE(one[1], bits_of(dweight_start(c))) << "dweight was not accumulated";
  }
}

TEST(MatmulBackwardStreams, TheBackendLineNamesTwoStreams) {
  auto two = make_backend(Device::kCuda, 1, 0, {.matmul_backward_streams = MatmulBackwardStreams::kTwo});
  EXPECT_NE(two->name().find("matmul parameter gradients on a second stream"), std::string::npos) << two->name();
  auto one = make_backend(Device::kCuda, 1, 0);
  EXPECT_EQ(one->name().find("second stream"), std::string::npos) << one->name();
}

// The orderings on the bare runtime: a compute stream, the side stream, ints set by memsets and
// copied by device-to-device copies.
class SideStreamOrder : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaStreamCreate(&compute_), cudaSuccess);
    for (int** p : {&a_, &b_, &c_}) {
      ASSERT_EQ(cudaMalloc(p, sizeof(int)), cudaSuccess);
      ASSERT_EQ(cudaMemsetAsync(*p, 0, sizeof(int), compute_), cudaSuccess);
    }
    ASSERT_EQ(cudaStreamSynchronize(compute_), cudaSuccess);
  }
  void TearDown() override {
    for (int* p : {a_, b_, c_}) EXPECT_EQ(cudaFree(p), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(compute_), cudaSuccess);
  }
  static int value_of(const int* device) {
    int value = -1;
    EXPECT_EQ(cudaMemcpy(&value, device, sizeof value, cudaMemcpyDeviceToHost), cudaSuccess);
    return value;
  }
  cudaStream_t compute_ = nullptr;
  int *a_ = nullptr, *b_ = nullptr, *c_ = nullptr;
};

// a is written on the compute stream, then (forked) copied to b on the side stream; the side
// stream is waited for alone. Without the fork its copy could run first and read the old a.
TEST_F(SideStreamOrder, ForkedWorkSeesWhatTheComputeStreamQueuedBefore) {
  cuda::SideStream side(compute_, CUBLAS_DEFAULT_MATH);
  ASSERT_EQ(cudaMemsetAsync(a_, 0x11, sizeof(int), compute_), cudaSuccess);
  side.fork();
  ASSERT_EQ(cudaMemcpyAsync(b_, a_, sizeof(int), cudaMemcpyDeviceToDevice, side.stream()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(side.stream()), cudaSuccess);
  EXPECT_EQ(value_of(b_), 0x11111111);
}

// b is written on the side stream, then (joined) copied to c on the compute stream; the compute
// stream is waited for alone. Without the join the side stream's write might not have run.
TEST_F(SideStreamOrder, WorkAfterTheJoinSeesWhatTheSideStreamDid) {
  cuda::SideStream side(compute_, CUBLAS_DEFAULT_MATH);
  side.fork();
  ASSERT_EQ(cudaMemsetAsync(b_, 0x22, sizeof(int), side.stream()), cudaSuccess);
  side.join();
  ASSERT_EQ(cudaMemcpyAsync(c_, b_, sizeof(int), cudaMemcpyDeviceToDevice, compute_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(compute_), cudaSuccess);
  EXPECT_EQ(value_of(c_), 0x22222222);
}

}  // namespace
}  // namespace trident::kernels::gpu_test
