// The GEMM attention's schedule: which product or row pass runs when, on which views of qkv,
// out, dout, dqkv and the two scratch regions, for fp32 or 16-bit storage. The device launchers
// (attention.cu: cuBLAS products and row kernels) and a host replay
// (tests/unit/kernels/attention_schedule_replay_test.cpp: loops) run this same code with their
// own Ops, so every build checks what a GPU run would find hardest to explain: the views
// (offsets, leading dimensions, strides), the reuse of the scratch regions, and the order that
// reuse depends on. No CUDA here: plain C++ that nvcc and the host compiler both read.
//
// The math is the CPU twin's (kernels/cpu/attention.cpp), per (batch b, head h), hs = C / NH,
// scale = 1 / sqrt(hs):
//   S = scale Q K^T,  P = softmax_row(S) causal,  O = P V,  lse[t] = log sum_{t2<=t} exp(S[t,t2])
//   dV = P^T dO,  dP = dO V^T,  dS = scale P (dP - rowsum(P dP)),  dQ = dS K,  dK = dS^T Q
//
// Storage policy S (kernels/stored_element.h) is the storage of qkv, out, dout and dqkv. The
// scores S and the probability gradient dP are fp32 products (exact products of the stored
// inputs, fp32 sums); the probabilities P and the score gradient dS, which feed the next
// products, are stored in S's element: fp32 for fp32 runs (the former GEMM path's expressions;
// the same bits where cuBLAS picks the same kernels, P and dS now starting at other offsets of
// the scratch), rounded to bf16 or fp16 for 16-bit runs. That rounding is what FlashAttention-2
// (in its 16-bit products) and llm.c do: a tensor-core product takes two operands of one type,
// and V, K, Q and dO are 16-bit. It is the one place where the GPU's 16-bit attention is not
// "fp32 math, one rounding per stored value"; the replay measures what it costs against the
// fp32 twin (under one rounding step of the format, there documented), and the GPU tests hold
// the kernels to it. fp16 has a narrow exponent range: the small entries of dS (small P, small
// gradients) fall into its subnormals, so fp16 relies on the loss scaling that fp16 runs need
// anyway to keep activation gradients well above 2^-14 (the replay measures dout of 1e-3 too).
//
// Scratch: two regions of B*NH*T*T floats, a T x T slot per (b, h) in each (slot b*NH + h at
// (b*NH + h)*T*T elements of the region's element type):
//   region A: S (fp32); in backward, dS is stored over it, row r of dS in the first bytes of
//             S's own row r (row stride T floats = T * (4 / sizeof(element)) elements), so a
//             row pass that reads its row before writing it needs no other space;
//   region B: P (elements, packed: row stride T), then in backward dP (fp32) over it.
// Products read only the views named below, so the second half of each dS row (stale S) and
// the parts of region B a packed P does not cover are never read.
//
// Causality: the products compute, per causal row block (one block by default: the full T x T
// square), the rows of the block against the keys below the block's end; the row passes read
// columns t2 <= t only and store exact zeros above the diagonal up to the block's end, so P = 0
// and dS = 0 there and the products that follow are the causal ones. More blocks leave out
// more of the upper triangle for more calls (block_start, row_end below).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define TRIDENT_ATTENTION_HD __host__ __device__ __forceinline__
#else
#define TRIDENT_ATTENTION_HD inline
#endif

