// io::write_param_file under mpirun (2 and 4 ranks): uneven tensor-parallel slices, replicated
// tensors written once, tensors held by one "stage" only, a tensor held by several ranks
// (lowest owner writes), and errors raised on every rank without a hang.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>  // getpid

#include <filesystem>
#include <string>
#include <vector>

#include "io/param_file.h"
#include "io/user_error.h"

using trident::io::TensorSlice;

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// A directory every rank agrees on (rank 0 names and creates it), removed at scope exit.
class SharedScratch {
 public:
  SharedScratch() {
    std::string name;
    if (world_rank() == 0) {
      name = (std::filesystem::temp_directory_path() / ("trident-param-mpi-" + std::to_string(::getpid()))).string();
      std::filesystem::create_directories(name);
    }
    int length = static_cast<int>(name.size());
    MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
    name.resize(static_cast<size_t>(length));
    MPI_Bcast(name.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
    dir_ = name;
  }
  ~SharedScratch() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

float value(int rank, int64_t global_index) { return static_cast<float>(rank) * 1000.0f + static_cast<float>(global_index) * 0.5f; }

TEST(ParamFileMpi, EveryRankWritesWhatItOwns) {
  const int rank = world_rank(), size = world_size();
  SharedScratch scratch;
  const std::string path = scratch.file("params.h5");

  // "split": [3, S] with S = 1 + 2 + ... + size, split along axis 1, rank r owns r + 1 columns.
  const int64_t columns = static_cast<int64_t>(size) * (size + 1) / 2;
  const int64_t begin = static_cast<int64_t>(rank) * (rank + 1) / 2, extent = rank + 1;
  std::vector<float> split;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = begin; j < begin + extent; ++j) split.push_back(value(0, i * columns + j));
  // "replicated": every rank holds it and claims it; rank 0 (the lowest owner) writes.
  std::vector<float> replicated;
  for (int64_t i = 0; i < 6; ++i) replicated.push_back(value(rank, i));
  // "replica": every rank holds it, only the last rank owns it (like data rank 0 of a group).
  std::vector<float> replica;
  for (int64_t i = 0; i < 5; ++i) replica.push_back(value(rank, i));
  // "tied": held by the first and the last rank (the first and last pipeline stage), both owners.
  std::vector<float> tied;
  for (int64_t i = 0; i < 4; ++i) tied.push_back(value(rank, i));
  // "stageR": held by rank R only.
  std::vector<float> own;
  for (int64_t i = 0; i < 2 + rank; ++i) own.push_back(value(rank, i));

  std::vector<TensorSlice> tensors;
  tensors.push_back({"split", {3, columns}, 1, begin, extent, split.data(), true});
  tensors.push_back({"replicated", {2, 3}, -1, 0, 0, replicated.data(), true});
  tensors.push_back({"replica", {5}, -1, 0, 0, replica.data(), rank == size - 1});
  if (rank == 0 || rank == size - 1) tensors.push_back({"tied", {2, 2}, -1, 0, 0, tied.data(), true});
  tensors.push_back({"stage" + std::to_string(rank), {2 + rank}, -1, 0, 0, own.data(), true});
  trident::io::write_param_file(path, MPI_COMM_WORLD, tensors, {{"step", 3}, {"tp", size}});

  const auto read = trident::io::read_param_file(path);
  ASSERT_EQ(read.size(), static_cast<size_t>(4 + size));
  // The values' counts first: a short read would otherwise be indexed past its end.
  for (const auto& [name, entry] : read) {
    int64_t count = 1;
    for (const int64_t d : entry.first) count *= d;
    ASSERT_EQ(entry.second.size(), static_cast<size_t>(count)) << name;
  }
  ASSERT_EQ(read.at("split").first, (std::vector<int64_t>{3, columns}));
  ASSERT_EQ(read.at("replicated").first, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(read.at("replica").first, (std::vector<int64_t>{5}));
  ASSERT_EQ(read.at("tied").first, (std::vector<int64_t>{2, 2}));
  for (int64_t i = 0; i < 3 * columns; ++i) EXPECT_EQ(read.at("split").second[static_cast<size_t>(i)], value(0, i));
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(read.at("replicated").second[static_cast<size_t>(i)], value(0, i));
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(read.at("replica").second[static_cast<size_t>(i)], value(size - 1, i));
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(read.at("tied").second[static_cast<size_t>(i)], value(0, i));
  for (int r = 0; r < size; ++r) {
    const auto& stage = read.at("stage" + std::to_string(r));
    ASSERT_EQ(stage.first, (std::vector<int64_t>{2 + r}));
    for (int64_t i = 0; i < 2 + r; ++i) EXPECT_EQ(stage.second[static_cast<size_t>(i)], value(r, i));
  }
  EXPECT_EQ(trident::io::read_param_file_int_attributes(path).at("step"), 3);
}

// Replicated tensors written in flat bands (each rank its 1/size, as data-parallel replicas and
// ZeRO-1 shards write), uneven bands, and 8-byte transfers so ranks need different numbers of
// collective calls; then the checksums verify on every rank.
TEST(ParamFileMpi, FlatBandsWithSmallTransfersRoundTripAndVerify) {
  const int rank = world_rank(), size = world_size();
  SharedScratch scratch;
  const std::string path = scratch.file("bands.h5");
  std::vector<float> rep(7 * 5), col(4 * 2);
  for (int64_t i = 0; i < 35; ++i) rep[static_cast<size_t>(i)] = value(0, i);
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 2; ++c) col[static_cast<size_t>(r * 2 + c)] = value(0, r * 2 * size + 2 * rank + c);
  // Uneven bands of the replica: rank r writes [35 r^2 / size^2, 35 (r+1)^2 / size^2).
  const int64_t band_begin = 35 * rank * rank / (size * size), band_end = 35 * (rank + 1) * (rank + 1) / (size * size);
  std::vector<TensorSlice> tensors;
  tensors.push_back({"rep", {7, 5}, -1, 0, 0, rep.data() + band_begin, true, band_begin, band_end - band_begin});
  // "grid" [3, 4]: two column slices (tensor rank = rank % 2) held by size / 2 replicas each
  // (data rank = rank / 2); the replicas of a slice write disjoint bands of its 6 elements.
  const int64_t tp_rank = rank % 2, dp_rank = rank / 2, dp = size / 2;
  std::vector<float> grid;
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 2 * tp_rank; c < 2 * tp_rank + 2; ++c) grid.push_back(value(0, r * 4 + c));
  const int64_t grid_begin = 6 * dp_rank / dp, grid_end = 6 * (dp_rank + 1) / dp;
  tensors.push_back({"grid", {3, 4}, 1, 2 * tp_rank, 2, grid.data() + grid_begin, true, grid_begin, grid_end - grid_begin});
  tensors.push_back({"colw", {4, 2 * static_cast<int64_t>(size)}, 1, 2 * rank, 2, col.data(), true});
  trident::io::WriteOptions options;
  options.max_bytes_per_call = 8;
  trident::io::write_param_file(path, MPI_COMM_WORLD, tensors, {{"step", 1}}, {}, options);

