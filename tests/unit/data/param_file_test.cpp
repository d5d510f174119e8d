// Parameter files in one process (MPI initialised as a singleton): write -> read round trips
// of replicated and split (here: whole-slice) tensors, the ownership check, and errors that
// name the file. Several ranks are covered by tests/mpi/*_equivalence_test.sh.
#include "io/param_file.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "io/user_error.h"
#include "tests/unit/data/data_test_support.h"

namespace trident::io {
namespace {

using testing::ScratchDir;

std::vector<float> ramp(std::size_t n, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * (static_cast<float>(i) - 3.25f) + 1e-7f * static_cast<float>(i);
  return v;
}

TensorSlice whole(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& data) {
  TensorSlice t;
  t.name = name;
  t.global_shape = std::move(shape);
  t.data = data.data();
  t.write = true;
  return t;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(ParamFile, RoundTripsReplicatedAndSplitTensorsExactly) {
  ScratchDir dir;
  const std::string path = dir.file("params.h5");
  const std::vector<float> wte = ramp(5 * 4, 0.5f), qkv = ramp(3 * 2 * 4, -0.25f), ln = ramp(4, 3.0f);
  TensorSlice wte_slice = whole("wte", {5, 4}, wte);
  wte_slice.split_axis = 0;  // vocabulary-parallel, one rank: the whole axis
  wte_slice.slice_extent = 5;
  TensorSlice qkv_slice = whole("block0.attn.qkv.weight", {3, 2, 4}, qkv);
  qkv_slice.split_axis = 1;
  qkv_slice.slice_extent = 2;
  const TensorSlice ln_slice = whole("block0.ln1.weight", {4}, ln);  // replicated
  write_param_file(path, MPI_COMM_WORLD, {wte_slice, qkv_slice, ln_slice}, {{"step", 7}, {"tp", 1}});

  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  const auto read = read_param_file(path);
  ASSERT_EQ(read.size(), 3u);
  EXPECT_EQ(read.at("wte").first, (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(read.at("wte").second, wte);
  EXPECT_EQ(read.at("block0.attn.qkv.weight").first, (std::vector<int64_t>{3, 2, 4}));
  EXPECT_EQ(read.at("block0.attn.qkv.weight").second, qkv);
  EXPECT_EQ(read.at("block0.ln1.weight").first, (std::vector<int64_t>{4}));
  EXPECT_EQ(read.at("block0.ln1.weight").second, ln);

  const auto attributes = read_param_file_int_attributes(path);
  EXPECT_EQ(attributes.at("format_version"), 2);
  EXPECT_EQ(attributes.at("step"), 7);
  EXPECT_EQ(attributes.at("tp"), 1);

  // Writing again replaces the file.
  const std::vector<float> other = ramp(4, -1.0f);
  write_param_file(path, MPI_COMM_WORLD, {whole("block0.ln1.weight", {4}, other)}, {});
  const auto again = read_param_file(path);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again.at("block0.ln1.weight").second, other);
}

TEST(ParamFile, MissingDirectoryIsAUserErrorNamingTheFile) {
  ScratchDir dir;
  const std::string path = dir.file("no/such/dir/params.h5");
  const std::vector<float> ln = ramp(4, 1.0f);
  const std::string error =
      error_of([&] { write_param_file(path, MPI_COMM_WORLD, {whole("ln_f.weight", {4}, ln)}, {}); });
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("cannot create"), std::string::npos) << error;
  // The system's reason, not MPI-IO's "MPI_ERR_NO_SUCH_FILE".
  EXPECT_NE(error.find("its directory '" + dir.file("no/such/dir") + "' does not exist"), std::string::npos) << error;
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(ParamFile, DirectoryThatIsAFileIsNamed) {
  ScratchDir dir;
  const std::string file = dir.file("plain");
  std::ofstream(file) << "not a directory\n";
  const std::vector<float> ln = ramp(4, 1.0f);
  const std::string error =
      error_of([&] { write_param_file(file + "/params.h5", MPI_COMM_WORLD, {whole("ln_f.weight", {4}, ln)}, {}); });
  EXPECT_NE(error.find("its directory '" + file + "' is a file"), std::string::npos) << error;
}

TEST(ParamFile, EveryElementNeedsExactlyOneOwner) {
  ScratchDir dir;
  const std::string path = dir.file("params.h5");
  const std::vector<float> data = ramp(8, 1.0f);
  TensorSlice unowned = whole("wpe", {2, 4}, data);
  unowned.write = false;
  std::string error = error_of([&] { write_param_file(path, MPI_COMM_WORLD, {unowned}, {}); });
  EXPECT_NE(error.find("'wpe'"), std::string::npos) << error;
  EXPECT_NE(error.find(path), std::string::npos) << error;

  TensorSlice half = whole("wte", {4, 4}, data);  // rows [0, 2) only: rows 2, 3 have no owner
  half.split_axis = 0;
  half.slice_extent = 2;
  error = error_of([&] { write_param_file(path, MPI_COMM_WORLD, {half}, {}); });
  EXPECT_NE(error.find("do not cover"), std::string::npos) << error;

  TensorSlice outside = half;
  outside.slice_begin = 3;
  error = error_of([&] { write_param_file(path, MPI_COMM_WORLD, {outside}, {}); });
  EXPECT_NE(error.find("outside"), std::string::npos) << error;

  error = error_of([&] { write_param_file(path, MPI_COMM_WORLD, {whole("a/b", {8}, data)}, {}); });
  EXPECT_NE(error.find("'a/b'"), std::string::npos) << error;
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(ParamFile, FlatRangesAndSmallTransfersRoundTripExactly) {
  ScratchDir dir;
  const std::string path = dir.file("params.h5");
  const std::vector<float> w = ramp(5 * 6, 0.5f), b = ramp(7, 2.0f);
  // 12 bytes per transfer: every write and read is cut into pieces of three floats at most.
  WriteOptions options;
  options.max_bytes_per_call = 12;
  options.double_attributes = {{"lr", 2.5e-4}};
  write_param_file(path, MPI_COMM_WORLD, {whole("w", {5, 6}, w), whole("b", {7}, b)}, {{"step", 3}}, {}, options);
  const auto read = read_param_file(path);
  EXPECT_EQ(read.at("w").second, w);
  EXPECT_EQ(read.at("b").second, b);
  EXPECT_EQ(read_param_file_double_attributes(path).at("lr"), 2.5e-4);
  EXPECT_EQ(verify_param_file(path, MPI_COMM_WORLD), "");

  // Elements [2, 15) of columns [2, 5) of w (local shape [5, 3]), read in 8-byte transfers.
  std::vector<float> part(13, -1.0f);
  TensorSliceRead slice{"w", {5, 6}, 1, 2, 3, part.data(), 2, 13};
  read_param_slices(path, MPI_COMM_WORLD, {slice}, 8);
  for (int64_t i = 0; i < 13; ++i) {
    const int64_t local = 2 + i, row = local / 3, column = 2 + local % 3;
    EXPECT_EQ(part[static_cast<size_t>(i)], w[static_cast<size_t>(row * 6 + column)]) << i;
  }
}

// A tensor read with another shape than stored is refused naming both shapes, unless its rows
// may be padding (rows_required: a vocabulary padded for another tensor-parallel size), where the
// required rows must be there and the rest is read or zero-filled.
TEST(ParamFile, ShapesMustMatchExceptForPaddingRows) {
  ScratchDir dir;
  const std::string path = dir.file("params.h5");
  const std::vector<float> w = ramp(24 * 4, 0.5f), p = ramp(32 * 4, 0.25f);
  write_param_file(path, MPI_COMM_WORLD, {whole("wte", {24, 4}, w), whole("wpe", {32, 4}, p)}, {});
  std::vector<float> out(64 * 4, -1.0f);
  const auto read = [&](const std::string& name, std::vector<int64_t> shape, int64_t rows_required) {
    TensorSliceRead slice{name, std::move(shape), -1, 0, 0, out.data()};
    slice.rows_required = rows_required;
    return error_of([&] { read_param_slices(path, MPI_COMM_WORLD, {slice}); });
  };
  // Positions of another context: no padding allowed, either way.
  EXPECT_NE(read("wpe", {64, 4}, -1).find("tensor 'wpe' has shape [32, 4] in the file, where the model's is [64, 4]"),
            std::string::npos);
  EXPECT_NE(read("wpe", {16, 4}, -1).find("has shape [32, 4] in the file, where the model's is [16, 4]"),
            std::string::npos);
  EXPECT_NE(read("wpe", {32, 8}, -1).find("where the model's is [32, 8]"), std::string::npos);
  EXPECT_NE(read("wpe", {32}, -1).find("where the model's is [32]"), std::string::npos);
  // A vocabulary of 20 padded to 24 in the file and to 32 here: rows 24..31 read as zeros.
  EXPECT_EQ(read("wte", {32, 4}, 20), "");
  for (std::size_t i = 0; i < 24 * 4; ++i) EXPECT_EQ(out[i], w[i]) << i;
  for (std::size_t i = 24 * 4; i < 32 * 4; ++i) EXPECT_EQ(out[i], 0.0f) << i;
  // Padded to 16 here: the first 16 rows.
  EXPECT_EQ(read("wte", {16, 4}, 12), "");
  for (std::size_t i = 0; i < 16 * 4; ++i) EXPECT_EQ(out[i], w[i]) << i;
  // A vocabulary of 30 needs 30 rows: 24 are not enough.
  EXPECT_NE(read("wte", {32, 4}, 30).find("tensor 'wte' has shape [24, 4] in the file, where the model's is [32, 4] "
                                          "(at least 30 rows): a file of another model"),
            std::string::npos);
}

// The byte offset of a contiguous dataset's data in the file, for corrupting it on purpose.
int64_t data_offset(const std::string& path, const std::string& name) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t dataset = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  const haddr_t offset = H5Dget_offset(dataset);
  H5Dclose(dataset);
  H5Fclose(file);
  return static_cast<int64_t>(offset);
}

TEST(ParamFile, VerificationFindsAFlippedByteAndATruncatedFile) {
  ScratchDir dir;
  const std::string path = dir.file("params.h5");
  const std::vector<float> w = ramp(64 * 16, 0.5f), b = ramp(16, 2.0f);
  write_param_file(path, MPI_COMM_WORLD, {whole("w", {64, 16}, w), whole("b", {16}, b)}, {});
  ASSERT_EQ(verify_param_file(path, MPI_COMM_WORLD), "");

  const std::string flipped = dir.file("flipped.h5");
  std::filesystem::copy_file(path, flipped);
  {
    std::fstream file(flipped, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(data_offset(flipped, "w") + 4 * 100 + 2);
    char byte = 0;
    file.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x10);
    file.seekp(data_offset(flipped, "w") + 4 * 100 + 2);
    file.write(&byte, 1);
  }
  const std::string error = verify_param_file(flipped, MPI_COMM_WORLD);
  EXPECT_NE(error.find("tensor 'w' fails its checksum"), std::string::npos) << error;
  EXPECT_NE(error.find(flipped), std::string::npos) << error;

  const std::string truncated = dir.file("truncated.h5");
  std::filesystem::copy_file(path, truncated);
  std::filesystem::resize_file(truncated, std::filesystem::file_size(path) / 2);
  const std::string cut = verify_param_file(truncated, MPI_COMM_WORLD);
  EXPECT_NE(cut.find(truncated), std::string::npos) << cut;
  const std::string sizes = std::to_string(std::filesystem::file_size(path) / 2) + " of its " +
                            std::to_string(std::filesystem::file_size(path)) + " bytes are there";
  EXPECT_NE(cut.find("truncated: " + sizes), std::string::npos) << cut;
  const std::string read = error_of([&] { read_param_file(truncated); });
  EXPECT_NE(read.find("parameter file '" + truncated + "': cannot open (truncated: " + sizes), std::string::npos)
      << read;

  EXPECT_NE(verify_param_file(dir.file("missing.h5"), MPI_COMM_WORLD).find("no such file"), std::string::npos);
}

// A parameter file whose string attributes h5py rewrote (variable-length UTF-8) still reads.
TEST(ParamFile, StringAttributesWrittenByH5pyAreRead) {
  ScratchDir dir;
  const std::string path = dir.file("params.h5");
  const std::vector<float> b = ramp(16, 2.0f);
  write_param_file(path, MPI_COMM_WORLD, {whole("b", {16}, b)}, {});
  const std::string format = read_param_file_string_attribute(path, "format").value_or("");
  ASSERT_FALSE(format.empty());
  testing::rewrite_string_attribute(path, "format", format, true, true);
  testing::rewrite_string_attribute(path, "note", "caf\xc3\xa9", true, true);
  EXPECT_EQ(read_param_file_string_attribute(path, "note"), std::optional<std::string>("caf\xc3\xa9"));
  EXPECT_EQ(read_param_file(path).size(), 1u);
  EXPECT_EQ(verify_param_file(path, MPI_COMM_WORLD), "");
}

TEST(ParamFile, ReadingSomethingElseIsAUserErrorNamingTheFile) {
  ScratchDir dir;
  const std::string missing = dir.file("missing.h5");
  std::string error = error_of([&] { read_param_file(missing); });
  EXPECT_NE(error.find(missing), std::string::npos) << error;

  const std::string tokens = dir.file("tokens.h5");
  write_token_file(tokens, testing::counting_contents(100, 10, 90, 20));
  error = error_of([&] { read_param_file(tokens); });
  EXPECT_NE(error.find(tokens), std::string::npos) << error;
  EXPECT_NE(error.find("not a Trident parameter file"), std::string::npos) << error;
}

// A file of a later format version (or none that exists) is refused by every reader, not read as
// version 2: a future layout or checksum would be misread. Version 1 is read (unverifiable).
TEST(ParamFile, OtherFormatVersionsAreRefused) {
  ScratchDir dir;
  const std::string path = dir.file("params.h5");
  write_param_file(path, MPI_COMM_WORLD, {whole("b", {16}, ramp(16, 2.0f))}, {});
  testing::set_int_attribute(path, "format_version", 3);
  for (const std::string& error : {error_of([&] { read_param_file(path); }),
                                   error_of([&] { read_param_file_int_attributes(path); }),
                                   verify_param_file(path, MPI_COMM_WORLD)}) {
    EXPECT_NE(error.find("unsupported format_version 3 (this Trident reads versions 1 to 2; a newer Trident wrote it)"),
              std::string::npos)
        << error;
  }
  testing::set_int_attribute(path, "format_version", 0);
  EXPECT_NE(error_of([&] { read_param_file(path); }).find("unsupported format_version 0"), std::string::npos);
  testing::set_int_attribute(path, "format_version", 1);
  EXPECT_EQ(read_param_file(path).size(), 1u);
}

}  // namespace
}  // namespace trident::io