namespace trident::kernels::cuda::attention_schedule {

// Whether a product reads its operand as stored or transposed (row-major, cblas' meaning).
enum class Op { kN, kT };

// The B x NH grid of (batch element, head) matrices that every product of the schedule covers:
// matrix i = b * heads + h.
struct Grid {
  int batch;
  int heads;
  int count() const { return batch * heads; }
};

// One operand of a product: a row-major matrix per (b, h) of the grid, consecutive rows ld
// elements apart, matrix (b, h) at data + b * batch_stride + h * head_stride elements. Two
// strides because batch element b + 1 is not NH heads on (in qkv head h + 1 is hs elements on,
// b + 1 is T * 3C, not NH * hs), so no single stride steps through all B * NH matrices.
template <class E>
struct View {
  E* data;
  int ld;
  long long batch_stride;
  long long head_stride;
};

// Matrix i = b * heads + h of a view: the address a pointer-array batched product is given.
template <class E>
TRIDENT_ATTENTION_HD E* matrix_at(const View<E>& v, int i, int heads) {
  return v.data + static_cast<long long>(i / heads) * v.batch_stride + static_cast<long long>(i % heads) * v.head_stride;
}

// Whether every matrix of a view starts on a multiple of `alignment` bytes. A pointer-array
// batched call (cublasGemmBatchedEx, cublasSgemmBatched) needs that of each pointer for its
// tensor-core kernels, 16 bytes being what cuBLAS documents for them, and cannot check pointers
// that live in device memory; a strided call's base and strides cuBLAS checks itself. Not so
// for every shape: a T x T fp32 slot is T * T * 4 bytes, a multiple of 16 only for even T.
template <class E>
bool aligned_matrices(const View<E>& v, std::size_t alignment = 16) {
  const auto bytes = [](long long elements) { return static_cast<unsigned long long>(elements) * sizeof(E); };
  return reinterpret_cast<std::uintptr_t>(v.data) % alignment == 0 && bytes(v.batch_stride) % alignment == 0 &&
         bytes(v.head_stride) % alignment == 0;
}

// One operand of a strided batched call (cublas*StridedBatched*): matrix j at data + j * stride.
template <class E>
struct Strided {
  E* data;
  int ld;
  long long stride;
};

// A product's grid as strided batched calls: the shorter axis is looped over and the longer
// one batched along its own stride, so min(B, NH) calls of max(B, NH) matrices each (B calls of
// NH heads while B <= NH, NH calls of B batch elements beyond). call(a, b, c, batch) is made once
// per call, in order; every (b, h) is in exactly one of them.
template <class A, class Bt, class C, class Call>
void strided_calls(Grid grid, const View<A>& a, const View<Bt>& b, const View<C>& c, Call&& call) {
  const bool batch_heads = grid.batch <= grid.heads;
  const int calls = batch_heads ? grid.batch : grid.heads;
  const int batch = batch_heads ? grid.heads : grid.batch;
  for (int k = 0; k < calls; k++) {
    const int first = batch_heads ? k * grid.heads : k;  // matrix (k, 0) or (0, k)
    auto strided = [&](const auto& v) {
      using E = std::remove_pointer_t<decltype(v.data)>;
      return Strided<E>{matrix_at(v, first, grid.heads), v.ld, batch_heads ? v.head_stride : v.batch_stride};
    };
    call(strided(a), strided(b), strided(c), batch);
  }
}

// ---- causal row blocks ----
// The T query rows in `blocks` blocks, block j = [block_start(j), block_start(j + 1)). Queries
// of block j attend to keys below block_start(j + 1) only, so each product runs per block on
// that corner of the T x T square: with one block the full square (the products compute the
// upper triangle's zeros too), with k blocks about (k - 1) / 2k of it left out, for k times the
// calls. The blocks are made of whole groups of kBlockRows rows (the last group ragged when T is
// not a multiple), split as evenly as the groups allow: every block start is a multiple of 8
// rows, so each corner of a 16-bit P or dS (rows T floats apart) starts as aligned as its slot,
// and so do the block's query rows, for any k. blocks is in [1, row_groups(T)] (causal_blocks),
// so no block is empty. k = 2 and 4 at T = 1024 give the even split (starts j T / k).
constexpr int kBlockRows = 8;
TRIDENT_ATTENTION_HD int row_groups(int T) { return (T + kBlockRows - 1) / kBlockRows; }
TRIDENT_ATTENTION_HD int block_start(int j, int T, int blocks) {
  const long long start = static_cast<long long>(j) * row_groups(T) / blocks * kBlockRows;
  return start < T ? static_cast<int>(start) : T;
}
// The end of query t's block: the columns a row pass writes (zeros past t) and the products read.
// Block j holds the groups g with floor(j G / k) <= g < floor((j + 1) G / k), so t's group
// t / kBlockRows lies in block floor(((g + 1) k - 1) / G).
TRIDENT_ATTENTION_HD int row_end(int t, int T, int blocks) {
  const int g = t / kBlockRows;
  const int j = static_cast<int>(((static_cast<long long>(g) + 1) * blocks - 1) / row_groups(T));
  return block_start(j + 1, T, blocks);
}
// A requested block count made valid for T: at least 1, at most row_groups(T) (1 for T = 0,
// which the launchers return before).
inline int causal_blocks(int requested, int T) {
  const int most = row_groups(T) > 1 ? row_groups(T) : 1;
  return requested > most ? most : requested < 1 ? 1 : requested;
}

// ---- the per-element math of the row passes (device kernels and host replay) ----

// Forward's probability: exp(s - max) / sum with the row's max and 1 / sum.
TRIDENT_ATTENTION_HD float softmax_probability(float s, float row_max, float inv_sum) {
  return expf(s - row_max) * inv_sum;
}
// Backward's probability, recomputed from the score and forward's lse = max + log(sum).
TRIDENT_ATTENTION_HD float probability(float s, float lse) { return expf(s - lse); }
// dS = scale * P * (dP - rowsum(P * dP)).
TRIDENT_ATTENTION_HD float score_gradient(float p, float dp, float dot, float scale) {
  return scale * p * (dp - dot);
}

// Elements of type E in one float: how much longer a row of dS is, in its own elements, when
// it is stored in the first bytes of a row of fp32 scores (1 for fp32, 2 for 16-bit).
template <class E>
constexpr int elements_per_float() {
  static_assert(sizeof(float) % sizeof(E) == 0, "an element must tile a float");
  return static_cast<int>(sizeof(float) / sizeof(E));
}

// Where the row pass stores row r of dS: the first bytes of row r of the scores (rows T floats
// apart). Column t2's element lies inside float t2 / elements_per_float <= t2 of that row, so
// a pass that reads columns in chunks and stores a chunk only after every thread has read it
// never overwrites a score still to be read. The device kernel and the host replay both store
// through this.
template <class E>
TRIDENT_ATTENTION_HD E* gradient_row(float* scores, std::size_t r, int T) {
  return reinterpret_cast<E*>(scores + r * static_cast<std::size_t>(T));
}

// Floats of one scratch region: a T x T slot per (batch, head). The scratch is two regions.
inline std::size_t region_floats(int B, int T, int NH) {
  return static_cast<std::size_t>(B) * static_cast<std::size_t>(NH) * static_cast<std::size_t>(T) *
         static_cast<std::size_t>(T);
}

// Where everything lives, for one call's shape.
template <class E>
struct Layout {
  int B, T, C, NH;
  int blocks = 1;  // causal row blocks, in [1, row_groups(T)]

