// The byte tokenizer: every byte round-trips, each document ends with end-of-text.
#include "io/byte_tokenizer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>  // mkfifo

#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/user_error.h"
#include "tests/unit/data/data_test_support.h"

namespace trident::io {
namespace {

using testing::ScratchDir;

TEST(ByteTokenizer, EveryByteRoundTrips) {
  std::string text;
  for (int b = 0; b < 256; ++b) text.push_back(static_cast<char>(b));
  text += "héllo\n";
  const std::vector<uint32_t> tokens = encode_bytes(text);
  ASSERT_EQ(tokens.size(), text.size());
  EXPECT_EQ(tokens[255], 255u);
  EXPECT_EQ(tokens[0], 0u);
  EXPECT_EQ(decode_bytes(tokens), text);
}

// A file read in blocks of any size gives its bytes as tokens, and says why it may not be text.
TEST(ByteTokenizer, TextFileReaderGivesEveryByteInBlocksOfAnySize) {
  ScratchDir dir;
  std::string text;
  for (int i = 0; i < 1000; ++i) text.push_back(static_cast<char>((i * 7 + 1) % 256));  // 4 NUL bytes
  std::ofstream(dir.file("mixed.bin"), std::ios::binary) << text;
  for (const std::size_t block : {std::size_t{1}, std::size_t{3}, std::size_t{999}, std::size_t{1000},
                                  std::size_t{4096}}) {
    TextFileReader reader(dir.file("mixed.bin"));
    EXPECT_EQ(reader.tokens(), 1000);
    std::vector<uint32_t> tokens, part;
    for (reader.read(block, part); !part.empty(); reader.read(block, part)) {
      EXPECT_LE(part.size(), block);
      tokens.insert(tokens.end(), part.begin(), part.end());
    }
    EXPECT_EQ(tokens, encode_bytes(text)) << "block " << block;
    EXPECT_EQ(reader.doubt(), "input '" + dir.file("mixed.bin") +
                                  "' holds 4 NUL byte(s) of 1000: is it text? (its bytes are written as tokens "
                                  "all the same)");
  }
  std::ofstream(dir.file("a.txt"), std::ios::binary) << "plain text\n";
  TextFileReader plain(dir.file("a.txt"));
  std::vector<uint32_t> part;
  plain.read(100, part);
  EXPECT_EQ(decode_bytes(part), "plain text\n");
  EXPECT_EQ(plain.doubt(), "");
  std::ofstream(dir.file("empty.txt"), std::ios::binary).flush();
  TextFileReader empty(dir.file("empty.txt"));
  empty.read(100, part);
  EXPECT_TRUE(part.empty());
  EXPECT_EQ(empty.doubt(), "input '" + dir.file("empty.txt") + "' is empty: only its end-of-text is written");
  EXPECT_EQ(kByteVocabSize, 257);
  EXPECT_EQ(kByteEotId, 256u);
}

TEST(ByteTokenizer, UnreadableInputIsAUserErrorNamingIt) {
  ScratchDir dir;
  const std::string missing = dir.file("missing.txt");
  try {
    TextFileReader reader(missing);
    FAIL() << "no UserError";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), "input '" + missing + "': cannot open (No such file or directory)");
  }
  try {
    TextFileReader reader(dir.file(""));
    FAIL() << "no UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read (Is a directory)"), std::string::npos) << e.what();
  }
  // A FIFO without a writer: refused at once (opening it would block forever), as is a device.
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& special : {fifo, std::string("/dev/zero")}) {
    try {
      TextFileReader reader(special);
      FAIL() << "no UserError for " << special;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(", not a regular file: write the data to a file first"), std::string::npos)
          << e.what();
    }
  }
}

TEST(ByteTokenizer, EndOfTextDecodesToTheGivenText) {
  const std::vector<uint32_t> tokens = {'a', 'b', 256, 256, 'x', '\n', 256};
  EXPECT_EQ(decode_bytes(tokens, "<|eot|>"), "ab<|eot|><|eot|>x\n<|eot|>");
  EXPECT_EQ(decode_bytes(tokens), "abx\n");
}

TEST(ByteTokenizer, DecodingANonByteTokenThrows) {
  EXPECT_THROW(decode_bytes({1, 257}), std::invalid_argument);
}

}  // namespace
}  // namespace trident::io
