// Token files: write -> read round trips, the sample arithmetic, and one UserError line naming
// the file for every class of bad file.
#include "io/token_dataset.h"
#include "io/token_file_writer.h"

#include <gtest/gtest.h>
#include <hdf5.h>  // to build bad files and inspect good ones directly
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/user_error.h"
#include "tests/unit/data/data_test_support.h"

namespace trident::io {
namespace {

using testing::counting_contents;
using testing::ScratchDir;
using testing::stored_layout;
using testing::StoredLayout;

// The error TokenDataset's collective open reports (empty if it opened), with HDF5's own
// stderr output captured so the test can check it printed nothing.
std::string open_error(const std::string& path, std::string* stderr_text = nullptr) {
  std::string message;
  ::testing::internal::CaptureStderr();
  try {
    const TokenDataset dataset(path, MPI_COMM_SELF);
  } catch (const UserError& e) {
    message = e.what();
  }
  const std::string printed = ::testing::internal::GetCapturedStderr();
  if (stderr_text != nullptr) *stderr_text = printed;
  return message;
}

std::string info_error(const std::string& path) {
  try {
    read_token_file_info(path);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

void expect_round_trip(const TokenFileContents& contents, const std::string& path,
                       int expected_bits) {
  write_token_file(path, contents);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  const TokenDataset dataset(path, MPI_COMM_SELF);
  const TokenFileInfo& info = dataset.info();
  EXPECT_EQ(info.path, path);
  EXPECT_EQ(info.vocab_size, contents.vocab_size);
  EXPECT_EQ(info.eot_id, contents.eot_id);
  EXPECT_EQ(info.tokenizer, contents.tokenizer);
  EXPECT_EQ(info.description, contents.description);
  EXPECT_EQ(info.total_tokens, static_cast<int64_t>(contents.tokens.size()));
  EXPECT_EQ(info.train_tokens, contents.train_tokens);
  EXPECT_EQ(info.num_docs, static_cast<int64_t>(contents.doc_offsets.size()) - 1);
  EXPECT_EQ(info.token_bits, expected_bits);
  EXPECT_TRUE(std::isnan(info.entropy_rate_nats));
  EXPECT_EQ(stored_layout(path).element_bytes, static_cast<size_t>(expected_bits / 8));

  // Every sample of both splits is the right T+1 tokens of the file.
  const int seq_len = 61;
  for (Split split : {Split::kTrain, Split::kValidation}) {
    const int64_t start = split == Split::kTrain ? 0 : contents.train_tokens;
    std::vector<int32_t> sample(seq_len + 1);
    const int64_t count = dataset.num_samples(split, seq_len);
    ASSERT_GT(count, 0);
    for (int64_t i = 0; i < count; i += 7) {
      dataset.read_sample(split, i, seq_len, sample.data());
      for (int t = 0; t <= seq_len; ++t) {
        ASSERT_EQ(sample[t], static_cast<int32_t>(contents.tokens[start + i * seq_len + t]))
            << "sample " << i << " position " << t;
      }
    }
  }

  const TokenFileInfo serial = read_token_file_info(path);
  EXPECT_EQ(serial.total_tokens, info.total_tokens);
  EXPECT_EQ(serial.train_tokens, info.train_tokens);
  EXPECT_EQ(serial.vocab_size, info.vocab_size);
  EXPECT_EQ(serial.tokenizer, info.tokenizer);
}

TEST(TokenDataset, RoundTripsUint16TokensAttributesAndSamples) {
  ScratchDir dir;
  expect_round_trip(counting_contents(5000, 1000, 4000, 300), dir.file("small.h5"), 16);
}

TEST(TokenDataset, RoundTripsUint32TokensWhenVocabularyExceeds65536) {
  ScratchDir dir;
  expect_round_trip(counting_contents(200000, 70000, 150000, 40000), dir.file("wide.h5"), 32);
}

TEST(TokenDataset, VocabularyOfExactly65536IsStoredAsUint16) {
  ScratchDir dir;
  TokenFileContents contents = counting_contents(70000, 65536, 60000, 70000);
  contents.tokens[5] = 65535;
  write_token_file(dir.file("edge.h5"), contents);
  EXPECT_EQ(read_token_file_info(dir.file("edge.h5")).token_bits, 16);
  const TokenDataset dataset(dir.file("edge.h5"), MPI_COMM_SELF);
  std::vector<int32_t> sample(9);
  dataset.read_sample(Split::kTrain, 0, 8, sample.data());
  EXPECT_EQ(sample[5], 65535);
}

// A file changed under a running job (truncated, written to, replaced) is an error at the next
// step's check, not zeros or other tokens trained on silently.
TEST(TokenDataset, AFileChangedAfterOpeningIsAnError) {
  ScratchDir dir;
  const TokenFileContents contents = counting_contents(5000, 100, 4000, 100);
  auto error_after = [&](const std::string& name, const std::function<void(const std::string&)>& change) {
    const std::string path = dir.file(name);
    write_token_file(path, contents);
    const TokenDataset dataset(path, MPI_COMM_SELF);
    EXPECT_NO_THROW(dataset.check_unchanged());
    change(path);
    try {
      dataset.check_unchanged();
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string truncated = error_after("truncated.h5", [](const std::string& path) {
    std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  });
  EXPECT_NE(truncated.find("changed while training (its size was "), std::string::npos) << truncated;
  const std::string touched = error_after("touched.h5", [](const std::string& path) {
    std::filesystem::last_write_time(path, std::filesystem::last_write_time(path) + std::chrono::seconds(5));
  });
  EXPECT_NE(touched.find("(it was written to since start-up)"), std::string::npos) << touched;
  const std::string replaced = error_after("replaced.h5", [&](const std::string& path) {
    write_token_file(path + ".new", contents);
    std::filesystem::rename(path + ".new", path);
  });
  EXPECT_NE(replaced.find("(another file now has its name)"), std::string::npos) << replaced;
  EXPECT_NE(replaced.find("rerun to resume from the newest checkpoint"), std::string::npos) << replaced;
}

TEST(TokenDataset, SamplesCrossChunkBoundariesOfLargeFiles) {
  ScratchDir dir;
  const int64_t n = (int64_t{1} << 20) + 5000;  // two chunks of at most 2^20 tokens
  const TokenFileContents contents = counting_contents(n, 50000, n - 1000, n);
  write_token_file(dir.file("large.h5"), contents);
  const StoredLayout layout = stored_layout(dir.file("large.h5"));
  EXPECT_TRUE(layout.chunked);
  EXPECT_EQ(layout.chunk, hsize_t{1} << 20);
  const TokenDataset dataset(dir.file("large.h5"), MPI_COMM_SELF);
  const int seq_len = 1000;
  const int64_t across = ((int64_t{1} << 20) - 10) / seq_len;  // starts before the boundary
  ASSERT_LT(across * seq_len, int64_t{1} << 20);
  ASSERT_GT((across + 1) * seq_len, int64_t{1} << 20);
  std::vector<int32_t> sample(seq_len + 1);
  dataset.read_sample(Split::kTrain, across, seq_len, sample.data());
  for (int t = 0; t <= seq_len; ++t) {
    ASSERT_EQ(sample[t], static_cast<int32_t>(contents.tokens[across * seq_len + t]));
  }
}

TEST(TokenDataset, SmallFilesAreChunkedNoLargerThanTheirTokens) {
  ScratchDir dir;
  write_token_file(dir.file("tiny.h5"), counting_contents(10, 5, 8, 10));
  const StoredLayout layout = stored_layout(dir.file("tiny.h5"));
  EXPECT_TRUE(layout.chunked);
  EXPECT_EQ(layout.chunk, 10u);
}

TEST(TokenDataset, WriterCreatesMissingParentDirectories) {
  ScratchDir dir;
  const std::string path = dir.file("a/b/c.h5");
  write_token_file(path, counting_contents(100, 10, 90, 100));
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(read_token_file_info(path).total_tokens, 100);
}

TEST(TokenDataset, WriterRejectsTokensOutsideTheVocabulary) {
  ScratchDir dir;
  TokenFileContents contents = counting_contents(100, 10, 90, 100);
  contents.tokens[17] = 10;
  const std::string path = dir.file("bad.h5");
  try {
    write_token_file(path, contents);
    FAIL() << "no UserError";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("dataset '" + path + "'", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find("position 17"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(TokenDataset, NumSamplesIsSplitTokensMinusOneOverSeqLen) {
  ScratchDir dir;
  // training split 25 tokens, validation 24 tokens
  write_token_file(dir.file("n.h5"), counting_contents(49, 100, 25, 49));
  const TokenDataset dataset(dir.file("n.h5"), MPI_COMM_SELF);
  EXPECT_EQ(dataset.num_samples(Split::kTrain, 8), 3);       // 24 / 8: 3*8+1 = 25 fits
  EXPECT_EQ(dataset.num_samples(Split::kValidation, 8), 2);  // 23 / 8
  EXPECT_EQ(dataset.num_samples(Split::kTrain, 1), 24);
  EXPECT_EQ(dataset.num_samples(Split::kTrain, 24), 1);
  EXPECT_EQ(dataset.num_samples(Split::kTrain, 25), 0);
  EXPECT_THROW(dataset.num_samples(Split::kTrain, 0), std::invalid_argument);
}

TEST(TokenDataset, ValidationSamplesStartAtTrainTokens) {
  ScratchDir dir;
  write_token_file(dir.file("v.h5"), counting_contents(49, 100, 25, 49));
  const TokenDataset dataset(dir.file("v.h5"), MPI_COMM_SELF);
  std::vector<int32_t> sample(9);
  dataset.read_sample(Split::kValidation, 1, 8, sample.data());
  EXPECT_EQ(sample[0], 25 + 8);
  EXPECT_EQ(sample[8], 25 + 16);
}

TEST(TokenDataset, ReadSampleBeyondTheEndThrows) {
  ScratchDir dir;
  write_token_file(dir.file("e.h5"), counting_contents(49, 100, 25, 49));
  const TokenDataset dataset(dir.file("e.h5"), MPI_COMM_SELF);
  std::vector<int32_t> sample(9);
  EXPECT_NO_THROW(dataset.read_sample(Split::kTrain, 2, 8, sample.data()));
  EXPECT_THROW(dataset.read_sample(Split::kTrain, 3, 8, sample.data()), std::out_of_range);
  EXPECT_THROW(dataset.read_sample(Split::kTrain, -1, 8, sample.data()), std::out_of_range);
  EXPECT_THROW(dataset.read_sample(Split::kValidation, 2, 8, sample.data()), std::out_of_range);
}

// Rank 0's path, known to every rank of MPI_COMM_WORLD (one process or several under mpirun).
std::string rank0_path(const std::string& local) {
  int length = static_cast<int>(local.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string path = local;
  path.resize(static_cast<size_t>(length));
  MPI_Bcast(path.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
  return path;
}

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

TEST(TokenDataset, OpensCollectivelyOverCommWorld) {
  ScratchDir dir;
  const std::string path = rank0_path(dir.file("w.h5"));
  if (world_rank() == 0) write_token_file(path, counting_contents(100, 10, 90, 100));
  MPI_Barrier(MPI_COMM_WORLD);
  {
    const TokenDataset dataset(path, MPI_COMM_WORLD);
    EXPECT_EQ(dataset.info().total_tokens, 100);
    std::vector<int32_t> sample(9);
    dataset.read_sample(Split::kTrain, world_rank() % 11, 8, sample.data());
    EXPECT_EQ(sample[0], (world_rank() % 11) * 8 % 10);
  }
  MPI_Barrier(MPI_COMM_WORLD);  // rank 0's directory outlives every rank's use of it
}

// A file only some ranks can open fails on every rank (no rank waits in H5Fopen alone), each with
// the first failing rank's reason, naming that rank: rank 0 prints it (it once printed "cannot
// open on another rank of the job", without the reason or the rank).
TEST(TokenDataset, FileMissingOnSomeRanksFailsOnAllRanks) {
  ScratchDir dir;
  const std::string path = dir.file("own.h5");  // each rank its own path
  if (world_rank() == 0) write_token_file(path, counting_contents(100, 10, 90, 100));
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::string message;
  try {
    const TokenDataset dataset(path, MPI_COMM_WORLD);
  } catch (const UserError& e) {
    message = e.what();
  }
  if (size == 1) {
    EXPECT_EQ(message, "");
  } else {
    // Rank 1's path (each rank has its own directory), as every rank reports rank 1's failure.
    EXPECT_EQ(message.rfind("dataset '", 0), 0u) << message;
    const std::string tail = "/own.h5': cannot open (No such file or directory) (on rank 1)";
    EXPECT_EQ(message.size() >= tail.size() ? message.substr(message.size() - tail.size()) : message, tail);
    if (world_rank() == 1) {
      EXPECT_EQ(message, "dataset '" + path + "': cannot open (No such file or directory) (on rank 1)");
    }
  }
}

// --- bad files: one line, starting with the file, and nothing printed by HDF5 ---------------

void expect_bad_file(const std::string& path, const std::string& problem) {
  std::string printed;
  const std::string message = open_error(path, &printed);
  EXPECT_EQ(message.rfind("dataset '" + path + "': ", 0), 0u) << message;
  EXPECT_NE(message.find(problem), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(printed, "") << "HDF5 printed its error stack";
  const std::string serial = info_error(path);
  EXPECT_EQ(serial.rfind("dataset '" + path + "': ", 0), 0u) << serial;
  EXPECT_NE(serial.find(problem), std::string::npos) << serial;
}

TEST(TokenDatasetErrors, MissingFileSaysNoSuchFile) {
  ScratchDir dir;
  const std::string path = dir.file("missing.h5");
  expect_bad_file(path, "cannot open (No such file or directory)");
  EXPECT_EQ(open_error(path), "dataset '" + path + "': cannot open (No such file or directory)");
}

TEST(TokenDatasetErrors, TextFileIsNotHdf5) {
  ScratchDir dir;
  const std::string path = dir.file("text.h5");
  std::ofstream(path) << "these are not the tokens you are looking for\n";
  expect_bad_file(path, "not an HDF5 file");
}

TEST(TokenDatasetErrors, DirectoryCannotBeOpened) {
  ScratchDir dir;
  std::filesystem::create_directories(dir.file("folder.h5"));
  expect_bad_file(dir.file("folder.h5"), "cannot open");
}

// A copy cut short (scp interrupted, a quota hit) is named as truncated with the sizes, on the
// collective open and on the serial one of `trident check`.
TEST(TokenDatasetErrors, TruncatedFileSaysHowMuchIsThere) {
  ScratchDir dir;
  const std::string whole = dir.file("whole.h5");
  write_token_file(whole, testing::counting_contents(200000, 1000, 190000, 5000));
  const auto size = std::filesystem::file_size(whole);
  const std::string path = dir.file("cut.h5");
  std::filesystem::copy_file(whole, path);
  std::filesystem::resize_file(path, size / 2);
  expect_bad_file(path, "cannot open (truncated: " + std::to_string(size / 2) + " of its " + std::to_string(size) +
                            " bytes are there (an interrupted copy or transfer?))");
}

// String attributes as h5py writes them (variable-length UTF-8) or as other tools may (fixed-
// length UTF-8) are read like the writer's own (fixed-length ASCII).
TEST(TokenDataset, StringAttributesOfAnyLayoutAndCharacterSetAreRead) {
  ScratchDir dir;
  for (const bool variable : {true, false}) {
    for (const bool utf8 : {true, false}) {
      const std::string path = dir.file("strings" + std::to_string(variable) + std::to_string(utf8) + ".h5");
      write_token_file(path, counting_contents(100, 10, 90, 20));
      testing::rewrite_string_attribute(path, "format", "trident-tokens", variable, utf8);
      testing::rewrite_string_attribute(path, "tokenizer", "bytes \xc3\xa9", variable, utf8);
      const TokenFileInfo info = read_token_file_info(path);
      EXPECT_EQ(info.tokenizer, "bytes \xc3\xa9") << "variable " << variable << ", utf8 " << utf8;
      const TokenDataset dataset(path, MPI_COMM_WORLD);
      EXPECT_EQ(dataset.info().total_tokens, 100);
    }
  }
}

TEST(TokenDatasetErrors, Hdf5FileWithoutOurAttributesIsNotATokenFile) {
  ScratchDir dir;
  const std::string path = dir.file("foreign.h5");
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const hsize_t count = 4;
  const hid_t space = H5Screate_simple(1, &count, nullptr);
  const hid_t dataset = H5Dcreate2(file, "tokens", H5T_STD_U16LE, space, H5P_DEFAULT,
                                   H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(dataset, 0);
  H5Dclose(dataset);
  H5Sclose(space);
  H5Fclose(file);
  expect_bad_file(path, "not a Trident token file (missing attribute 'format')");
}

// Replaces an integer attribute of a written file.
TEST(TokenDatasetErrors, WrongFormatVersionIsRefused) {
  ScratchDir dir;
  const std::string path = dir.file("future.h5");
  write_token_file(path, counting_contents(100, 10, 90, 100));
  testing::set_int_attribute(path, "format_version", 2);
  expect_bad_file(path, "unsupported format_version 2");
}

TEST(TokenDatasetErrors, TrainTokensBeyondTheFileIsRefused) {
  ScratchDir dir;
  const std::string path = dir.file("split.h5");
  write_token_file(path, counting_contents(100, 10, 90, 100));
  testing::set_int_attribute(path, "train_tokens", 101);
  expect_bad_file(path, "train_tokens 101");
}

TEST(TokenDatasetErrors, Uint16TokensWithALargerVocabularyAreRefused) {
  ScratchDir dir;
  const std::string path = dir.file("narrow.h5");
  write_token_file(path, counting_contents(100, 10, 90, 100));
  testing::set_int_attribute(path, "vocab_size", 70000);
  testing::set_int_attribute(path, "eot_id", 0);
  expect_bad_file(path, "uint16");
}

TEST(TokenDatasetErrors, TokenAboveTheVocabularyIsReportedWhenRead) {
  ScratchDir dir;
  const std::string path = dir.file("shrunk.h5");
  write_token_file(path, counting_contents(100, 10, 90, 100));
  testing::set_int_attribute(path, "vocab_size", 5);
  testing::set_int_attribute(path, "eot_id", 4);
  const TokenDataset dataset(path, MPI_COMM_SELF);
  std::vector<int32_t> sample(9);
  EXPECT_THROW(dataset.read_sample(Split::kTrain, 0, 8, sample.data()), UserError);
}

}  // namespace
}  // namespace trident::io