  int head_size() const { return C / NH; }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(head_size())); }
  std::size_t tt() const { return static_cast<std::size_t>(T) * static_cast<std::size_t>(T); }
  std::size_t region_floats() const { return attention_schedule::region_floats(B, T, NH); }
  std::size_t rows() const {
    return static_cast<std::size_t>(B) * static_cast<std::size_t>(NH) * static_cast<std::size_t>(T);
  }

  Grid grid() const { return {B, NH}; }
  int start(int j) const { return block_start(j, T, blocks); }

  // Q (part 0), K (part 1) or V (part 2) of every (b, h): ld 3C, head h + 1 is hs elements on,
  // batch element b + 1 is T rows of 3C on.
  template <class Q>
  View<Q> qkv_part(Q* qkv, int part) const {
    return {qkv + static_cast<std::size_t>(part) * static_cast<std::size_t>(C), 3 * C,
            static_cast<long long>(T) * 3 * C, head_size()};
  }
  // out, dout (the heads' channels): ld C, head h + 1 is hs elements on, b + 1 is T rows on.
  template <class Q>
  View<Q> channels(Q* x) const {
    return {x, C, static_cast<long long>(T) * C, head_size()};
  }
  // The T x T slots of a region of element type Q (slot b * NH + h), rows `widen` * T elements
  // apart.
  template <class Q>
  View<Q> slots(Q* region, int widen = 1) const {
    const long long slot = static_cast<long long>(tt()) * widen;
    return {region, widen * T, NH * slot, slot};
  }

  float* scores(float* scratch) const { return scratch; }                         // region A, fp32
  E* gradient(float* scratch) const { return reinterpret_cast<E*>(scratch); }      // region A, dS over S
  E* probabilities(float* scratch) const { return reinterpret_cast<E*>(scratch + region_floats()); }  // B
  float* dprobabilities(float* scratch) const { return scratch + region_floats(); }                  // B
};

