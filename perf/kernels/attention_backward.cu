// Playground: causal multi-head attention BACKWARD, GPT-2 layout, the contract of
// kernels/backend.h attention_backward: qkv[B,T,3C] holds q in channels [0,C), k in [C,2C),
// v in [2C,3C); head h owns channels [h*hs, (h+1)*hs) of each, hs = C/NH, scale 1/sqrt(hs),
// causal. Given dout[B,T,C] and the forward's out[B,T,C] and row log-sum-exp lse[B,NH,T], the
// backward OVERWRITES: dqkv = d(loss)/d(qkv), every element written, none read.
// Reference: the CPU twins trident::kernels::cpu::attention_forward (for lse), then
// cpu::attention_backward (scratch: cpu::attention_scratch_size(B, T, NH) floats).
//
//   playground_attention_backward [variant|all] [reps]
//   timed shape: ATTN_B (8) x ATTN_T (1024), ATTN_C (768), ATTN_NH (12); validated at
//   ATTN_VALIDATE_B (2) batch elements at T = ATTN_VALIDATE_T (256) and at a ragged
//   T = ATTN_RAGGED_T (200, not a multiple of 64).
//
// Variants:
//   1  production: cuda::attention_forward (untimed: it produces out and lse) then
//      cuda::attention_backward (timed): batched cuBLAS S = scale Q K^T into scratch and a row
//      kernel P = exp(S - L) (the probabilities recomputed, T x T in global memory), dP = dO V^T
//      into a second T x T region, a softmax-backward kernel dS = scale * P * (dP - rowsum(P dP)),
//      then three batched GEMMs dQ = dS K, dK = dS^T Q, dV = P^T dO (beta = 0) over the full
//      T x T square. fp32 (CUBLAS_DEFAULT_MATH).
//   2  production cuda::flash_attention_backward (kernels/cuda/flash_attention.cu, chosen by
//      run.attention = flash): flash-style backward, fp32, hs = 64 only. It never reads or
//      writes anything T x T:
//      from the forward it keeps only out[B,T,C] and the per-row log-sum-exp
//      L[b,h,t] = log sum_{t2<=t} exp(S[t,t2]) (S = scale q k^T), and recomputes
//      P[t,t2] = exp(S[t,t2] - L[t]) tile by tile. Untimed preparation: a fused forward like
//      attention_forward.cu's variant 2, which writes L too. Timed: three kernels (the
//      launcher takes Backend::attention_backward's arguments, its scratch holding D: a
//      drop-in under that contract),
//        (a) D[b,h,t] = dout[t] . out[t] over the head's 64 channels (= sum_t2 P dP, since
//            out[t] = sum_t2 P[t,t2] v[t2]; D replaces the T-term row sum of the softmax
//            backward by a 64-term one);
//        (b) dK, dV: one block per (batch, head, 64-key tile), one thread per key; loops over
//            the query tiles at or after the key tile (causal), recomputing per (query, key):
//            P = exp(S - L), dV += P dO, dP = dO . v, dS = P (dP - D), dK += dS q; at the end
//            dk = scale * dK, dv = dV;
//        (c) dQ: one block per (batch, head, 64-query tile), one thread per query; loops over
//            the key tiles up to the diagonal, recomputing P and dS the same way, dQ += dS k;
//            at the end dq = scale * dQ.
//      (b) writes only the k and v channels of dqkv, (c) only the q channels, each element by
//      exactly one thread, each sum in a fixed order: no atomics, the same bits on every run
//      (checked: two runs from the same state must agree bit for bit).
//
//   3  production cuda::flash_attention_backward on bf16 buffers (qkv, dout, out and dqkv
//      16-bit, lse and D fp32: what train.precision = bf16 with run.attention = flash runs):
//      D, then the tensor-core dK/dV and dQ kernels of kernels/cuda/flash_attention_mma.cu
//      (mma.sync; P and dS rounded to bf16 as operands). Until 2026-11-22 variant 2's scalar
//      kernels on the bf16 storage policy (the H100 figures of that date).
//   4  tensor-core flash backward on bf16 buffers (perf/kernels/flash_tensor_core_backward.cuh):
//      the same three kernels, the dK/dV and dQ ones with 4 warps per 64-row tile and the
//      products (S, dP, dV, dK, dQ) as WMMA 16x16x16 bf16 products with fp32 accumulation;
//      P and dS rounded to bf16 for the products, dK, dV, dQ in WMMA accumulators until the
//      end. No atomics: the run-to-run bit check applies.
//   5  production cuda::attention_backward on bf16 buffers (what train.precision = bf16 runs by
//      default): variant 1's schedule (kernels/cuda/attention_schedule.h) with bf16 products
//      on the tensor cores (cublasGemmStridedBatchedEx, fp32 accumulation; each product
//      min(B, NH) calls), S and dP fp32, P and dS rounded to bf16 for the products that read them.
//   6  variant 5 with each product one pointer-array batched call (cublasGemmBatchedEx over
//      the B x NH matrices, their addresses written by a small kernel) where 5 makes min(B, NH)
//      strided batched calls: the same schedule and math, fewer launches.
//   7, 8  variant 5 with 2 and 4 causal row blocks (as attention_forward's 7 and 8: 1/4 and 3/8
//      of the T x T square left out, for 2 and 4 times the calls).
//   9  variants 6 and 8 together: one pointer-array call per product and block, 4 blocks.
//  10  variant 3 with TileCopy::kSynchronous: each next tile (Q, dO, L and D, or K and V)
//      copied through registers, each thread waiting for its loads, where 3 issues cp.async and
//      multiplies the current tile while they land. The same bits (tests/gpu); which is faster
//      decides the default.
//  11  variant 3 with dQ made in the dK/dV walk (FlashDq::kInKeyWalk): the dK/dV kernel also
//      stores dS^T in shared memory and computes each tile pair's dQ share dS K, and the key
//      tiles add their shares into fp32 sums in turn (the diagonal's first, key tile 0 last,
//      which writes dQ), so the dQ kernel and its recomputation of S and dP go: 5 products a
//      tile pair instead of 7, as FlashAttention-2, still with the same bits run to run.
//      dK and dV keep 3's bits (tests/gpu); faster in whole steps, it becomes the default.
//  12  variant 3 with every head's longest walk first (FlashMmaOptions::block_order =
//      FlashBlockOrder::kLongestFirst) in both kernels: the same blocks, started in another order,
//      so that each grid ends on its shortest ones (kernels/backend_options.h). The same bits as 3
//      (tests/gpu); a model of the schedule, not a measurement, puts the saving at 10 to 20% at
//      B = 8 (perf/kernels/block_order_model.py). Whichever is faster in whole steps
//      (run.flash_block_order) becomes the default.
//  13  variant 3 on Hopper's warpgroup products (FlashMmaOptions::backward_products =
//      FlashProducts::kWarpgroup, kernels/cuda/flash_attention_wgmma_backward.cu): both walks'
//      products by wgmma, which reads each B tile once for the block's 4 warps where mma.sync makes
//      each warp load its own fragments; each product group waited for at once (no overlap with
//      the softmax yet). Within the format's rounding of 3 (tests/gpu), the same bits on the
//      emulation. Compute capability 9.0 and a build for sm_90a only; "unsupported" elsewhere.
//  14  variant 13 with dQ in the key walk (11's schedule on wgmma, as FlashAttention-3's backward
//      but with the key tiles adding in turn instead of atomics): dS^T stored to shared memory and
//      read back as the transposed operand of dQ's share dS K. Within the format's rounding of 11.
//  15  variant 13 with each walked tile's softmax beside the previous tile's dV and dK (or dQ)
//      products (FlashMmaOptions::backward_schedule = WarpgroupSchedule::kOverlapped,
//      FlashAttention-3's overlap within the warpgroup): three buffers of the walked tiles
//      (68,096 and 66,560 bytes of shared memory), ptxas 227 registers for dK/dV (2 blocks an SM,
//      as 13's 177) and 148 for dQ (3, as 13's 135). The same bits as 13 on the emulation.
//  16  variant 13 with two warpgroups a block (FlashMmaOptions::backward_warpgroups = 2): the
//      dK/dV walk's 128 keys share each Q, dO, L and D tile, the dQ walk's 128 queries each K and
//      V tile: half the tile copies of 13. A warpgroup's first tile may lie wholly past its
//      rows (masked: the same bits as 13 on the emulation). ptxas (sm_90a, cp.async): dK/dV 210
//      registers, 67,584 bytes (one block of 8 warps an SM, as 13's two of 4), dQ 157, 66,560
//      bytes (one block of 8 warps, where 13's dQ has 3 of 4).
//  17  variant 15 with two warpgroups a block: dK/dV 237 registers, 84,480 bytes; dQ 174,
//      82,944 bytes (one block of 8 warps each).
//   Variants 3 to 17 are validated on bf16 cases: qkv and dout rounded to bf16, the twin's
//   forward (out rounded) and backward on them, at kBf16Tolerance (reasons at its definition).
//
//   playground_attention_backward replay   (no GPU needed) runs variant 4's kernels on the host
//   (flash_tc::replay_backward: the same block steps, plain loops for the products) against the
//   twin on ragged shapes; CTest runs it (unit.flash_tensor_core_backward_replay).
//
// What each thread does, index arithmetic included, is in __host__ __device__ functions that
// the kernels call between their __syncthreads (kernels/cuda/flash_attention_math.h), so that a
// host program replays the kernels' loops with the same functions:
// tests/unit/kernels/flash_attention_replay_test.cpp, on every build.
//
// TFLOP/s counts the useful causal work of a backward without recomputation, four products
// (dP, dV, dK, dQ) over the pairs t2 <= t: 8 * B * NH * hs * T(T+1)/2, for both variants.
// Production recomputes S once (a fifth product, over the full square), the flash variant S
// twice and dP twice (in (b) and again in (c)), so their rates understate what they execute.
#include <cublas_v2.h>     // CUBLAS_DEFAULT_MATH
#include <cuda_runtime.h>  // __syncthreads, cudaFuncSetAttribute

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"      // cpu::attention_forward/backward (the reference)
#include "kernels/cuda/attention.cuh"   // cuda::attention_forward/backward (variant 1)
#include "kernels/cuda/flash_attention.cuh"  // cuda::flash_attention_forward/backward (variant 2)
#include "kernels/cuda/flash_attention_mma.cuh"  // FlashProducts, flash_attention_wgmma_available (13)
#include "perf/kernels/flash_tensor_core_backward.cuh"  // flash_tc::backward, replay_backward (variant 4)
#include "perf/kernels/playground.cuh"  // harness

