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

#include "io/byte_tokenizer.h"
#include "io/param_file.h"
#include "io/synthetic_source.h"
#include "io/token_dataset.h"
#include "io/token_file_writer.h"
#include "io/user_error.h"
#include "tests/unit/data/data_test_support.h"

namespace trident::io {
namespace {

using testing::ScratchDir;
using testing::token_bytes;

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
  EXPECT_NE(out.str().find("[2/2] " + dir.file("b.txt") + ": 16 bytes"), std::string::npos) << out.str();

  // Each document's bytes, then end-of-text; an empty input is a document of its end-of-text.
  std::ofstream(dir.file("empty.txt"), std::ios::binary).flush();
  EXPECT_EQ(run_prepare({"text", "--output", path, dir.file("a.txt"), dir.file("empty.txt"), dir.file("b.txt")}, out),
            0);
  std::vector<uint32_t> expected = encode_bytes("hello, world\n");
  expected.push_back(256);
  expected.push_back(256);
  for (const uint32_t token : encode_bytes("second document\n")) expected.push_back(token);
  expected.push_back(256);
  EXPECT_EQ(testing::all_tokens(path), expected);
  EXPECT_EQ(read_token_file_info(path).num_docs, 3);
}

// --output replaces an earlier token file but never an input or another kind of file (a shell
// glob, `--output corpus/*.txt`, makes the first text file the output).
TEST(PrepareCommand, OutputReplacesOnlyAnEarlierTokenFile) {
  ScratchDir dir;
  std::ofstream(dir.file("a.txt"), std::ios::binary) << "the first text\n";
  std::ofstream(dir.file("b.txt"), std::ios::binary) << "the second text\n";
  expect_error({"text", "--output", dir.file("a.txt"), dir.file("a.txt")},
               "--output '" + dir.file("a.txt") + "' is also an INPUT");
  expect_error({"text", "--output", dir.file("a.txt"), dir.file("b.txt")},
               "--output '" + dir.file("a.txt") + "' exists and is not an HDF5 file");
  expect_error({"synthetic", "--output", dir.file("b.txt")}, "exists and is not an HDF5 file");
  std::filesystem::create_directories(dir.file("adir"));
  expect_error({"text", "--output", dir.file("adir"), dir.file("b.txt")},
               "--output '" + dir.file("adir") + "' is a directory; give the token file's name");
  // The name written first, OUTPUT.tmp, is an input: refused, the input kept (it was truncated).
  std::ofstream(dir.file("c.h5.tmp"), std::ios::binary) << "a text named like a partial output\n";
  expect_error({"text", "--output", dir.file("c.h5"), dir.file("c.h5.tmp")},
               "INPUT '" + dir.file("c.h5.tmp") + "' is " + dir.file("c.h5") + ".tmp, the name the token file is written");
  EXPECT_EQ(std::filesystem::file_size(dir.file("c.h5.tmp")), 35u);
  expect_error({"text", "--output", "", dir.file("b.txt")}, "--output is empty (an unset variable?)");
  std::ifstream first(dir.file("a.txt"));
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(first), {}), "the first text\n");
  // An earlier token file is replaced.
  std::ostringstream out;
  const std::string tokens = dir.file("tokens.h5");
  EXPECT_EQ(run_prepare({"text", "--output", tokens, dir.file("a.txt")}, out), 0);
  EXPECT_EQ(run_prepare({"text", "--output", tokens, dir.file("a.txt"), dir.file("b.txt")}, out), 0);
  EXPECT_EQ(read_token_file_info(tokens).num_docs, 2);
  // A checkpoint or parameter file, or any other HDF5 file, is not: a mistyped --output would
  // have destroyed a checkpoint.
  const std::string params = dir.file("step-000000010.h5");
  write_param_file(params, MPI_COMM_SELF, {}, {{"step", 10}});
  expect_error({"synthetic", "--output", params},
               "--output '" + params + "' exists and is not a Trident token file (a checkpoint or parameter file)");
  EXPECT_EQ(read_param_file_int_attributes(params).at("step"), 10);
  testing::rewrite_string_attribute(tokens, "format", "something-else", true, true);
  expect_error({"text", "--output", tokens, dir.file("a.txt")}, "(an HDF5 file of another kind, or one that cannot be read)");
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

