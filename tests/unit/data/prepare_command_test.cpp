// `trident prepare`: good invocations write what they say; bad ones are one-line UserErrors.
#include "io/prepare_command.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "io/synthetic_source.h"
#include "io/token_dataset.h"
#include "io/user_error.h"
#include "tests/unit/data/data_test_support.h"

namespace trident::io {
namespace {

using testing::ScratchDir;

// The message of the UserError run_prepare throws (empty when it does not).
std::string prepare_error(const std::vector<std::string>& args) {
  std::ostringstream out;
  try {
    run_prepare(args, out);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::vector<std::string>& args, const std::string& problem) {
  const std::string message = prepare_error(args);
  EXPECT_NE(message.find(problem), std::string::npos)
      << "message: '" << message << "' lacks '" << problem << "'";
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(PrepareCommand, SyntheticWritesTheFileAndReportsTheLossFloor) {
  ScratchDir dir;
  const std::string path = dir.file("out/synthetic.h5");
  std::ostringstream out;
  EXPECT_EQ(run_prepare({"synthetic", "--output", path, "--vocab", "20", "--order", "3",
                         "--branching", "3", "--tokens", "5000", "--val-fraction", "0.2",
                         "--seed", "7"},
                        out),
            0);
  const TokenFileInfo info = read_token_file_info(path);
  EXPECT_EQ(info.vocab_size, 21);
  EXPECT_EQ(info.total_tokens, 5000);
  EXPECT_EQ(info.train_tokens, 4000);
  const double floor = SyntheticSource(20, 3, 3, 7).entropy_rate_nats();
  EXPECT_DOUBLE_EQ(info.entropy_rate_nats, floor);
  const std::string printed = out.str();
  EXPECT_NE(printed.find("wrote " + path), std::string::npos) << printed;
  EXPECT_NE(printed.find("5000"), std::string::npos) << printed;
  EXPECT_NE(printed.find("4000 training, 1000 validation"), std::string::npos) << printed;
  EXPECT_NE(printed.find("entropy rate (loss floor): "), std::string::npos) << printed;
}

TEST(PrepareCommand, SyntheticDefaultsMatchTheDocumentedOnes) {
  ScratchDir dir;
  const std::string path = dir.file("default.h5");
  std::ostringstream out;
  run_prepare({"synthetic", "-o", path}, out);
  const TokenFileInfo info = read_token_file_info(path);
  EXPECT_EQ(info.vocab_size, 33);
  EXPECT_EQ(info.total_tokens, 2000000);
  EXPECT_EQ(info.train_tokens, 1900000);
  EXPECT_DOUBLE_EQ(info.entropy_rate_nats, SyntheticSource(32, 2, 4, 1234).entropy_rate_nats());
}

TEST(PrepareCommand, TextWritesOneDocumentPerInput) {
  ScratchDir dir;
  std::ofstream(dir.file("a.txt"), std::ios::binary) << "hello, world\n";
  std::ofstream(dir.file("b.txt"), std::ios::binary) << "second document\n";
  const std::string path = dir.file("text.h5");
  std::ostringstream out;
  EXPECT_EQ(run_prepare({"text", "--output", path, "--val-fraction", "0.25", dir.file("a.txt"),
                         dir.file("b.txt")},
                        out),
            0);
  const TokenFileInfo info = read_token_file_info(path);
  EXPECT_EQ(info.vocab_size, 257);
  EXPECT_EQ(info.eot_id, 256);
  EXPECT_EQ(info.tokenizer, "bytes");
  EXPECT_EQ(info.num_docs, 2);
  EXPECT_EQ(info.total_tokens, 13 + 1 + 16 + 1);
  EXPECT_EQ(info.train_tokens, 23);  // floor(31 * 0.75)
  EXPECT_TRUE(std::isnan(info.entropy_rate_nats));
  EXPECT_EQ(out.str().find("entropy rate"), std::string::npos);
}

// --output replaces an earlier token file but never an input or another kind of file (a shell
// glob, `--output corpus/*.txt`, makes the first text file the output).
TEST(PrepareCommand, OutputNeverReplacesAnInputOrAFileThatIsNotHdf5) {
  ScratchDir dir;
  std::ofstream(dir.file("a.txt"), std::ios::binary) << "the first text\n";
  std::ofstream(dir.file("b.txt"), std::ios::binary) << "the second text\n";
  expect_error({"text", "--output", dir.file("a.txt"), dir.file("a.txt")},
               "--output '" + dir.file("a.txt") + "' is also an INPUT");
  expect_error({"text", "--output", dir.file("a.txt"), dir.file("b.txt")},
               "--output '" + dir.file("a.txt") + "' exists and is not an HDF5 file");
  expect_error({"synthetic", "--output", dir.file("b.txt")}, "exists and is not an HDF5 file");
  std::ifstream first(dir.file("a.txt"));
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(first), {}), "the first text\n");
  // An earlier token file is replaced.
  std::ostringstream out;
  const std::string tokens = dir.file("tokens.h5");
  EXPECT_EQ(run_prepare({"text", "--output", tokens, dir.file("a.txt")}, out), 0);
  EXPECT_EQ(run_prepare({"text", "--output", tokens, dir.file("a.txt"), dir.file("b.txt")}, out), 0);
  EXPECT_EQ(read_token_file_info(tokens).num_docs, 2);
}

// Empty inputs and binary ones: refused when nothing is left, otherwise written with a warning.
TEST(PrepareCommand, EmptyAndBinaryInputsAreNamed) {
  ScratchDir dir;
  std::ofstream(dir.file("empty.txt"), std::ios::binary).flush();
  std::ofstream(dir.file("also-empty.txt"), std::ios::binary).flush();
  std::ofstream(dir.file("a.txt"), std::ios::binary) << "some text\n";
  std::ofstream(dir.file("binary.dat"), std::ios::binary) << std::string("\x7f" "ELF\0\0\1", 7);
  expect_error({"text", "--output", dir.file("x.h5"), dir.file("empty.txt")},
               "INPUT '" + dir.file("empty.txt") + "' is empty");
  expect_error({"text", "--output", dir.file("x.h5"), dir.file("empty.txt"), dir.file("also-empty.txt")},
               "every INPUT is empty");
  std::ostringstream out;
  EXPECT_EQ(run_prepare({"text", "--output", dir.file("x.h5"), dir.file("a.txt"), dir.file("empty.txt"),
                         dir.file("binary.dat")},
                        out),
            0);
  EXPECT_NE(out.str().find("warning: input '" + dir.file("empty.txt") + "' is empty"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("warning: input '" + dir.file("binary.dat") + "' holds 2 NUL byte(s) of 7: is it text?"),
            std::string::npos)
      << out.str();
  EXPECT_EQ(out.str().find("warning: input '" + dir.file("a.txt")), std::string::npos) << out.str();
}

TEST(PrepareCommand, HelpPrintsUsageAndSucceeds) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"}, {"synthetic", "--help"}, {"text", "-h"}}) {
    std::ostringstream out;
    EXPECT_EQ(run_prepare(args, out), 0);
    EXPECT_NE(out.str().find("usage: trident prepare"), std::string::npos) << out.str();
    if (args.size() == 2) {  // a source's own help gives --val-fraction's range as it is enforced
      EXPECT_NE(out.str().find("at most 0.5"), std::string::npos) << out.str();
    }
  }
}

TEST(PrepareCommand, BadArgumentsAreOneLineUserErrors) {
  ScratchDir dir;
  const std::string out = dir.file("x.h5");
  expect_error({}, "missing source");
  expect_error({"tokens"}, "unknown source 'tokens'");
  expect_error({"synthetic"}, "--output");
  expect_error({"synthetic", "--output", out, "--bogus"}, "bogus");
  expect_error({"synthetic", "--output", out, "--vocab", "many"}, "many");
  expect_error({"synthetic", "--output", out, "--vocab", "1"}, "--vocab 1");
  expect_error({"synthetic", "--output", out, "--order", "-1"}, "--order -1");
  expect_error({"synthetic", "--output", out, "--branching", "33"}, "--branching 33");
  expect_error({"synthetic", "--output", out, "--tokens", "1"}, "--tokens 1");
  expect_error({"synthetic", "--output", out, "--val-fraction", "1.5"}, "--val-fraction 1.5");
  expect_error({"synthetic", "--output", out, "--val-fraction", "0.6"}, "--val-fraction 0.6 must be above 0 and at most 0.5");
  expect_error({"synthetic", "--output", out, "--seed", "-3"}, "--seed -3");
  expect_error({"synthetic", "--output", out, "stray"}, "stray");
  expect_error({"text", "--output", out}, "no INPUT");
  expect_error({"text", "--output", out, dir.file("missing.txt")},
               "input '" + dir.file("missing.txt") + "': cannot open");
  expect_error({"text", "--output", out, "--val-fraction", "0", dir.file("a.txt")},
               "--val-fraction 0");
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace trident::io
