// Who writes what in a checkpoint (io/param_file_plan.h) at scale, without the ranks: every rank's
// message of a GPT-2 774M checkpoint (parameters, optimizer.m and optimizer.v, as the trainer
// lists them, src/train/final_parameters.h) made for a tp x pp x dp layout, then read back and
// planned as each rank does after gather_holdings' all-gather. Timed: the reading and the plan.
// Counters: the bytes every rank receives, the lists and parts read.
//
//   build/bin/bench_param_file_plan
//
// Argument `share` 0 is the data of the gathering before 2026-11-25 (every rank sent its own
// list, so every rank received ranks x tensors entries), planned with today's overlap check;
// 1 is the current one (ranks holding the same list send it once).
#include <benchmark/benchmark.h>

#include <cstddef>
#include <string>
#include <vector>

#include "io/param_file_plan.h"
#include "parallel/rank_grid.h"
#include "src/model/gpt_param_table.h"
#include "src/train/final_parameters.h"

using namespace trident;
using namespace trident::io::param_file_detail;

namespace {

struct Messages {
  std::vector<char> all;
  std::vector<int> bytes, lowest;
  std::vector<io::TensorSlice> rank0;
};

Messages checkpoint_messages(int tp, int pp, int dp, bool share) {
  const model::GptConfig config{36, 20, 1280, 1024, 50257, 50304};
  const parallel::RankGrid grid(tp, dp, pp);
  Messages m;
  std::vector<std::vector<char>> lists;
  std::vector<std::vector<io::TensorSlice>> slices;
  std::vector<ListKey> keys;
  std::vector<float> held;
  for (int rank = 0; rank < grid.world_size(); ++rank) {
    const parallel::GridCoord coord = grid.coord(rank);
    model::GptLayout layout;
    layout.tp = tp;
    layout.tp_rank = coord.tp_rank;
    layout.pp = pp;
    layout.pp_rank = coord.pp_rank;
    const model::ParamTable table = model::build_gpt_param_table(config, layout);
    const parallel::ArenaShard band = train::write_band(table, grid, coord);
    held.resize(band.size() + 1);
    std::vector<io::TensorSlice> mine;
    for (const char* prefix : {"", "optimizer.m.", "optimizer.v."}) {
      for (auto& s : train::owned_slices(table, held.data(), band.begin, prefix, coord, band)) mine.push_back(s);
    }
    lists.push_back(held_list_bytes(mine));
    keys.push_back(list_key(lists.back()));
    slices.push_back(std::move(mine));
  }
  m.lowest = lowest_holders(keys);
  for (std::size_t r = 0; r < slices.size(); ++r) {
    if (!share) m.lowest[r] = static_cast<int>(r);
    const std::vector<char> message = holdings_message(slices[r], lists[r], m.lowest[r] == static_cast<int>(r));
    m.all.insert(m.all.end(), message.begin(), message.end());
    m.bytes.push_back(static_cast<int>(message.size()));
  }
  m.rank0 = slices[0];
  return m;
}

void BM_CheckpointPlan(benchmark::State& state) {
  const int tp = static_cast<int>(state.range(0)), pp = static_cast<int>(state.range(1));
  const int dp = static_cast<int>(state.range(2));
  const Messages m = checkpoint_messages(tp, pp, dp, state.range(3) != 0);
  std::size_t held = 0, written = 0;
  for (auto _ : state) {
    const GatheredHoldings gathered = parse_holdings(m.all, m.bytes, m.lowest);
    const std::vector<Plan> plans = make_plan(gathered, 0, m.rank0, 1 << 24, "bench.h5");
    benchmark::DoNotOptimize(plans.data());
    held = gathered.held.size();
    written = gathered.written.size();
  }
  state.counters["ranks"] = tp * pp * dp;
  state.counters["received_MiB"] = static_cast<double>(m.all.size()) / (1024.0 * 1024.0);
  state.counters["held"] = static_cast<double>(held);
  state.counters["written"] = static_cast<double>(written);
}

}  // namespace

// tp, pp, dp, share
BENCHMARK(BM_CheckpointPlan)
    ->ArgNames({"tp", "pp", "dp", "share"})
    ->Args({1, 1, 64, 0})
    ->Args({1, 1, 64, 1})
    ->Args({4, 2, 64, 0})
    ->Args({4, 2, 64, 1})
    ->Args({8, 4, 128, 0})
    ->Args({8, 4, 128, 1})
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