namespace {

namespace pg = trident::playground;
namespace tk = trident::kernels;

// ---- host side: data, reference, checks ------------------------------------------------------

// The known non-zero stale dqkv every validated run starts from, on both sides: multiples of
// 1/16 in [-7/32, 7/32], never 0, so a kernel that adds to dqkv instead of overwriting it is
// off by about the size of the gradients themselves.
std::vector<float> initial_dqkv(std::size_t n) {
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; i++) {
    values[i] = (static_cast<float>(i % 8) - 3.5f) * 0.0625f;
  }
  return values;
}

// Channels [part*C, (part+1)*C) of every token of dqkv[B*T, 3C]: dq, dk or dv as [B*T, C].
std::vector<float> part_of(const std::vector<float>& dqkv, int part, int C) {
  const std::size_t tokens = dqkv.size() / (3 * static_cast<std::size_t>(C));
  std::vector<float> values(tokens * C);
  for (std::size_t n = 0; n < tokens; n++) {
    const float* src = dqkv.data() + n * 3 * C + static_cast<std::size_t>(part) * C;
    std::copy(src, src + C, values.begin() + static_cast<std::ptrdiff_t>(n * C));
  }
  return values;
}

// One validation shape: its inputs and the CPU twin's dqkv (the gradient, over initial_dqkv).
struct Case {
  int B = 0;
  int T = 0;
  std::vector<float> qkv;
  std::vector<float> dout;
  std::vector<float> initial;
  std::vector<float> ref;
  std::vector<float> out;  // the twin's forward (rounded to bf16 for a bf16 case)
  std::vector<float> lse;
};

