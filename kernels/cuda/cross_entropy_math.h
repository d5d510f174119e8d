// The cross-entropy's row statistics in one read of the row, the per-thread math of
// kernels/cuda/cross_entropy.cu (the fused forward and the vocabulary shard's statistics): plain
// C++ that nvcc compiles for the device and any C++ compiler for the host, so that a host
// program can replay the kernels with these very functions
// (tests/unit/kernels/cross_entropy_replay_test.cpp, on every build).
//
// Online softmax: each thread keeps a running max and the sum of exp(l - max) over the values
// it reads, rescaling its sum when its max grows,
//   x > max:  sum = sum * exp(max - x) + 1,  max = x
//   else:     sum += exp(x - max),
// and the block merges the threads' pairs, (m1, s1) + (m2, s2) = (m, s1 exp(m1 - m) + s2 exp(m2 - m))
// with m = max(m1, m2), in block_reduce.cuh's order (a warp butterfly, then warp 0 over the
// warps' results). One read of the row instead of two (the max, then the sum on it). The sums
// are double, as in the CPU twin; each exponential is a float expf. A thread's max grows about
// ln k times over k random values, so the rescaling costs little.
//
// Loads: 16 bytes at a time (4 fp32 or 8 16-bit values) when the row starts 16-byte aligned,
// chunk c of the row to thread c % threads, then the V % (16 / sizeof E) tail one value per
// thread; one value per load otherwise. The decision is per row, so any Vp works.
//
// Determinism: the merge is symmetric (fmaxf, and a + b in double of products each rounded on
// its own, never contracted into an FMA), so every lane of the butterfly holds the same bits,
// and the block's order is fixed by its shape: the same bits run to run. Against the twin (a
// max pass, then a sum pass) the sums differ in the last bits: another order of the additions,
// and the rescale factors' roundings.
#pragma once

#include <cmath>  // expf, fmaxf, log, INFINITY (the C functions, as CUDA names them)
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/vector_pack.h"  // Pack, load_pack (the enclosing namespace)
#include "kernels/stored_element.h"  // stored::Fp32, Bf16, Fp16: load as fp32

#if defined(__CUDACC__)
#include <cuda_runtime.h>  // __host__, __device__
#define TRIDENT_SOFTMAX_HD __host__ __device__ __forceinline__
#else
#define TRIDENT_SOFTMAX_HD inline
#endif

namespace trident::kernels::cuda::softmax {

// A running max and the double sum of exp(value - max) over the values seen. No default member
// initializers: the block merge keeps these in __shared__ memory.
struct Running {
  float max;
  double sum;
};

TRIDENT_SOFTMAX_HD Running empty_running() { return {-INFINITY, 0.0}; }

// One more value. The first value takes the first branch (exp(-inf) = 0: sum = 1). A -inf
// value adds exp(-inf) = 0, as in the twin's sum pass, also while the max is still -inf (where
// exp(-inf - -inf) would be NaN).
TRIDENT_SOFTMAX_HD void add(Running& r, float x) {
  if (x > r.max) {
    r.sum = r.sum * static_cast<double>(expf(r.max - x)) + 1.0;
    r.max = x;
  } else if (x != -INFINITY) {
    r.sum += static_cast<double>(expf(x - r.max));
  }
}

// a * b + c * d in double with each product rounded on its own: nvcc would otherwise contract
// one product into a fused multiply-add, and (a, b) + (c, d) would differ from (c, d) + (a, b)
// in the last bit. On the host, the products go through memory: a host build that contracts as
// nvcc does (the CUDA emulation's) rounds each of them too.
TRIDENT_SOFTMAX_HD double sum_of_products(double a, double b, double c, double d) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(__dmul_rn(a, b), __dmul_rn(c, d));
#else
  const volatile double ab = a * b, cd = c * d;
  return ab + cd;
#endif
}

// Two pairs as one; symmetric in a and b, bit for bit. Pairs whose max is -inf hold no finite
// value: their sums (0, or NaN after a NaN logit) are added as they are, so two empty pairs stay
// empty and a NaN is kept (exp(-inf - -inf) would make NaN of the empty ones).
TRIDENT_SOFTMAX_HD Running merged(Running a, Running b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return {m, a.sum + b.sum};
  return {m, sum_of_products(a.sum, static_cast<double>(expf(a.max - m)), b.sum, static_cast<double>(expf(b.max - m)))};
}

// Thread `thread` of `threads`: its running pair over row[0, V). `vectorized` only when the row
// starts 16-byte aligned.
template <class S, class E = typename S::Element>
TRIDENT_SOFTMAX_HD Running thread_running(const E* row, int V, bool vectorized, int thread, int threads) {
  Running r = empty_running();
  int tail_begin = 0;
  if (vectorized) {
    constexpr int kCount = Pack<E>::kCount;
    const int chunks = V / kCount;
    for (int c = thread; c < chunks; c += threads) {
      const Pack<E> pack = load_pack(row + static_cast<std::size_t>(c) * kCount);
      for (int i = 0; i < kCount; i++) add(r, S::load(pack.values[i]));
    }
    tail_begin = chunks * kCount;
  }
  for (int v = tail_begin + thread; v < V; v += threads) add(r, S::load(row[v]));
  return r;
}

// The loss thread 0 writes from the block's pair: log(sum) + max - the target's logit.
TRIDENT_SOFTMAX_HD float loss_of(const Running& r, float target_logit) {
  return static_cast<float>(log(r.sum) + static_cast<double>(r.max) - static_cast<double>(target_logit));
}

// The target's logit when it is a real column of this shard (ids [vocab_begin, vocab_begin +
// V_local)), else 0.
template <class S, class E = typename S::Element>
TRIDENT_SOFTMAX_HD float shard_target_logit(const E* row, int32_t target, int vocab_begin, int V_local) {
  const int t = target - vocab_begin;
  return t >= 0 && t < V_local ? S::load(row[t]) : 0.0f;
}

}  // namespace trident::kernels::cuda::softmax
