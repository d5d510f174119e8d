// RankGrid: pure arithmetic that places every rank on the (pipeline, data, tensor) grid.
//
//   rank = tp_rank + tp * (dp_rank + dp * pp_rank)       (tensor fastest, then data, then stage)
//
// Worked example, 8 ranks with dp = tp = pp = 2 (mission.md point 2):
//   rank:     0 1 2 3 4 5 6 7
//   stage:    0 0 0 0 1 1 1 1
//   dp_rank:  0 0 1 1 0 0 1 1
//   tp_rank:  0 1 0 1 0 1 0 1
//   tensor groups   [0,1] [2,3] [4,5] [6,7]
//   data groups     [0,2] [1,3] [4,6] [5,7]
//   pipeline groups [0,4] [1,5] [2,6] [3,7]
//   model-parallel (tp x pp) groups [0,1,4,5] [2,3,6,7]
// No MPI here: the same functions drive the communicators, the layout table and the tests.
#pragma once

#include <string>
#include <vector>

namespace trident::parallel {

enum class GroupKind { kTensor, kData, kPipeline, kModel };

struct GridCoord {
  int tp_rank = 0;
  int dp_rank = 0;
  int pp_rank = 0;
};

class RankGrid {
 public:
  // Requires tp, dp, pp >= 1 (callers validate user input first).
  RankGrid(int tp, int dp, int pp);

  int tp() const { return tp_; }
  int dp() const { return dp_; }
  int pp() const { return pp_; }
  int world_size() const { return tp_ * dp_ * pp_; }

  GridCoord coord(int rank) const;
  int rank_of(const GridCoord& c) const;
  // Members (world ranks, ascending) of the group of `kind` that contains `rank`.
  std::vector<int> group_members(GroupKind kind, int rank) const;
  // Every group of `kind`, each once, ordered by its smallest rank.
  std::vector<std::vector<int>> all_groups(GroupKind kind) const;
  // A colour that is equal exactly for the ranks of one group (for MPI_Comm_split).
  int group_color(GroupKind kind, int rank) const;
  // The human-readable table printed by `trident check` and the start-up banner.
  std::string layout_table() const;

 private:
  int tp_, dp_, pp_;
};

const char* group_name(GroupKind kind);

}  // namespace trident::parallel