  EXPECT_EQ(trident::io::verify_param_file(path, MPI_COMM_WORLD), "");
  const auto read = trident::io::read_param_file(path);
  for (int64_t i = 0; i < 35; ++i) EXPECT_EQ(read.at("rep").second[static_cast<size_t>(i)], value(0, i)) << i;
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(read.at("grid").second[static_cast<size_t>(i)], value(0, i)) << i;
  for (int64_t i = 0; i < 8 * size; ++i) EXPECT_EQ(read.at("colw").second[static_cast<size_t>(i)], value(0, i)) << i;

  // Every rank reads a flat range of its column slice back in 4-byte transfers.
  std::vector<float> part(5, -1.0f);
  trident::io::read_param_slices(path, MPI_COMM_WORLD,
                                 {{"colw", {4, 2 * static_cast<int64_t>(size)}, 1, 2 * rank, 2, part.data(), 2, 5}}, 4);
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(part[static_cast<size_t>(i)], col[static_cast<size_t>(2 + i)]) << i;

  // Bands that overlap are refused on every rank.
  std::vector<TensorSlice> overlapping{{"rep", {7, 5}, -1, 0, 0, rep.data(), true, 0, rank == 0 ? 20 : 35 - 20}};
  if (rank > 0) {
    overlapping[0].write_begin = 18;
    overlapping[0].data = rep.data() + 18;
    overlapping[0].write_count = 17;
  }
  std::string error;
  try {
    trident::io::write_param_file(path + "2", MPI_COMM_WORLD, overlapping, {});
  } catch (const trident::io::UserError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("overlapping"), std::string::npos) << error;
}

// One rank's bad slice, or a directory that does not exist: every rank throws the same
// UserError naming the file (and none hangs).
TEST(ParamFileMpi, ErrorsReachEveryRank) {
  const int rank = world_rank(), size = world_size();
  SharedScratch scratch;
  const std::string path = scratch.file("params.h5");
  std::vector<float> data(8, 1.0f);
  const auto message_of = [&](const std::vector<TensorSlice>& tensors, const std::string& where) {
    try {
      trident::io::write_param_file(where, MPI_COMM_WORLD, tensors, {});
    } catch (const trident::io::UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // The last rank's slice runs past the axis.
  const int64_t begin = rank == size - 1 ? 7 : 0;
  std::string error = message_of({{"w", {8}, 0, begin, 2, data.data(), rank == 0}}, path);
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("outside"), std::string::npos) << error;
  // Two ranks claim different, overlapping slices.
  error = message_of({{"w", {8}, 0, rank == 0 ? 0 : 1, 4, data.data(), rank <= 1}}, path);
  EXPECT_NE(error.find("overlapping"), std::string::npos) << error;
  // The last rank holds "w" with another global shape: every rank names the lowest rank holding
  // it and the last.
  error = message_of({{"w", {rank == size - 1 ? 9 : 8}, -1, 0, 0, data.data(), rank == 0}}, path);
  EXPECT_NE(error.find("tensor 'w' has different global shapes on ranks 0 and " + std::to_string(size - 1)),
            std::string::npos)
      << error;
  // Nobody writes the last element.
  error = message_of({{"w", {8}, -1, 0, 0, data.data(), rank == 0, 0, 7}}, path);
  EXPECT_NE(error.find("the ranks' owned slices do not cover every element"), std::string::npos) << error;
  const std::string missing = scratch.file("no/such/dir/params.h5");
  error = message_of({{"w", {8}, -1, 0, 0, data.data(), rank == 0}}, missing);
  EXPECT_NE(error.find(missing), std::string::npos) << error;
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