// bf16: qkv and dout rounded to bf16 first (the twin then runs on the values the 16-bit
// variants read; initial_dqkv is bf16-representable already), and out rounded as a bf16 forward
// would store it.
Case make_case(int B, int T, int C, int NH, unsigned seed, bool bf16 = false) {
  Case k;
  k.B = B;
  k.T = T;
  const std::size_t tokens = static_cast<std::size_t>(B) * T;
  // As attention_forward.cu: scores with a standard deviation ~1.3, a softmax neither flat nor
  // one-hot. dout uniform in [-1, 1).
  k.qkv = pg::random_floats(tokens * 3 * C, 31 + seed, -2.0f, 2.0f);
  k.dout = pg::random_floats(tokens * C, 47 + seed, -1.0f, 1.0f);
  if (bf16) {
    k.qkv = pg::rounded_to_bf16(k.qkv);
    k.dout = pg::rounded_to_bf16(k.dout);
  }
  k.initial = initial_dqkv(tokens * 3 * C);
  std::vector<float> out(tokens * C);
  std::vector<float> lse(static_cast<std::size_t>(B) * NH * T);
  std::vector<float> scratch(tk::cpu::attention_scratch_size(B, T, NH));
  tk::cpu::attention_forward(out.data(), lse.data(), scratch.data(), k.qkv.data(), B, T, C, NH);
  k.ref = k.initial;
  tk::cpu::attention_backward(k.ref.data(), scratch.data(), k.dout.data(), k.qkv.data(),
                              lse.data(), B, T, C, NH);
  k.out = bf16 ? pg::rounded_to_bf16(out) : out;
  k.lse = lse;
  return k;
}

