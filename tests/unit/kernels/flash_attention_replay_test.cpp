// The flash attention kernels of kernels/cuda/flash_attention.cu replayed on the host: the same
// per-thread functions (kernels/cuda/flash_attention_math.h), called in the kernels' block,
// phase and thread order (every thread's work between two __syncthreads, then the next phase),
// against the CPU twin's attention. This checks the index arithmetic, the causal bounds, the
// online softmax and the backward's recomputation on every build, with or without a GPU; the GPU
// twin tests (tests/gpu) then check the device compiles and runs the same thing.
//
// What the replay cannot catch: a mistake in the kernel bodies' own glue (a missing
// __syncthreads, a wrong blockIdx mapping), which only the GPU tests see. The glue is kept to
// loops over tiles and calls of the shared functions, mirrored line for line below.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"              // cpu::attention_forward, attention_backward
#include "kernels/cuda/flash_attention_math.h"  // the kernels' per-thread math
#include "kernels/stored_element.h"            // stored::Fp32, Bf16, Fp16
#include "tests/unit/kernels/kernel_test_util.h"  // encoded, decoded

namespace trident::kernels::test {
namespace {

namespace fl = cuda::flash;

// The kernels' threads of one block: per-thread registers as arrays.
struct Row {
  float values[fl::kHeadSize];
};

// flash_forward_kernel<S>, every block in turn (E: S's stored element).
template <class S, class E = typename S::Element>
void replay_forward(std::vector<E>& out, std::vector<float>& lse, const std::vector<E>& qkv, int B, int T, int C,
                    int NH, float scale) {
  std::vector<float> k_tile(fl::kTile * fl::kHeadSize), v_tile(fl::kTile * fl::kHeadSize);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int q0 = 0; q0 < T; q0 += fl::kTile) {
        std::vector<Row> q(fl::kTile), o(fl::kTile);
        std::vector<float> m(fl::kTile, -INFINITY), l(fl::kTile, 0.0f);
        for (int tid = 0; tid < fl::kTile; ++tid) {
          const int t = q0 + tid;
          const bool active = t < T;
          const E* q_row = qkv.data() + fl::qkv_index(b, active ? t : 0, fl::kPartQ, h, T, C);
          for (int c = 0; c < fl::kHeadSize; ++c) {
            q[tid].values[c] = active ? S::load(q_row[c]) : 0.0f;
            o[tid].values[c] = 0.0f;
          }
        }
        const int last_query = std::min(q0 + fl::kTile, T) - 1;
        for (int k0 = 0; k0 <= last_query; k0 += fl::kTile) {
          for (int tid = 0; tid < fl::kTile; ++tid) {
            fl::load_kv_tiles<S>(k_tile.data(), v_tile.data(), fl::kHeadSize, qkv.data(), b, k0, h, T, C, tid);
          }
          for (int tid = 0; tid < fl::kTile; ++tid) {
            const int t = q0 + tid;
            if (t < T) {
              fl::forward_tile_update(q[tid].values, k_tile.data(), v_tile.data(), k0, t, scale, m[tid], l[tid],
                                      o[tid].values);
            }
          }
        }
        for (int tid = 0; tid < fl::kTile; ++tid) {
          const int t = q0 + tid;
          if (t < T) fl::forward_finish<S>(out.data(), lse.data(), o[tid].values, m[tid], l[tid], b, t, h, T, C, NH);
        }
      }
    }
  }
}

