// The byte tokenizer: every byte round-trips, each document ends with end-of-text.
#include "io/byte_tokenizer.h"

#include <gtest/gtest.h>

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

TEST(ByteTokenizer, DocumentsEndWithEndOfText) {
  ScratchDir dir;
  std::ofstream(dir.file("a.txt"), std::ios::binary) << "ab";
  std::ofstream(dir.file("empty.txt"), std::ios::binary);
  std::ofstream(dir.file("c.txt"), std::ios::binary) << "xyz\n";
  const EncodedDocuments documents =
      encode_documents({dir.file("a.txt"), dir.file("empty.txt"), dir.file("c.txt")});
  EXPECT_EQ(documents.tokens,
            (std::vector<uint32_t>{'a', 'b', 256, 256, 'x', 'y', 'z', '\n', 256}));
  EXPECT_EQ(documents.doc_offsets, (std::vector<uint64_t>{0, 3, 4, 9}));
  EXPECT_EQ(decode_bytes(documents.tokens, "<|eot|>"), "ab<|eot|><|eot|>xyz\n<|eot|>");
  EXPECT_EQ(decode_bytes(documents.tokens), "abxyz\n");
  EXPECT_EQ(kByteVocabSize, 257);
  EXPECT_EQ(kByteEotId, 256u);
}

TEST(ByteTokenizer, UnreadableInputIsAUserErrorNamingIt) {
  ScratchDir dir;
  const std::string missing = dir.file("missing.txt");
  try {
    encode_documents({missing});
    FAIL() << "no UserError";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), "input '" + missing + "': cannot open (No such file or directory)");
  }
}

TEST(ByteTokenizer, DecodingANonByteTokenThrows) {
  EXPECT_THROW(decode_bytes({1, 257}), std::invalid_argument);
}

}  // namespace
}  // namespace trident::io