// bf16 variants (3, 4, the replay) against the twin on the rounded inputs. dqkv is a bf16
// buffer, so the result is rounded once: half a unit, 2^-9 of |gradient|, within 2^-9 of
// max |ref| of each part. D = dout . out comes from the bf16 out a bf16 forward
// keeps (relative 2^-9 per term), and variants 4 to 9 also round P (for dV) and dS (for dK, dQ) to
// bf16: relative 2^-9 per term, both signs, weighted by probabilities that sum to 1, so a few
// units of 2^-9 of max |ref|. The host replay of 4 measured 2.1e-3 to 3.4e-3 (T = 64, 130, 200;
// NH = 1 to 3). 1e-2, the issue's bf16 figure, keeps a margin of ~3 over that, while a wrong
// mask, row, head or scale, or a += instead of an overwrite, moves whole terms (the replay's
// mutations: see README.md).
constexpr double kBf16Tolerance = 1e-2;

// `replay`: variant 4's kernels on the host (flash_tc::replay_backward: the same block steps,
// plain loops for the products) against the twin, at shapes with partial tiles.
int replay() {
  struct Shape {
    int B, T, C, NH;
  };
  const Shape shapes[] = {{2, 130, 128, 2}, {1, 64, 64, 1}, {1, 200, 192, 3}};
  pg::print_header();
  int number = 0;
  bool all_pass = true;
  for (const Shape& sh : shapes) {
    const Case k = make_case(sh.B, sh.T, sh.C, sh.NH, static_cast<unsigned>(number), true);
    std::vector<uint16_t> dqkv = pg::encoded_bf16(k.initial);
    std::vector<float> delta(k.lse.size(), NAN);
    trident::playground::flash_tc::replay_backward(dqkv.data(), delta.data(), pg::encoded_bf16(k.dout).data(),
                                                   pg::encoded_bf16(k.qkv).data(), pg::encoded_bf16(k.out).data(),
                                                   k.lse.data(), sh.B, sh.T, sh.C, sh.NH, 1.0f / std::sqrt(64.0f));
    const std::vector<float> got = pg::decoded_bf16(dqkv);
    pg::Outcome outcome;
    const char* names[3] = {"dq", "dk", "dv"};
    for (int part = 0; part < 3; part++) {
      outcome.checks.push_back(
          pg::validate(names[part], part_of(got, part, sh.C), part_of(k.ref, part, sh.C), kBf16Tolerance));
    }
    const std::string name = "host replay of 4: B=" + std::to_string(sh.B) + " T=" + std::to_string(sh.T) +
                             " C=" + std::to_string(sh.C) + " NH=" + std::to_string(sh.NH);
    pg::print_row(++number, name, outcome, pg::Workload{});
    for (const pg::Check& c : outcome.checks) {
      std::printf("       %s max rel err %.3e\n", c.name.c_str(), c.max_rel_err);
      all_pass = all_pass && c.pass;
    }
  }
  return all_pass ? 0 : 1;
}

// Device buffers of one shape: the forward state both variants keep (out, lse) and each one's
// scratch.
struct Buffers {
  int B = 0;
  int T = 0;
  pg::DeviceBuffer<float> qkv;
  pg::DeviceBuffer<float> dout;
  pg::DeviceBuffer<float> dqkv;
  pg::DeviceBuffer<float> out;      // [B, T, C]
  pg::DeviceBuffer<float> lse;      // [B, NH, T]
  pg::DeviceBuffer<float> scratch;  // variant 1: cuda::attention_scratch_size (2 B NH T^2)
  pg::DeviceBuffer<float> delta;    // variant 2's scratch: D [B, NH, T]
};

Buffers make_buffers(int B, int T, int C, int NH, const std::vector<float>& qkv,
                     const std::vector<float>& dout, const std::vector<float>& dqkv) {
  Buffers w;
  w.B = B;
  w.T = T;
  w.qkv = pg::upload(qkv);
  w.dout = pg::upload(dout);
  w.dqkv = pg::upload(dqkv);
  w.out = pg::DeviceBuffer<float>(static_cast<std::size_t>(B) * T * C);
  w.lse = pg::DeviceBuffer<float>(static_cast<std::size_t>(B) * NH * T);
  w.scratch = pg::DeviceBuffer<float>(tk::cuda::attention_scratch_size(B, T, NH));
  w.delta = pg::DeviceBuffer<float>(static_cast<std::size_t>(B) * NH * T);
  // The forward state is overwritten by prepare(): poison it so that a missing write shows.
  PG_CUDA_CHECK(cudaMemset(w.out.data(), 0xff, w.out.bytes()));
  PG_CUDA_CHECK(cudaMemset(w.lse.data(), 0xff, w.lse.bytes()));
  PG_CUDA_CHECK(cudaMemset(w.delta.data(), 0xff, w.delta.bytes()));
  PG_CUDA_CHECK(cudaDeviceSynchronize());
  return w;
}

