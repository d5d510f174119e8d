// Playground: the cross-entropy backward on the forward's row statistics, in place over the
// logits as the model runs it (Gpt::head_backward: dlogits = logits), dl = (exp(l - max) / sum -
// [target]) * dloss, padding written 0. 1.34 ms of every GPT-2 step on one H100 at micro-batch 8
// (2026-11-23, the same at 124M and 774M: the vocabulary sets it): the logits read and written
// once, 1.65 GB in bf16, about 1.2 TB/s. Reference: the CPU twin
// trident::kernels::cpu::cross_entropy_backward_sharded on the CPU forward's statistics.
//
//   playground_cross_entropy_backward [variant|all] [reps]   shape: CE_N (8192), CE_V (50257),
//                                                             CE_VP (50304)
//
// Variants (the production launcher, kernels/cuda/cross_entropy.cu):
//   1  fp32 logits, CrossEntropyLoads::kValues (the default): a block of 256 threads per row, one
//      value per thread and iteration; in place, so each load waits for the store before it;
//   2  fp32 logits, CrossEntropyLoads::kPacks: 16 bytes (4 values) per thread and iteration;
//   3  bf16 logits (train.precision = bf16: what the model runs), kValues;
//   4  bf16 logits, kPacks (8 values per load).
// 1 against 2 and 3 against 4: what the wider accesses save. 2 and 4 must give the bits of 1 and
// 3 (checked, each against a run of the other in the same variant): the same arithmetic on each
// value.
//
// The loss and the gradient together, bf16, in place (a training step without tensor
// parallelism: Gpt::forward with its training_dloss; cuda::cross_entropy_forward_backward):
//   5  the two kernels the model ran before, cross_entropy_forward then this backward on its
//      statistics, kValues (timed together: three passes over the logits in memory);
//   6  the fused kernel, kValues: one block per row reads the row for the statistics and again,
//      from L2 if it is still there, for the gradient;
//   7  as 5 with kPacks;   8  as 6 with kPacks.
//   9  the fused kernel with the row held in shared memory between its two passes, 16-byte
//      packs (perf/kernels/held_row_cross_entropy.cuh): one read of the row from memory whatever
//      L2 holds;
//   10 the same with the row held in registers (one block an SM);
//   11 8 as held_row_cross_entropy.cuh writes it (the second pass reads the row again), a control
//      for 12;
//   12 11 with the gradient stored evict-first (st.global.cs), so that L2 lets the gradient go
//      before the rows other blocks have still to read again.
// 6 against 5 and 8 against 7: what the fused kernel saves; 9 and 10 against 8: what its second
// read costs when it is not served by L2; 12 against 11: what the store hint gives. 6 and 8 to 12
// must give the losses and gradients of the two kernels bit for bit (checked against a run of
// them in the same variant). Their rates count the bytes each must move (fused: one read and
// one write of the logits; the two kernels: two reads and a write), so compare their times.
//
// Tolerances: fp32, the exponential and the division differ from the twin's in the last bits,
// 1e-5 of the largest gradient (as cross_entropy_forward's); bf16, each gradient rounded once:
// one bf16 unit, 2^-7 of the largest.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <utility>
#include <vector>

#include "kernels/cpu/cross_entropy.h"         // cpu::cross_entropy_forward, cross_entropy_backward_sharded
#include "kernels/cuda/cross_entropy.cuh"      // cuda::cross_entropy_*, CrossEntropyLoads
#include "perf/kernels/cross_entropy_cases.h"  // test_logits, test_targets
#include "perf/kernels/held_row_cross_entropy.cuh"  // held_row::forward_backward
#include "perf/kernels/playground.cuh"         // harness

namespace {

namespace pg = trident::playground;
namespace tk = trident::kernels;

}  // namespace