template <class E>
View<const E> as_const(View<E> v) {
  return {v.data, v.ld, v.batch_stride, v.head_stride};
}

// The same matrices from row r and column c on (every (b, h) alike).
template <class E>
View<E> from(View<E> v, int r, int c = 0) {
  return {v.data + static_cast<long long>(r) * v.ld + c, v.ld, v.batch_stride, v.head_stride};
}

// Ops (the device's or the host replay's) provides, E being S::Element:
//   gemm(Op a, Op b, M, N, K, alpha, View<const E> A, View<const E> Bm, View<Out> Cm, Grid grid):
//       Cm(b, h) = alpha op(A(b, h)) op(Bm(b, h)) for every (b, h) of the grid (beta = 0: Cm is
//       written, never read), Out float (fp32 result) or E (rounded once); the product is
//       complete, for the whole grid, before the next call's work starts (stream order);
//   softmax_rows(const float* scores, E* probabilities, float* lse, rows, T, blocks);
//   probability_rows(const float* scores, E* probabilities, const float* lse, rows, T, blocks);
//   score_gradient_rows(float* scores_then_gradient, const float* dprobabilities, const float* lse,
//                       rows, T, blocks, scale): dS stored over each row's own scores (gradient_row).
// Row r of the [rows, T] stacks is query t = r % T of slot r / T; every row pass reads columns
// t2 <= t and writes columns t2 < row_end(t, T, blocks), zeros past t (all T columns with one
// block); the products read no column of a row past its row_end. How a gemm covers the grid (strided_calls: min(B, NH)
// strided batched calls; or one pointer-array call over matrix_at where aligned_matrices holds
// for its three views) is the Ops' choice; it must be the same in forward and backward for
// scores_of to give backward forward's bits.

// S = scale Q K^T into region A, block by block: rows [r0, r1) of each slot against keys below
// r1. Forward and backward both call this, so backward's recomputed S has forward's bits (same
// operands, shapes, destination and calls).
template <class E, class Ops>
void scores_of(Ops& ops, const Layout<E>& at, float* scores, const E* qkv) {
  for (int j = 0; j < at.blocks; j++) {
    const int r0 = at.start(j), r1 = at.start(j + 1);
    ops.gemm(Op::kN, Op::kT, r1 - r0, r1, at.head_size(), at.scale(), from(at.qkv_part(qkv, 0), r0),
             at.qkv_part(qkv, 1), from(at.slots(scores), r0), at.grid());
  }
}

