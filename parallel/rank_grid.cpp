#include "parallel/rank_grid.h"

#include <cstdio>
#include <sstream>

namespace trident::parallel {

RankGrid::RankGrid(int tp, int dp, int pp) : tp_(tp), dp_(dp), pp_(pp) {}

GridCoord RankGrid::coord(int rank) const {
  GridCoord c;
  c.tp_rank = rank % tp_;
  c.dp_rank = (rank / tp_) % dp_;
  c.pp_rank = rank / (tp_ * dp_);
  return c;
}

int RankGrid::rank_of(const GridCoord& c) const { return c.tp_rank + tp_ * (c.dp_rank + dp_ * c.pp_rank); }

int RankGrid::group_color(GroupKind kind, int rank) const {
  const GridCoord c = coord(rank);
  // The colour is the rank with the group's own coordinates set to zero: ranks that differ only
  // in those coordinates share it.
  switch (kind) {
    case GroupKind::kTensor: return rank_of({0, c.dp_rank, c.pp_rank});
    case GroupKind::kData: return rank_of({c.tp_rank, 0, c.pp_rank});
    case GroupKind::kPipeline: return rank_of({c.tp_rank, c.dp_rank, 0});
    case GroupKind::kModel: return rank_of({0, c.dp_rank, 0});
  }
  return 0;
}

std::vector<int> RankGrid::group_members(GroupKind kind, int rank) const {
  std::vector<int> members;
  const int color = group_color(kind, rank);
  for (int r = 0; r < world_size(); ++r) {
    if (group_color(kind, r) == color) members.push_back(r);
  }
  return members;
}

std::vector<std::vector<int>> RankGrid::all_groups(GroupKind kind) const {
  std::vector<std::vector<int>> groups;
  for (int r = 0; r < world_size(); ++r) {
    auto members = group_members(kind, r);
    if (members.front() == r) groups.push_back(std::move(members));
  }
  return groups;
}

const char* group_name(GroupKind kind) {
  switch (kind) {
    case GroupKind::kTensor: return "tensor";
    case GroupKind::kData: return "data";
    case GroupKind::kPipeline: return "pipeline";
    case GroupKind::kModel: return "model (tp x pp)";
  }
  return "?";
}

std::string RankGrid::layout_table() const {
  std::ostringstream out;
  out << "layout: " << world_size() << " rank(s) = dp " << dp_ << " x tp " << tp_ << " x pp " << pp_
      << " (tensor rank fastest, then data rank, then pipeline stage)\n";
  out << "  rank  stage  dp_rank  tp_rank\n";
  for (int r = 0; r < world_size(); ++r) {
    const GridCoord c = coord(r);
    char line[64];
    std::snprintf(line, sizeof line, "  %4d  %5d  %7d  %7d\n", r, c.pp_rank, c.dp_rank, c.tp_rank);
    out << line;
  }
  for (GroupKind kind : {GroupKind::kTensor, GroupKind::kData, GroupKind::kPipeline}) {
    out << "  " << group_name(kind) << " groups:";
    for (const auto& group : all_groups(kind)) {
      out << " [";
      for (size_t i = 0; i < group.size(); ++i) out << (i ? "," : "") << group[i];
      out << "]";
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace trident::parallel
