// The column-sum kernels of kernels/cuda/column_sums.cu replayed on the host: the same per-thread
// functions (kernels/cuda/column_sums_math.h), called in the kernels' grid, block and thread
// order (stage 1's lanes, the barrier, the partials; then stage 2), against the CPU twin's bias
// and LayerNorm parameter gradients. This checks the index arithmetic (ragged tiles and chunks,
// fewer rows than chunks) and the 16-bit loads on every build, GPU or not; tests/gpu then checks
// the device runs the same thing (the matmul and LayerNorm backward twin tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/layernorm.h"          // cpu::layernorm_forward, layernorm_backward
#include "kernels/cuda/column_sums_math.h"  // the kernels' per-thread math
#include "kernels/stored_element.h"         // stored::Fp32, Bf16
#include "tests/unit/kernels/kernel_test_util.h"  // random_floats, encoded, decoded

namespace trident::kernels::test {
namespace {

namespace col = cuda::columns;

// Stage 1 of one sum (sum_partials_kernel), every block in turn: the lanes, the barrier, the
// partials. `lane` computes thread (tx, ty)'s lane value(s) into lane_sums.
template <class Lane>
void replay_stage1(int width, const col::ChunkPlan& plan, std::vector<std::vector<float>*> partials, Lane lane) {
  const int tiles = (width + col::kTileColumns - 1) / col::kTileColumns;
  for (int tile = 0; tile < tiles; ++tile) {
    for (int chunk = 0; chunk < plan.chunks; ++chunk) {
      std::vector<float> sums[2] = {std::vector<float>(col::kRowLanes * col::kTileColumns, NAN),
                                    std::vector<float>(col::kRowLanes * col::kTileColumns, NAN)};
      for (int ty = 0; ty < col::kRowLanes; ++ty) {
        for (int tx = 0; tx < col::kTileColumns; ++tx) {
          lane(tile, chunk, tx, ty, sums[0][ty * col::kTileColumns + tx], sums[1][ty * col::kTileColumns + tx]);
        }
      }
      // __syncthreads(); then every thread calls store_partial (only (tx, 0) writes).
      for (std::size_t k = 0; k < partials.size(); ++k) {
        const auto* lane_sums = reinterpret_cast<const float(*)[col::kTileColumns]>(sums[k].data());
        for (int ty = 0; ty < col::kRowLanes; ++ty) {
          for (int tx = 0; tx < col::kTileColumns; ++tx) {
            col::store_partial(partials[k]->data(), lane_sums, width, tile, chunk, tx, ty);
          }
        }
      }
    }
  }
}

// Stage 2 (finish_kernel): every thread of the finishing grid, past the last column included.
void replay_finish(std::vector<float>& out, const std::vector<float>& partial, int width, int chunks) {
  const int threads = (width + col::kFinishThreads - 1) / col::kFinishThreads * col::kFinishThreads;
  for (int c = 0; c < threads; ++c) col::finish_column(out.data(), partial.data(), width, chunks, c);
}

// add_column_sums on x[N, width] stored as E, from `init`.
template <class S, class E = typename S::Element>
std::vector<float> replay_column_sums(const std::vector<E>& x, int N, int width, std::vector<float> sums) {
  const col::ChunkPlan plan = col::plan_chunks(N, col::kChunks);
  std::vector<float> partial(static_cast<std::size_t>(plan.chunks) * width, NAN);
  replay_stage1(width, plan, {&partial}, [&](int tile, int chunk, int tx, int ty, float& a, float&) {
    a = col::sum_lane<S>(x.data(), N, width, plan.rows_per_chunk, tile, chunk, tx, ty);
  });
  replay_finish(sums, partial, width, plan.chunks);
  return sums;
}

// add_layernorm_parameter_gradients: {dweight, dbias} from their initial values.
template <class S, class E = typename S::Element>
std::vector<std::vector<float>> replay_layernorm(const std::vector<E>& dout, const std::vector<E>& inp,
                                                 const std::vector<float>& mean, const std::vector<float>& rstd,
                                                 int N, int C, std::vector<float> dweight, std::vector<float> dbias) {
  const col::ChunkPlan plan = col::plan_chunks(N, col::kChunks);
  std::vector<float> partial_dw(static_cast<std::size_t>(plan.chunks) * C, NAN), partial_db(partial_dw);
  replay_stage1(C, plan, {&partial_dw, &partial_db}, [&](int tile, int chunk, int tx, int ty, float& dw, float& db) {
    col::layernorm_lane<S>(dout.data(), inp.data(), mean.data(), rstd.data(), N, C, plan.rows_per_chunk, tile, chunk,
                           tx, ty, dw, db);
  });
  replay_finish(dweight, partial_dw, C, plan.chunks);
  replay_finish(dbias, partial_db, C, plan.chunks);
  return {dweight, dbias};
}

// max |got - want| / max |want|: the sums differ from the references only in the order of the
// fp32 additions (chains of rows per lane, then 8 lanes, then the chunks, against a double sum
// or the twin's rows-in-order loop). A sequential fp32 sum of N terms is off by ~sqrt(N) ulp of
// its size in practice: below 1e-6 here. 1e-5 keeps a margin; a row missed or taken twice moves
// a column by a whole term (1e-3 of these sums or more), a wrong column by O(1).
constexpr double kSumTolerance = 1e-5;

void expect_sums_close(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double max_want = 0.0, max_error = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    max_want = std::max(max_want, std::fabs(want[i]));
    const double error = std::isfinite(got[i]) ? std::fabs(got[i] - want[i]) : INFINITY;
    max_error = std::max(max_error, error);
  }
  EXPECT_LE(max_error, kSumTolerance * max_want) << what << ": max error " << max_error << " of max " << max_want;
}

struct Shape {
  int N, width;
};
// Ragged tiles and chunks (1001 rows: 63 chunks of 16 but the last of 9; 100 columns: three
// full tiles and one of 4), fewer rows than chunks (each chunk one row), a single column, and
// GPT-2's width at a quarter of its rows.
const Shape kShapes[] = {{1001, 100}, {5, 3}, {64 * 16 + 1, 1}, {2048, 768}};

// x[N, width] with a per-column offset, so that every column's sum differs (a wrong column shows).
std::vector<float> offset_columns(int N, int width, std::mt19937& rng) {
  std::vector<float> x = random_floats(static_cast<std::size_t>(N) * width, rng);
  const std::vector<float> offset = random_floats(static_cast<std::size_t>(width), rng, -0.25f, 0.25f);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] += offset[i % static_cast<std::size_t>(width)];
  return x;
}