// flash_delta_kernel<S>, flash_dkdv_kernel<S> and flash_dq_kernel<S>, in the launcher's order.
template <class S, class E = typename S::Element>
void replay_backward(std::vector<E>& dqkv, const std::vector<E>& dout, const std::vector<E>& qkv,
                     const std::vector<E>& out, const std::vector<float>& lse, int B, int T, int C, int NH,
                     float scale) {
  std::vector<float> delta(static_cast<std::size_t>(B) * NH * T);
  for (std::size_t index = 0; index < delta.size(); ++index) {
    const int t = static_cast<int>(index % T);
    const int h = static_cast<int>((index / T) % NH);
    const int b = static_cast<int>(index / (static_cast<std::size_t>(T) * NH));
    delta[index] = fl::row_delta<S>(dout.data(), out.data(), b, t, h, T, C);
  }

  std::vector<float> shared(fl::kDkdvSharedBytes / sizeof(float));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int k0 = 0; k0 < T; k0 += fl::kTile) {
        const fl::DkdvTiles tiles = fl::carve_dkdv_tiles(shared.data());
        for (int tid = 0; tid < fl::kTile; ++tid) {
          fl::load_kv_tiles<S>(tiles.k_own, tiles.v_own, fl::kPadded, qkv.data(), b, k0, h, T, C, tid);
        }
        std::vector<Row> dk(fl::kTile, Row{}), dv(fl::kTile, Row{});
        for (int q0 = k0; q0 < T; q0 += fl::kTile) {
          for (int tid = 0; tid < fl::kTile; ++tid) {
            for (int i = tid; i < fl::kTile * fl::kHeadSize; i += fl::kTile) {
              fl::load_qkv_tile_element<S>(tiles.q_tile, fl::kHeadSize, qkv.data(), b, q0, fl::kPartQ, h, T, C, i);
              fl::load_row_tile_element<S>(tiles.do_tile, fl::kHeadSize, dout.data(), b, q0, h, T, C, i);
            }
            fl::load_stat_element(tiles.lse_tile, lse.data(), b, h, q0, T, NH, tid);
            fl::load_stat_element(tiles.delta_tile, delta.data(), b, h, q0, T, NH, tid);
          }
          for (int tid = 0; tid < fl::kTile; ++tid) {
            const int key = k0 + tid;
            if (key < T) {
              fl::dkdv_tile_update(tiles.k_own + tid * fl::kPadded, tiles.v_own + tid * fl::kPadded, tiles.q_tile,
                                   tiles.do_tile, tiles.lse_tile, tiles.delta_tile, q0, key, T, scale, dk[tid].values,
                                   dv[tid].values);
            }
          }
        }
        for (int tid = 0; tid < fl::kTile; ++tid) {
          const int key = k0 + tid;
          if (key >= T) continue;
          fl::store_row<S>(dqkv.data() + fl::qkv_index(b, key, fl::kPartK, h, T, C), dk[tid].values, scale);
          fl::store_row<S>(dqkv.data() + fl::qkv_index(b, key, fl::kPartV, h, T, C), dv[tid].values, 1.0f);
        }
      }
    }
  }

  std::vector<float> k_tile(fl::kTile * fl::kHeadSize), v_tile(fl::kTile * fl::kHeadSize);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int q0 = 0; q0 < T; q0 += fl::kTile) {
        std::vector<Row> q(fl::kTile), do_t(fl::kTile), dq(fl::kTile, Row{});
        std::vector<float> lse_t(fl::kTile), delta_t(fl::kTile);
        for (int tid = 0; tid < fl::kTile; ++tid) {
          const int t_safe = q0 + tid < T ? q0 + tid : 0;
          fl::load_row<S>(q[tid].values, qkv.data() + fl::qkv_index(b, t_safe, fl::kPartQ, h, T, C));
          fl::load_row<S>(do_t[tid].values, dout.data() + fl::row_index(b, t_safe, h, T, C));
          lse_t[tid] = lse[fl::stat_index(b, h, t_safe, T, NH)];
          delta_t[tid] = delta[fl::stat_index(b, h, t_safe, T, NH)];
        }
        const int last_query = std::min(q0 + fl::kTile, T) - 1;
        for (int k0 = 0; k0 <= last_query; k0 += fl::kTile) {
          for (int tid = 0; tid < fl::kTile; ++tid) {
            fl::load_kv_tiles<S>(k_tile.data(), v_tile.data(), fl::kHeadSize, qkv.data(), b, k0, h, T, C, tid);
          }
          for (int tid = 0; tid < fl::kTile; ++tid) {
            const int t = q0 + tid;
            if (t < T) {
              fl::dq_tile_update(q[tid].values, do_t[tid].values, lse_t[tid], delta_t[tid], k_tile.data(),
                                 v_tile.data(), k0, t, scale, dq[tid].values);
            }
          }
        }
        for (int tid = 0; tid < fl::kTile; ++tid) {
          const int t = q0 + tid;
          if (t < T) fl::store_row<S>(dqkv.data() + fl::qkv_index(b, t, fl::kPartQ, h, T, C), dq[tid].values, scale);
        }
      }
    }
  }
}