// The bf16 variants' buffers: every activation 16-bit (bf16 bits), lse and D fp32. out and lse
// come from the case (the twin's forward, out rounded) when given, else from prepare16().
struct Buffers16 {
  int B = 0;
  int T = 0;
  pg::DeviceBuffer<uint16_t> qkv;
  pg::DeviceBuffer<uint16_t> dout;
  pg::DeviceBuffer<uint16_t> dqkv;
  pg::DeviceBuffer<uint16_t> out;
  pg::DeviceBuffer<float> lse;
  pg::DeviceBuffer<float> delta;    // the flash scratch: D [B, NH, T], then variant 11's dQ sums
  pg::DeviceBuffer<float> scratch;  // variant 5's two T x T regions
  pg::DeviceBuffer<void*> pointers;  // variant 6's pointer arrays
};

Buffers16 make_buffers16(int B, int T, int C, int NH, const std::vector<float>& qkv, const std::vector<float>& dout,
                         const std::vector<float>& dqkv, const std::vector<float>& out,
                         const std::vector<float>& lse) {
  Buffers16 w;
  w.B = B;
  w.T = T;
  w.qkv = pg::upload(pg::encoded_bf16(qkv));
  w.dout = pg::upload(pg::encoded_bf16(dout));
  w.dqkv = pg::upload(pg::encoded_bf16(dqkv));
  w.out = out.empty() ? pg::DeviceBuffer<uint16_t>(static_cast<std::size_t>(B) * T * C) : pg::upload(pg::encoded_bf16(out));
  w.lse = lse.empty() ? pg::DeviceBuffer<float>(static_cast<std::size_t>(B) * NH * T) : pg::upload(lse);
  w.delta = pg::DeviceBuffer<float>(tk::cuda::flash_attention_scratch_size(B, T, NH, tk::FlashDq::kInKeyWalk));
  w.scratch = pg::DeviceBuffer<float>(tk::cuda::attention_scratch_size(B, T, NH));
  w.pointers = pg::DeviceBuffer<void*>(tk::cuda::attention_matrix_pointers(B, NH));
  PG_CUDA_CHECK(cudaMemset(w.delta.data(), 0xff, w.delta.bytes()));
  PG_CUDA_CHECK(cudaMemset(w.scratch.data(), 0xff, w.scratch.bytes()));  // NaN: a read before a write shows
  PG_CUDA_CHECK(cudaMemset(w.pointers.data(), 0xff, w.pointers.bytes()));  // written before each product
  PG_CUDA_CHECK(cudaDeviceSynchronize());
  return w;
}

// A variant: prepare() runs the forward that the backward needs (untimed), backward() the
// timed part; both queue on the program's stream.
struct Method {
  std::function<void(Buffers&)> prepare;
  std::function<void(Buffers&)> backward;
  bool check_repeat = false;  // run twice from the same state, require the same bits
};