TEST(ColumnSumsReplay, BiasGradientMatchesADoubleSum) {
  std::mt19937 rng(7);
  for (const Shape& s : kShapes) {
    const std::vector<float> x = offset_columns(s.N, s.width, rng);
    const std::vector<float> init = random_floats(static_cast<std::size_t>(s.width), rng);
    for (const bool bf16 : {false, true}) {
      const std::vector<float> values = bf16 ? decoded(encoded(x, Precision::kBf16), Precision::kBf16) : x;
      std::vector<double> want(init.begin(), init.end());
      for (int n = 0; n < s.N; ++n) {
        for (int c = 0; c < s.width; ++c) want[c] += values[static_cast<std::size_t>(n) * s.width + c];
      }
      const std::vector<float> got =
          bf16 ? replay_column_sums<stored::Bf16>(encoded(x, Precision::kBf16), s.N, s.width, init)
               : replay_column_sums<stored::Fp32>(x, s.N, s.width, init);
      expect_sums_close(got, want,
                        std::string(bf16 ? "bf16" : "fp32") + " N " + std::to_string(s.N) + " width " +
                            std::to_string(s.width));
    }
  }
}

TEST(ColumnSumsReplay, LayernormParameterGradientsMatchTheCpuTwin) {
  std::mt19937 rng(11);
  for (const Shape& s : kShapes) {
    const int N = s.N, C = s.width;
    const std::size_t count = static_cast<std::size_t>(N) * C;
    for (const bool bf16 : {false, true}) {
      auto stored_values = [&](std::vector<float> v) {
        return bf16 ? decoded(encoded(v, Precision::kBf16), Precision::kBf16) : v;
      };
      const std::vector<float> inp = stored_values(offset_columns(N, C, rng));
      const std::vector<float> dout = stored_values(offset_columns(N, C, rng));
      const std::vector<float> weight = random_floats(static_cast<std::size_t>(C), rng, 0.5f, 1.5f);
      const std::vector<float> bias = random_floats(static_cast<std::size_t>(C), rng);
      std::vector<float> out(count), mean(static_cast<std::size_t>(N)), rstd(static_cast<std::size_t>(N));
      cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), N, C);
      const std::vector<float> dw_init = random_floats(static_cast<std::size_t>(C), rng);
      const std::vector<float> db_init = random_floats(static_cast<std::size_t>(C), rng);
      std::vector<float> dw_want(dw_init), db_want(db_init), dinp(count, 0.0f);  // dinp: not compared
      cpu::layernorm_backward(dinp.data(), dw_want.data(), db_want.data(), dout.data(), inp.data(), weight.data(),
                              mean.data(), rstd.data(), N, C);
      const auto got = bf16 ? replay_layernorm<stored::Bf16>(encoded(dout, Precision::kBf16),
                                                             encoded(inp, Precision::kBf16), mean, rstd, N, C, dw_init,
                                                             db_init)
                            : replay_layernorm<stored::Fp32>(dout, inp, mean, rstd, N, C, dw_init, db_init);
      const std::string what =
          std::string(bf16 ? "bf16" : "fp32") + " N " + std::to_string(N) + " C " + std::to_string(C);
      expect_sums_close(got[0], to_double(dw_want), "dweight " + what);
      expect_sums_close(got[1], to_double(db_want), "dbias " + what);
    }
  }
}

TEST(ColumnSumsReplay, ChunksCoverEveryRowOnce) {
  for (int N : {1, 5, 63, 64, 65, 1001, 8192}) {
    const col::ChunkPlan plan = col::plan_chunks(N, col::kChunks);
    EXPECT_LE(plan.chunks, col::kChunks) << N;
    EXPECT_GE(plan.chunks, 1) << N;
    EXPECT_LT((plan.chunks - 1) * plan.rows_per_chunk, N) << N << ": the last chunk is empty";
    EXPECT_GE(plan.chunks * plan.rows_per_chunk, N) << N << ": rows left over";
  }
  EXPECT_GE(col::sum_scratch_floats(768), static_cast<std::size_t>(col::kChunks) * 768u);
  EXPECT_GE(col::pair_scratch_floats(768), 2u * col::kChunks * 768u);
}

}  // namespace
}  // namespace trident::kernels::test