// max |a - b| / max |b|: the playground's measure (perf/kernels/playground.cuh); a NaN or
// infinity in either makes it infinite (std::max would keep the old value past a NaN).
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return scale > 0.0 ? worst / scale : worst;
}

std::vector<float> uniform(std::size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> pick(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = pick(rng);
  return v;
}

// Scores with a standard deviation ~1.3 (neither flat nor one-hot). Both sides compute in fp32
// and differ in the order of the 64-term dot products and T-term sums, in exp, and in the
// online rescaling: a few ulp of values below max |ref|. 1e-5 of max |ref| has a wide margin
// (the playground's replay measured 1.7e-7 to 7.9e-7), while a wrong head, row, mask or
// missing scale is O(1).
constexpr double kTolerance = 1e-5;

class FlashAttentionReplay : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(FlashAttentionReplay, ForwardAndBackwardMatchTheCpuTwin) {
  const auto [B, T, NH] = GetParam();
  const int C = NH * fl::kHeadSize;
  const float scale = 1.0f / std::sqrt(static_cast<float>(fl::kHeadSize));  // as the launcher
  std::mt19937 rng(static_cast<unsigned>(1000 * B + 10 * T + NH));
  const std::size_t rows = static_cast<std::size_t>(B) * T;
  const auto qkv = uniform(rows * 3 * C, rng, -2.0f, 2.0f);
  const auto dout = uniform(rows * C, rng, -1.0f, 1.0f);
  const auto dqkv_start = uniform(rows * 3 * C, rng, -0.5f, 0.5f);  // stale values: overwritten

  std::vector<float> scratch(cpu::attention_scratch_size(B, T, NH));
  std::vector<float> out_ref(rows * C), lse_ref(static_cast<std::size_t>(B) * NH * T);
  cpu::attention_forward(out_ref.data(), lse_ref.data(), scratch.data(), qkv.data(), B, T, C, NH);
  std::vector<float> dqkv_ref = dqkv_start;
  cpu::attention_backward(dqkv_ref.data(), scratch.data(), dout.data(), qkv.data(), lse_ref.data(), B, T, C, NH);

  std::vector<float> out(out_ref.size(), NAN), lse(lse_ref.size(), NAN);
  replay_forward<stored::Fp32>(out, lse, qkv, B, T, C, NH, scale);
  EXPECT_LT(relative_error(out, out_ref), kTolerance) << "out";
  EXPECT_LT(relative_error(lse, lse_ref), kTolerance) << "lse";

  // The backward from the twin's forward state, so that its own error is measured alone.
  // From NaN: every element must be written and none read.
  std::vector<float> dqkv(dqkv_start.size(), NAN);
  replay_backward<stored::Fp32>(dqkv, dout, qkv, out_ref, lse_ref, B, T, C, NH, scale);
  // q, k and v parts separately, each against its own max |ref|.
  for (int part = 0; part < 3; ++part) {
    std::vector<float> got, want;
    for (std::size_t r = 0; r < rows; ++r) {
      for (int c = 0; c < C; ++c) {
        const std::size_t i = r * 3 * C + static_cast<std::size_t>(part) * C + c;
        got.push_back(dqkv[i]);
        want.push_back(dqkv_ref[i]);
      }
    }
    EXPECT_LT(relative_error(got, want), kTolerance) << "d" << "qkv"[part];
  }
}

// The kernels on 16-bit buffers (train.precision = bf16 | fp16): qkv, dout, out and dqkv in 16
// bits, read into the fp32 tiles as they are, out and dqkv rounded once when stored. That is the
// fp32 kernels' replay on the widened values with its stored results rounded, bit for bit (the
// same fp32 operations in the same order: only the loads and stores differ), the semantics
// RoundedStorageBackend gives the CPU twin.
template <class S>
void expect_16bit_replay_is_the_rounded_fp32_replay(int B, int T, int NH) {
  const Precision p = S::kPrecision;
  const int C = NH * fl::kHeadSize;
  const float scale = 1.0f / std::sqrt(static_cast<float>(fl::kHeadSize));
  std::mt19937 rng(static_cast<unsigned>(77 * B + T + NH));
  const std::size_t rows = static_cast<std::size_t>(B) * T;
  const auto qkv16 = encoded(uniform(rows * 3 * C, rng, -2.0f, 2.0f), p);
  const auto dout16 = encoded(uniform(rows * C, rng, -1.0f, 1.0f), p);
  const auto dqkv_start16 = encoded(uniform(rows * 3 * C, rng, -0.5f, 0.5f), p);
  const auto lse_size = static_cast<std::size_t>(B) * NH * T;

  std::vector<float> out32(rows * C, NAN), lse32(lse_size, NAN);
  replay_forward<stored::Fp32>(out32, lse32, decoded(qkv16, p), B, T, C, NH, scale);
  std::vector<uint16_t> out16(rows * C, 0);
  std::vector<float> lse16(lse_size, NAN);
  replay_forward<S>(out16, lse16, qkv16, B, T, C, NH, scale);
  EXPECT_EQ(out16, encoded(out32, p)) << "out";
  EXPECT_EQ(lse16, lse32) << "lse (fp32)";

  // Backward from the 16-bit forward's state, as in training.
  std::vector<float> dqkv32(dqkv_start16.size(), NAN);  // overwritten, as the 16-bit one's stale values
  replay_backward<stored::Fp32>(dqkv32, decoded(dout16, p), decoded(qkv16, p), decoded(out16, p), lse16, B, T, C, NH,
                                scale);
  std::vector<uint16_t> dqkv16 = dqkv_start16;
  replay_backward<S>(dqkv16, dout16, qkv16, out16, lse16, B, T, C, NH, scale);
  EXPECT_EQ(dqkv16, encoded(dqkv32, p)) << "dqkv";
  EXPECT_NE(dqkv16, dqkv_start16);  // the backward wrote something
}

TEST(FlashAttentionReplay16Bit, Bf16IsTheRoundedFp32Replay) {
  expect_16bit_replay_is_the_rounded_fp32_replay<stored::Bf16>(2, 130, 3);
}

TEST(FlashAttentionReplay16Bit, Fp16IsTheRoundedFp32Replay) {
  expect_16bit_replay_is_the_rounded_fp32_replay<stored::Fp16>(1, 200, 2);
}

// T: one tile, a ragged tail (130 = 2 tiles + 2, 200 = 3 tiles + 8); B and NH > 1 for the
// batch and head strides.
INSTANTIATE_TEST_SUITE_P(Shapes, FlashAttentionReplay,
                         ::testing::Values(std::make_tuple(1, 64, 1), std::make_tuple(2, 130, 3),
                                           std::make_tuple(1, 200, 2)),
                         [](const auto& shape) {
                           // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on
                           // "literal" + std::to_string(...).
                           std::string name = "B";
                           name += std::to_string(std::get<0>(shape.param));
                           name += "_T";
                           name += std::to_string(std::get<1>(shape.param));
                           name += "_NH";
                           name += std::to_string(std::get<2>(shape.param));
                           return name;
                         });

}  // namespace
}  // namespace trident::kernels::test