// Forward and backward: `blocks` causal row blocks (causal_blocks(blocks, T) is used; 1, the
// full square, is production's), the same in both for backward's S to have forward's bits.
template <class S, class Ops>
void forward(Ops& ops, typename S::Element* out, float* lse, float* scratch, const typename S::Element* qkv, int B,
             int T, int C, int NH, int blocks = 1) {
  using E = typename S::Element;
  const Layout<E> at{B, T, C, NH, causal_blocks(blocks, T)};
  float* scores = at.scores(scratch);
  E* probabilities = at.probabilities(scratch);
  scores_of(ops, at, scores, qkv);
  ops.softmax_rows(scores, probabilities, lse, at.rows(), T, at.blocks);
  for (int j = 0; j < at.blocks; j++) {  // O = P V, into the heads' channels of out
    const int r0 = at.start(j), r1 = at.start(j + 1);
    ops.gemm(Op::kN, Op::kN, r1 - r0, at.head_size(), r1, 1.0f, from(as_const(at.slots(probabilities)), r0),
             at.qkv_part(qkv, 2), from(at.channels(out), r0), at.grid());
  }
}

template <class S, class Ops>
void backward(Ops& ops, typename S::Element* dqkv, float* scratch, const typename S::Element* dout,
              const typename S::Element* qkv, const float* lse, int B, int T, int C, int NH, int blocks = 1) {
  using E = typename S::Element;
  const Layout<E> at{B, T, C, NH, causal_blocks(blocks, T)};
  const int hs = at.head_size();
  float* scores = at.scores(scratch);
  float* dprobabilities = at.dprobabilities(scratch);
  E* probabilities = at.probabilities(scratch);
  E* gradient = at.gradient(scratch);
  constexpr int widen = elements_per_float<E>();
  scores_of(ops, at, scores, qkv);  // forward's very calls: the same bits
  ops.probability_rows(scores, probabilities, lse, at.rows(), T, at.blocks);
  // dV = P^T dO, for every (b, h) before any dP below: dP's fp32 slot b * NH + h lies over the
  // packed 16-bit P of slots 2 (b * NH + h) and 2 (b * NH + h) + 1. By key block [c0, c1): the
  // queries from c0 on, the columns [c0, c1) of their rows.
  for (int j = 0; j < at.blocks; j++) {
    const int c0 = at.start(j), c1 = at.start(j + 1);
    ops.gemm(Op::kT, Op::kN, c1 - c0, hs, T - c0, 1.0f, from(as_const(at.slots(probabilities)), c0, c0),
             from(at.channels(dout), c0), from(at.qkv_part(dqkv, 2), c0), at.grid());
  }
  for (int j = 0; j < at.blocks; j++) {  // dP = dO V^T, as S
    const int r0 = at.start(j), r1 = at.start(j + 1);
    ops.gemm(Op::kN, Op::kT, r1 - r0, r1, hs, 1.0f, from(at.channels(dout), r0), at.qkv_part(qkv, 2),
             from(at.slots(dprobabilities), r0), at.grid());
  }
  ops.score_gradient_rows(scores, dprobabilities, lse, at.rows(), T, at.blocks, at.scale());
  // dQ = dS K (as O = P V), dK = dS^T Q (as dV); written, never read (Backend::attention_backward
  // overwrites dqkv).
  const View<const E> ds = as_const(at.slots(gradient, widen));
  for (int j = 0; j < at.blocks; j++) {
    const int r0 = at.start(j), r1 = at.start(j + 1);
    ops.gemm(Op::kN, Op::kN, r1 - r0, hs, r1, 1.0f, from(ds, r0), at.qkv_part(qkv, 1), from(at.qkv_part(dqkv, 0), r0),
             at.grid());
  }
  for (int j = 0; j < at.blocks; j++) {
    const int c0 = at.start(j), c1 = at.start(j + 1);
    ops.gemm(Op::kT, Op::kN, c1 - c0, hs, T - c0, 1.0f, from(ds, c0, c0), from(at.qkv_part(qkv, 0), c0),
             from(at.qkv_part(dqkv, 1), c0), at.grid());
  }
}

}  // namespace trident::kernels::cuda::attention_schedule