// Tolerance, relative to max |ref| of each of dq, dk, dv separately (so a wrong dq cannot
// hide under a larger dv). fp32 throughout. Sources of difference from the twin: the order of
// the 64-term dot products and of the up-to-T-term sums (dQ, dK, dV; the twin's are OpenBLAS
// blocks, ours are sequential per thread), exp (the twin's exp_approx and expf: 2 ulp each),
// P = exp(S - L) rebuilt from each side's own L (the rounding of L, ~1 ulp of |L| < 16, moves
// every P of a row by ~1e-6 relative), and, for variant 2, D = dO . O (64 terms) against the
// twin's rowsum(P dP) (T terms) which cancels against dP in dS = P (dP - D). The host replay
// of variant 2's loops (same functions; T = 64, 130, 200, 256, B = 1, 2, NH = 1, 3; now the
// unit test tests/unit/kernels/flash_attention_replay_test.cpp) measured
// 1.7e-7 to 7.9e-7, so 1e-5 keeps a margin of ~12 for the GPU's FMA contraction and its own
// expf, while an index or mask error moves whole terms: the replay's injected bugs (diagonal
// dropped from the causal bound, scale missing in P, overwrite instead of +=, wrong head's L)
// gave 7e-2 and more. The reference's T-term rowsum is the twin's own error, of the same order.
constexpr double kTolerance = 1e-5;

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "replay") return replay();
  const pg::Args args = pg::parse_args_or_exit(argc, argv, "playground_attention_backward");
  pg::require_gpu();
  const int B = pg::env_int("ATTN_B", 8);
  const int T = pg::env_int("ATTN_T", 1024);
  const int C = pg::env_int("ATTN_C", 768);
  const int NH = pg::env_int("ATTN_NH", 12);
  const int B_check = pg::env_int("ATTN_VALIDATE_B", 2);
  const int T_check = pg::env_int("ATTN_VALIDATE_T", 256);
  const int T_ragged = pg::env_int("ATTN_RAGGED_T", 200);
  if (C % NH != 0 || C % 4 != 0) {
    std::fprintf(stderr, "ATTN_C = %d must be a multiple of ATTN_NH = %d and of 4\n", C, NH);
    return 2;
  }
  const int hs = C / NH;
  std::printf("attention_backward B = %d, T = %d, C = %d, NH = %d (hs = %d); validated at "
              "B = %d, T = %d and %d; timed at B = %d, T = %d, %d reps (median)\n",
              B, T, C, NH, hs, B_check, T_check, T_ragged, B, T, args.reps);

  std::vector<Case> cases;
  cases.push_back(make_case(B_check, T_check, C, NH, 0));
  cases.push_back(make_case(B_check, T_ragged, C, NH, 1));

  const pg::Stream stream;
  pg::Timer timer(stream.get());
  // fp32 math: the data here is not 16-bit representable, so no TF32.
  const pg::CublasHandle cublas(stream.get(), CUBLAS_DEFAULT_MATH);

  // The timed shape: inputs as the validation's, dqkv from the same initial pattern (overwritten
  // by every timed run; its values are not checked).
  const std::size_t timed_tokens = static_cast<std::size_t>(B) * T;
  Buffers timed =
      make_buffers(B, T, C, NH, pg::random_floats(timed_tokens * 3 * C, 31, -2.0f, 2.0f),
                   pg::random_floats(timed_tokens * C, 47, -1.0f, 1.0f),
                   initial_dqkv(timed_tokens * 3 * C));

  // Validates every case (dq, dk, dv separately; the repeat check where asked), then times the
  // backward at the timed shape after one untimed prepare().
  auto measure = [&](const Method& method) {
    return [&, method](int reps) {
      pg::Outcome outcome;
      for (const Case& k : cases) {
        Buffers w = make_buffers(k.B, k.T, C, NH, k.qkv, k.dout, k.initial);
        method.prepare(w);
        method.backward(w);
        const std::vector<float> first = pg::download(w.dqkv);
        const std::string suffix = " T=" + std::to_string(k.T);
        const char* names[3] = {"dq", "dk", "dv"};
        for (int part = 0; part < 3; part++) {
          outcome.checks.push_back(pg::validate(names[part] + suffix, part_of(first, part, C),
                                                part_of(k.ref, part, C), kTolerance));
        }
        if (method.check_repeat) {
          PG_CUDA_CHECK(cudaMemcpy(w.dqkv.data(), k.initial.data(), w.dqkv.bytes(),
                                   cudaMemcpyHostToDevice));
          PG_CUDA_CHECK(cudaDeviceSynchronize());
          method.backward(w);
          outcome.checks.push_back(
              pg::identical("dqkv run to run" + suffix, pg::download(w.dqkv), first));
        }
      }
      method.prepare(timed);
      PG_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
      outcome.median_ms = timer.median_ms(reps, [&] { method.backward(timed); });
      return outcome;
    };
  };

  const Method production{
      [&](Buffers& w) {
        tk::cuda::attention_forward(w.out.data(), w.lse.data(), w.scratch.data(), w.qkv.data(),
                                    w.B, w.T, C, NH, cublas.get(), stream.get());
      },
      [&](Buffers& w) {
        tk::cuda::attention_backward(w.dqkv.data(), w.scratch.data(), w.dout.data(),
                                     w.qkv.data(), w.lse.data(), w.B, w.T, C, NH, cublas.get(),
                                     stream.get());
      },
      false};
  const Method flash{
      [&](Buffers& w) {
        tk::cuda::flash_attention_forward(w.out.data(), w.lse.data(), w.qkv.data(), w.B, w.T, C, NH,
                          stream.get());
      },
      [&](Buffers& w) {
        tk::cuda::flash_attention_backward(w.dqkv.data(), w.delta.data(), w.dout.data(), w.qkv.data(), w.out.data(),
                       w.lse.data(), w.B, w.T, C, NH, stream.get());
      },
      true};
  auto unsupported = [hs](int) {
    return pg::unsupported_shape("hs = " + std::to_string(hs) + ": this variant needs hs = 64");
  };

  // The bf16 variants: validated on the bf16 cases from the twin's forward state, then timed at
  // the timed shape after the production bf16 flash forward has made out and lse.
  std::vector<Case> cases16;
  cases16.push_back(make_case(B_check, T_check, C, NH, 0, true));
  cases16.push_back(make_case(B_check, T_ragged, C, NH, 1, true));
  Buffers16 timed16 = make_buffers16(B, T, C, NH, pg::rounded_to_bf16(pg::random_floats(timed_tokens * 3 * C, 31, -2.0f, 2.0f)),
                                     pg::rounded_to_bf16(pg::random_floats(timed_tokens * C, 47, -1.0f, 1.0f)),
                                     initial_dqkv(timed_tokens * 3 * C), {}, {});
  tk::cuda::flash_attention_forward(tk::ActPtr(timed16.out.data(), tk::Precision::kBf16), timed16.lse.data(),
                                    tk::ConstActPtr(timed16.qkv.data(), tk::Precision::kBf16), B, T, C, NH, stream.get());
  PG_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  auto measure16 = [&](std::function<void(Buffers16&)> backward) {
    return [&, backward](int reps) {
      pg::Outcome outcome;
      for (const Case& k : cases16) {
        Buffers16 w = make_buffers16(k.B, k.T, C, NH, k.qkv, k.dout, k.initial, k.out, k.lse);
        backward(w);
        const std::vector<float> first = pg::decoded_bf16(pg::download(w.dqkv));
        const std::string suffix = " T=" + std::to_string(k.T);
        const char* names[3] = {"dq", "dk", "dv"};
        for (int part = 0; part < 3; part++) {
          outcome.checks.push_back(pg::validate(names[part] + suffix, part_of(first, part, C),
                                                part_of(k.ref, part, C), kBf16Tolerance));
        }
        const std::vector<uint16_t> initial_bits = pg::encoded_bf16(k.initial);
        PG_CUDA_CHECK(cudaMemcpy(w.dqkv.data(), initial_bits.data(), w.dqkv.bytes(), cudaMemcpyHostToDevice));
        backward(w);
        outcome.checks.push_back(
            pg::identical("dqkv run to run" + suffix, pg::decoded_bf16(pg::download(w.dqkv)), first));
      }
      outcome.median_ms = timer.median_ms(reps, [&] { backward(timed16); });
      return outcome;
    };
  };
  auto flash16_with = [&](tk::cuda::FlashMmaOptions options) {
    return [&, options](Buffers16& w) {
      tk::cuda::flash_attention_backward(tk::ActPtr(w.dqkv.data(), tk::Precision::kBf16), w.delta.data(),
                                         tk::ConstActPtr(w.dout.data(), tk::Precision::kBf16),
                                         tk::ConstActPtr(w.qkv.data(), tk::Precision::kBf16),
                                         tk::ConstActPtr(w.out.data(), tk::Precision::kBf16), w.lse.data(), w.B, w.T,
                                         C, NH, stream.get(), options);
    };
  };
  auto flash16 = flash16_with({});
  auto production16 = [&](Buffers16& w) {
    tk::cuda::attention_backward(tk::ActPtr(w.dqkv.data(), tk::Precision::kBf16), w.scratch.data(),
                                 tk::ConstActPtr(w.dout.data(), tk::Precision::kBf16),
                                 tk::ConstActPtr(w.qkv.data(), tk::Precision::kBf16), w.lse.data(), w.B, w.T, C, NH,
                                 cublas.get(), stream.get());
  };
  auto pointer_array16 = [&](Buffers16& w) {
    tk::cuda::attention_backward(tk::ActPtr(w.dqkv.data(), tk::Precision::kBf16), w.scratch.data(),
                                 tk::ConstActPtr(w.dout.data(), tk::Precision::kBf16),
                                 tk::ConstActPtr(w.qkv.data(), tk::Precision::kBf16), w.lse.data(), w.B, w.T, C, NH,
                                 cublas.get(), stream.get(), {w.pointers.data(), 1});
  };
  auto causal_blocks16 = [&](int blocks, bool pointers) {
    return [&, blocks, pointers](Buffers16& w) {
      tk::cuda::attention_backward(tk::ActPtr(w.dqkv.data(), tk::Precision::kBf16), w.scratch.data(),
                                   tk::ConstActPtr(w.dout.data(), tk::Precision::kBf16),
                                   tk::ConstActPtr(w.qkv.data(), tk::Precision::kBf16), w.lse.data(), w.B, w.T, C, NH,
                                   cublas.get(), stream.get(), {pointers ? w.pointers.data() : nullptr, blocks});
    };
  };
  auto tensor_core = [&](Buffers16& w) {
    PG_CUDA_CHECK(trident::playground::flash_tc::backward(w.dqkv.data(), w.delta.data(), w.dout.data(), w.qkv.data(),
                                                          w.out.data(), w.lse.data(), w.B, w.T, C, NH,
                                                          1.0f / std::sqrt(64.0f), stream.get()));
  };

  using Run = std::function<pg::Outcome(int)>;
  // A variant on Hopper's warpgroup products (`options` with backward_products = kWarpgroup): timed
  // where this build and GPU have them, reported as unsupported where not.
  auto on_warpgroups = [&](tk::cuda::FlashMmaOptions options) {
    if (!tk::cuda::flash_attention_supported(C, NH) || !tk::cuda::flash_attention_wgmma_available()) {
      return Run([](int) {
        return pg::unsupported_shape("wgmma needs a build for sm_90a and a compute capability 9.0 GPU (or hs != 64)");
      });
    }
    options.backward_products = tk::FlashProducts::kWarpgroup;
    return Run(measure16(flash16_with(options)));
  };
  const std::vector<pg::Variant> variants = {
      {"production cuda::attention_backward (cuBLAS + softmax bwd)", measure(production)},
      {"flash-style backward (recomputed P), fp32, 64x64 tiles",
       tk::cuda::flash_attention_supported(C, NH) ? Run(measure(flash)) : Run(unsupported)},
      {"production flash on bf16 buffers (tensor cores, mma.sync)",
       tk::cuda::flash_attention_supported(C, NH) ? Run(measure16(flash16)) : Run(unsupported)},
      {"tensor-core flash backward (WMMA bf16, dK/dV + dQ), bf16",
       tk::cuda::flash_attention_supported(C, NH) ? Run(measure16(tensor_core)) : Run(unsupported)},
      {"variant 1 on bf16 buffers (bf16 cuBLAS products, P and dS rounded to bf16)", measure16(production16)},
      {"variant 5, each product one pointer-array cuBLAS call", measure16(pointer_array16)},
      {"variant 5 with 2 causal row blocks", measure16(causal_blocks16(2, false))},
      {"variant 5 with 4 causal row blocks", measure16(causal_blocks16(4, false))},
      {"variants 6 and 8 together: pointer arrays, 4 blocks", measure16(causal_blocks16(4, true))},
      {"variant 3 with synchronous tile copies (no cp.async)",
       tk::cuda::flash_attention_supported(C, NH)
           ? Run(measure16(flash16_with({.copy = tk::cuda::TileCopy::kSynchronous})))
           : Run(unsupported)},
      {"variant 3 with dQ in the key walk (5 products a tile pair, key tiles in turn)",
       tk::cuda::flash_attention_supported(C, NH) ? Run(measure16(flash16_with({.dq = tk::FlashDq::kInKeyWalk})))
                                                  : Run(unsupported)},
      {"variant 3 with every head's longest walk first",
       tk::cuda::flash_attention_supported(C, NH)
           ? Run(measure16(flash16_with({.block_order = tk::FlashBlockOrder::kLongestFirst})))
           : Run(unsupported)},
      {"variant 3 on Hopper's warpgroup products (wgmma, both walks)",
       on_warpgroups({})},
      {"variant 13 with dQ in the key walk",
       on_warpgroups({.dq = tk::FlashDq::kInKeyWalk})},
      {"variant 13 with each tile's softmax beside the previous tile's products",
       on_warpgroups({.backward_schedule = tk::WarpgroupSchedule::kOverlapped})},
      {"variant 13 with two warpgroups a block (128 keys, 128 queries)",
       on_warpgroups({.backward_warpgroups = 2})},
      {"variant 15 with two warpgroups a block",
       on_warpgroups({.backward_warpgroups = 2, .backward_schedule = tk::WarpgroupSchedule::kOverlapped})},
  };
  const double causal_pairs = static_cast<double>(T) * (T + 1) / 2.0;
  const double flops = 8.0 * B * NH * static_cast<double>(hs) * causal_pairs;
  return pg::run_variants(args, variants, pg::Workload{0.0, flops});
}