int main(int argc, char** argv) {
  const pg::Args args = pg::parse_args_or_exit(argc, argv, "playground_cross_entropy_backward");
  pg::require_gpu();
  const int N = pg::env_int("CE_N", 8192);
  const int V = pg::env_int("CE_V", 50257);
  const int Vp = pg::env_int("CE_VP", 50304);
  const std::size_t count = static_cast<std::size_t>(N) * Vp;
  std::printf("cross_entropy_backward_sharded (in place) N = %d, V = %d, Vp = %d, %d reps (median)\n", N, V, Vp,
              args.reps);

  // Logits with NaN padding (test_logits): the kernels must write the padding without using it.
  // The bf16 case reads the same logits rounded; each storage has its own twin's statistics.
  const std::vector<float> logits32 = pg::test_logits(N, V, Vp, 41);
  const std::vector<float> logits16 = pg::rounded_to_bf16(logits32);
  const std::vector<int32_t> targets = pg::test_targets(N, V, 42);
  const float dloss = 1.0f / static_cast<float>(N);
  struct Case {
    std::vector<float> row_max, row_sumexp, reference;
  };
  auto make_case = [&](const std::vector<float>& logits, bool bf16) {
    Case k;
    std::vector<float> losses(static_cast<std::size_t>(N));
    k.row_max.resize(static_cast<std::size_t>(N));
    k.row_sumexp.resize(static_cast<std::size_t>(N));
    tk::cpu::cross_entropy_forward(losses.data(), k.row_max.data(), k.row_sumexp.data(), logits.data(),
                                   targets.data(), N, V, Vp);
    k.reference.resize(count);
    tk::cpu::cross_entropy_backward_sharded(k.reference.data(), logits.data(), targets.data(), k.row_max.data(),
                                            k.row_sumexp.data(), dloss, N, V, Vp, 0);
    if (bf16) k.reference = pg::rounded_to_bf16(k.reference);
    return k;
  };
  const Case fp32 = make_case(logits32, false);
  const Case bf16 = make_case(logits16, true);

  const pg::DeviceBuffer<int32_t> d_targets = pg::upload(targets);
  const pg::DeviceBuffer<float> d_logits32(count);
  const pg::DeviceBuffer<std::uint16_t> d_logits16(count);
  const pg::DeviceBuffer<float> max32 = pg::upload(fp32.row_max), sum32 = pg::upload(fp32.row_sumexp);
  const pg::DeviceBuffer<float> max16 = pg::upload(bf16.row_max), sum16 = pg::upload(bf16.row_sumexp);
  const std::vector<std::uint16_t> logits16_bits = pg::encoded_bf16(logits16);
  const pg::Stream stream;
  pg::Timer timer(stream.get());

  auto measure = [&](bool sixteen, tk::CrossEntropyLoads access) {
    return [&, sixteen, access](int reps) {
      const Case& k = sixteen ? bf16 : fp32;
      auto launch_with = [&](tk::CrossEntropyLoads a) {
        const tk::ActPtr logits =
            sixteen ? tk::ActPtr(d_logits16.data(), tk::Precision::kBf16) : tk::ActPtr(d_logits32.data());
        tk::cuda::cross_entropy_backward_sharded(logits, logits, d_targets.data(), (sixteen ? max16 : max32).data(),
                                                 (sixteen ? sum16 : sum32).data(), dloss, N, V, Vp, 0, stream.get(),
                                                 a);
      };
      // One run from the logits (in place: the gradient overwrites them), its result read back.
      auto run_from_logits = [&](tk::CrossEntropyLoads a) {
        if (sixteen) {
          PG_CUDA_CHECK(
              cudaMemcpy(d_logits16.data(), logits16_bits.data(), d_logits16.bytes(), cudaMemcpyHostToDevice));
        } else {
          PG_CUDA_CHECK(cudaMemcpy(d_logits32.data(), logits32.data(), d_logits32.bytes(), cudaMemcpyHostToDevice));
        }
        PG_CUDA_CHECK(cudaDeviceSynchronize());
        launch_with(a);
        return sixteen ? pg::decoded_bf16(pg::download(d_logits16)) : pg::download(d_logits32);
      };
      pg::Outcome outcome;
      if (access == tk::CrossEntropyLoads::kPacks) {
        const std::vector<float> values = run_from_logits(tk::CrossEntropyLoads::kValues);
        outcome.checks.push_back(pg::identical("dlogits bits against kValues", run_from_logits(access), values));
      }
      outcome.checks.push_back(
          pg::validate("dlogits", run_from_logits(access), k.reference, sixteen ? 1.0 / 128.0 : 1e-5));
      // The timed runs each start from the previous run's gradients: finite values, the same work.
      outcome.median_ms = timer.median_ms(reps, [&] { launch_with(access); });
      outcome.bytes = (sixteen ? 2.0 : 4.0) * 2.0 * static_cast<double>(count);
      return outcome;
    };
  };
  // Variants 5 to 8: the bf16 loss and gradient from the logits, the two kernels or the fused one.
  const pg::DeviceBuffer<float> d_losses(static_cast<std::size_t>(N)), d_max(static_cast<std::size_t>(N)),
      d_sum(static_cast<std::size_t>(N));
  std::vector<float> losses16(static_cast<std::size_t>(N));
  {
    std::vector<float> max(losses16.size()), sum(losses16.size());
    tk::cpu::cross_entropy_forward(losses16.data(), max.data(), sum.data(), logits16.data(), targets.data(), N, V, Vp);
  }
  // How variants 5 to 12 make the loss and the gradient.
  enum class Kernels { kTwo, kFused, kRowInSharedMemory, kRowInRegisters, kRereadAsProduction, kRereadEvictFirst };
  auto measure_with_loss = [&](Kernels how, tk::CrossEntropyLoads access) {
    return [&, how, access](int reps) {
      const tk::ActPtr logits(d_logits16.data(), tk::Precision::kBf16);
      auto launch_with = [&](Kernels k) {
        using pg::held_row::RowHeldIn;
        switch (k) {
          case Kernels::kTwo:
            tk::cuda::cross_entropy_forward(d_losses.data(), d_max.data(), d_sum.data(), logits, d_targets.data(), N,
                                            V, Vp, stream.get());
            tk::cuda::cross_entropy_backward_sharded(logits, logits, d_targets.data(), d_max.data(), d_sum.data(),
                                                     dloss, N, V, Vp, 0, stream.get(), access);
            break;
          case Kernels::kFused:
            tk::cuda::cross_entropy_forward_backward(d_losses.data(), d_max.data(), d_sum.data(), logits, logits,
                                                     d_targets.data(), dloss, N, V, Vp, stream.get(), access);
            break;
          case Kernels::kRowInSharedMemory:
          case Kernels::kRowInRegisters:
          case Kernels::kRereadAsProduction:
          case Kernels::kRereadEvictFirst: {
            using pg::held_row::StoreHint;
            const RowHeldIn where = k == Kernels::kRowInSharedMemory ? RowHeldIn::kSharedMemory
                                    : k == Kernels::kRowInRegisters  ? RowHeldIn::kRegisters
                                                                     : RowHeldIn::kL2;
            const StoreHint hint = k == Kernels::kRereadEvictFirst ? StoreHint::kEvictFirst : StoreHint::kNormal;
            pg::held_row::forward_backward(where, hint, d_losses.data(), d_max.data(), d_sum.data(), logits, logits,
                                           d_targets.data(), dloss, N, V, Vp, stream.get());
            break;
          }
        }
      };
      // One run from the logits, its gradients and losses read back.
      auto run_from_logits = [&](Kernels k) {
        PG_CUDA_CHECK(cudaMemcpy(d_logits16.data(), logits16_bits.data(), d_logits16.bytes(), cudaMemcpyHostToDevice));
        PG_CUDA_CHECK(cudaDeviceSynchronize());
        launch_with(k);
        PG_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
        return std::make_pair(pg::decoded_bf16(pg::download(d_logits16)), pg::download(d_losses));
      };
      pg::Outcome outcome;
      const auto [dlogits, losses] = run_from_logits(how);
      if (how != Kernels::kTwo) {
        const auto [two_dlogits, two_losses] = run_from_logits(Kernels::kTwo);
        outcome.checks.push_back(pg::identical("dlogits bits against the two kernels", dlogits, two_dlogits));
        outcome.checks.push_back(pg::identical("loss bits against the two kernels", losses, two_losses));
      }
      outcome.checks.push_back(pg::validate("dlogits", dlogits, bf16.reference, 1.0 / 128.0));
      outcome.checks.push_back(pg::validate("loss", losses, losses16, 1e-5));
      // The timed runs each start from the previous run's gradients: finite values, the same work.
      outcome.median_ms = timer.median_ms(reps, [&] { launch_with(how); });
      outcome.bytes = 2.0 * (how == Kernels::kTwo ? 3.0 : 2.0) * static_cast<double>(count);
      return outcome;
    };
  };
  using Access = tk::CrossEntropyLoads;
  const std::vector<pg::Variant> variants = {
      {"fp32 logits, one value a thread (the default)", measure(false, Access::kValues)},
      {"fp32 logits, 16-byte packs", measure(false, Access::kPacks)},
      {"bf16 logits, one value a thread (the model's bf16)", measure(true, Access::kValues)},
      {"bf16 logits, 16-byte packs", measure(true, Access::kPacks)},
      {"bf16 loss then gradient, two kernels (the model before), one value a thread",
       measure_with_loss(Kernels::kTwo, Access::kValues)},
      {"bf16 loss and gradient, one kernel (the model's), one value a thread",
       measure_with_loss(Kernels::kFused, Access::kValues)},
      {"bf16 loss then gradient, two kernels, 16-byte packs", measure_with_loss(Kernels::kTwo, Access::kPacks)},
      {"bf16 loss and gradient, one kernel, 16-byte packs", measure_with_loss(Kernels::kFused, Access::kPacks)},
      {"bf16 loss and gradient, one kernel, the row held in shared memory",
       measure_with_loss(Kernels::kRowInSharedMemory, Access::kPacks)},
      {"bf16 loss and gradient, one kernel, the row held in registers",
       measure_with_loss(Kernels::kRowInRegisters, Access::kPacks)},
      {"bf16 loss and gradient, one kernel, 8 as held_row writes it", measure_with_loss(Kernels::kRereadAsProduction,
                                                                                      Access::kPacks)},
      {"bf16 loss and gradient, one kernel, 11 with evict-first stores",
       measure_with_loss(Kernels::kRereadEvictFirst, Access::kPacks)},
  };
  return pg::run_variants(args, variants, pg::Workload{});
}