// Tokens made elsewhere: an llm.c shard (uint16, header) for training and nanoGPT's raw uint16
// for validation come back token for token, each file a document, the splits as given.
TEST(PrepareCommand, TokensImportsLlmcShardsAndRawArrays) {
  ScratchDir dir;
  const std::vector<uint32_t> train = {50256, 15496, 11, 995, 0, 50255, 7, 8, 9, 10, 11, 12};
  const std::vector<uint32_t> val = {50256, 40, 41, 42, 43};
  std::ofstream(dir.file("train.bin"), std::ios::binary) << token_bytes(train, 2, {20240520, 1, 12});
  std::ofstream(dir.file("val.bin"), std::ios::binary) << token_bytes(val, 2);
  const std::string path = dir.file("gpt2.h5");
  std::ostringstream out;
  ASSERT_EQ(run_prepare({"tokens", "--output", path, "--val", dir.file("val.bin"), dir.file("train.bin")}, out), 0)
      << out.str();
  const TokenFileInfo info = read_token_file_info(path);
  EXPECT_EQ(info.vocab_size, 50257);
  EXPECT_EQ(info.eot_id, 50256);
  EXPECT_EQ(info.tokenizer, "gpt2");
  EXPECT_EQ(info.num_docs, 2);
  EXPECT_EQ(info.total_tokens, 17);
  EXPECT_EQ(info.train_tokens, 12);
  const TokenDataset dataset(path, MPI_COMM_SELF);
  std::vector<int32_t> sample(12);
  dataset.read_sample(Split::kTrain, 0, 11, sample.data());  // 12 tokens: the whole training split
  EXPECT_EQ(std::vector<uint32_t>(sample.begin(), sample.end()), train);
  sample.resize(5);
  dataset.read_sample(Split::kValidation, 0, 4, sample.data());
  EXPECT_EQ(std::vector<uint32_t>(sample.begin(), sample.end()), val);
  EXPECT_NE(out.str().find("[1/2] " + dir.file("train.bin") + ": 12 tokens (llm.c shard, uint16, training)"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("[2/2] " + dir.file("val.bin") + ": 5 tokens (raw uint16, validation)"), std::string::npos)
      << out.str();

  // uint32 shards (llm.c's 20240801) and raw uint32 with --raw; a split by --val-fraction.
  std::ofstream(dir.file("wide.bin"), std::ios::binary) << token_bytes({70000, 1, 2, 3}, 4, {20240801, 1, 4});
  std::ofstream(dir.file("wide.raw"), std::ios::binary) << token_bytes({4, 5, 6, 70001}, 4);
  EXPECT_EQ(run_prepare({"tokens", "--output", dir.file("wide.h5"), "--vocab", "100000", "--eot", "0", "--raw",
                         "uint32", "--val-fraction", "0.25", dir.file("wide.bin"), dir.file("wide.raw")},
                        out),
            0);
  EXPECT_EQ(read_token_file_info(dir.file("wide.h5")).train_tokens, 6);
  EXPECT_EQ(read_token_file_info(dir.file("wide.h5")).token_bits, 32);
}

TEST(PrepareCommand, TokensRefusesWhatItCannotTrust) {
  ScratchDir dir;
  std::ofstream(dir.file("big.bin"), std::ios::binary) << token_bytes({1, 2, 50257}, 2);
  std::ofstream(dir.file("odd.bin"), std::ios::binary) << std::string("abc");
  std::ofstream(dir.file("short.bin"), std::ios::binary) << token_bytes({1, 2, 3}, 2, {20240520, 1, 9});
  std::ofstream(dir.file("v2.bin"), std::ios::binary) << token_bytes({1}, 2, {20240520, 2, 1});
  std::ofstream(dir.file("ok.bin"), std::ios::binary) << token_bytes({1, 2, 3, 4}, 2);
  const std::string out = dir.file("x.h5");
  expect_error({"tokens", "--output", out, dir.file("big.bin")},
               "input '" + dir.file("big.bin") + "': token 2 is 50257, not below --vocab 50257 (raw uint16)");
  expect_error({"tokens", "--output", out, dir.file("odd.bin")}, "3 bytes is not a whole number of uint16 tokens");
  expect_error({"tokens", "--output", out, dir.file("short.bin")}, "header says 9 tokens but the file holds 6 bytes");
  expect_error({"tokens", "--output", out, dir.file("v2.bin")}, "llm.c shard of version 2");
  // A shard cut inside its header, and a token file given again, are named as what they are (as
  // raw tokens they would fail only as tokens out of the vocabulary).
  std::ofstream(dir.file("cut.bin"), std::ios::binary) << token_bytes({}, 2, {20240520, 1, 9}).substr(0, 500);
  expect_error({"tokens", "--output", out, dir.file("cut.bin")},
               "input '" + dir.file("cut.bin") + "': starts with llm.c's shard magic 20240520 but holds 500 bytes, "
               "fewer than the shard header's 1024: truncated");
  write_token_file(dir.file("prepared.h5"), testing::counting_contents(100, 10, 90, 20));
  expect_error({"tokens", "--output", out, dir.file("prepared.h5")},
               "input '" + dir.file("prepared.h5") + "': an HDF5 file (a Trident token file is already prepared");
  std::ofstream(dir.file("one.bin"), std::ios::binary) << token_bytes({7}, 2);
  expect_error({"tokens", "--output", out, dir.file("one.bin")},
               "trident prepare tokens: the INPUT files hold 1 token(s); splitting off the validation part");
  expect_error({"tokens", "--output", out, "--raw", "int8", dir.file("ok.bin")}, "--raw 'int8'");
  for (const char* name : {"gpt2\nx", "", "caf\xc3\xa9"}) {
    expect_error({"tokens", "--output", out, "--tokenizer", name, dir.file("ok.bin")},
                 "--tokenizer must be a name of printable ASCII characters");
  }
  expect_error({"tokens", "--output", out, "--eot", "50257", dir.file("ok.bin")}, "--eot 50257 is not a token");
  expect_error({"tokens", "--output", out, "--val", dir.file("odd.bin")}, "no INPUT");
  expect_error({"tokens", "--output", dir.file("ok.bin"), dir.file("ok.bin")}, "is also an INPUT");
  expect_error({"tokens", "--output", out, "--val", dir.file("ok.bin"), dir.file("ok.bin")},
               "'" + dir.file("ok.bin") + "' is both an INPUT and a --val file");
  expect_error({"tokens", "--output", out, "--val-fraction", "0.1", "--val", dir.file("odd.bin"), dir.file("ok.bin")},
               "--val-fraction and --val both say what is held out for validation");
  // Whole option names only: an abbreviation was taken for --val-fraction past that check.
  expect_error({"tokens", "--output", out, "--val-frac", "0.1", "--val", dir.file("odd.bin"), dir.file("ok.bin")},
               "unrecognised option '--val-frac'");
  EXPECT_FALSE(std::filesystem::exists(out));

  // A bad token found after ok.bin's were written leaves the earlier output as it was.
  std::ostringstream printed;
  ASSERT_EQ(run_prepare({"tokens", "--output", out, "--val-fraction", "0.25", dir.file("ok.bin")}, printed), 0);
  expect_error({"tokens", "--output", out, dir.file("ok.bin"), dir.file("big.bin")}, "token 2 is 50257");
  EXPECT_EQ(read_token_file_info(out).total_tokens, 4);
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
  // A truncated shard anywhere is refused before anything is written.
  expect_error({"tokens", "--output", dir.file("y.h5"), dir.file("ok.bin"), dir.file("short.bin")}, "header says 9");
  EXPECT_FALSE(std::filesystem::exists(dir.file("y.h5.tmp")));
}

TEST(PrepareCommand, HelpPrintsUsageAndSucceeds) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"}, {"synthetic", "--help"}, {"text", "-h"}, {"tokens", "--help"}}) {
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
  expect_error({}, "missing source: synthetic, text or tokens");
  expect_error({"bpe"}, "unknown source 'bpe'");
  expect_error({"synthetic"}, "--output");
  expect_error({"synthetic", "--output", out, "--bogus"}, "bogus");
  expect_error({"synthetic", "--output", out, "--vocab", "many"}, "many");
  expect_error({"synthetic", "--output", out, "--vocab", "1"}, "--vocab 1");
  expect_error({"synthetic", "--output", out, "--order", "-1"}, "--order -1");
  expect_error({"synthetic", "--output", out, "--branching", "33"}, "--branching 33");
  expect_error({"synthetic", "--output", out, "--tokens", "1"}, "--tokens 1");
  expect_error({"synthetic", "--output", out, "--val-fraction", "1.5"}, "--val-fraction 1.5");
  expect_error({"synthetic", "--output", out, "--val-fraction", "0.6"}, "--val-fraction 0.6 must be above 0 and at most 0.5");
  // Named as given, not rounded to the bound it exceeds.
  expect_error({"synthetic", "--output", out, "--val-fraction", "0.50000000001"},
               "--val-fraction 0.50000000001 must be above 0 and at most 0.5");
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
