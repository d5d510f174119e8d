// TokenArrayReader: headers and sizes checked when opened, tokens read in blocks of any size
// exactly as they are in the file, a bad token named by its position in the file.
#include "io/token_import.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "io/user_error.h"
#include "tests/unit/data/data_test_support.h"

namespace trident::io {
namespace {

using testing::ScratchDir;
using testing::token_bytes;

std::vector<uint32_t> read_all(TokenArrayReader& reader, std::size_t block) {
  std::vector<uint32_t> all, part;
  for (reader.read(block, part); !part.empty(); reader.read(block, part)) all.insert(all.end(), part.begin(), part.end());
  return all;
}

TEST(TokenArrayReader, ReadsShardsAndRawFilesInBlocksOfAnySize) {
  ScratchDir dir;
  std::vector<uint32_t> tokens;
  for (uint32_t i = 0; i < 1000; ++i) tokens.push_back((i * 7919u) % 50257u);
  std::ofstream(dir.file("shard.bin"), std::ios::binary) << token_bytes(tokens, 2, {20240520, 1, 1000});
  std::ofstream(dir.file("raw16.bin"), std::ios::binary) << token_bytes(tokens, 2);
  std::ofstream(dir.file("raw32.bin"), std::ios::binary) << token_bytes(tokens, 4);
  std::ofstream(dir.file("shard32.bin"), std::ios::binary) << token_bytes(tokens, 4, {20240801, 1, 1000});
  const struct {
    const char* file;
    RawTokenWidth raw;
    const char* format;
  } cases[] = {{"shard.bin", RawTokenWidth::kUint32, "llm.c shard, uint16"},  // the header wins over --raw
               {"raw16.bin", RawTokenWidth::kUint16, "raw uint16"},
               {"raw32.bin", RawTokenWidth::kUint32, "raw uint32"},
               {"shard32.bin", RawTokenWidth::kUint16, "llm.c shard, uint32"}};
  for (const auto& c : cases) {
    for (const std::size_t block : {std::size_t{1}, std::size_t{3}, std::size_t{999}, std::size_t{1000}, std::size_t{4096}}) {
      TokenArrayReader reader(dir.file(c.file), c.raw, 50257);
      EXPECT_EQ(reader.format(), c.format);
      EXPECT_EQ(reader.tokens(), 1000);
      EXPECT_EQ(read_all(reader, block), tokens) << c.file << " in blocks of " << block;
    }
  }
}

// A raw file shorter than llm.c's header, and an empty one, are raw tokens like any other.
TEST(TokenArrayReader, SmallAndEmptyRawFiles) {
  ScratchDir dir;
  std::ofstream(dir.file("three.bin"), std::ios::binary) << token_bytes({5, 6, 7}, 2);
  std::ofstream(dir.file("empty.bin"), std::ios::binary);
  TokenArrayReader three(dir.file("three.bin"), RawTokenWidth::kUint16, 10);
  EXPECT_EQ(read_all(three, 2), (std::vector<uint32_t>{5, 6, 7}));
  TokenArrayReader empty(dir.file("empty.bin"), RawTokenWidth::kUint16, 10);
  EXPECT_EQ(empty.tokens(), 0);
  EXPECT_TRUE(read_all(empty, 2).empty());
}

TEST(TokenArrayReader, ABadTokenIsNamedByItsPositionInTheFile) {
  ScratchDir dir;
  std::ofstream(dir.file("bad.bin"), std::ios::binary) << token_bytes({1, 2, 3, 4, 5, 99, 6}, 2, {20240520, 1, 7});
  TokenArrayReader reader(dir.file("bad.bin"), RawTokenWidth::kUint16, 50);
  std::vector<uint32_t> part;
  reader.read(4, part);
  try {
    reader.read(4, part);
    FAIL() << "no UserError";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), "input '" + dir.file("bad.bin") +
                                         "': token 5 is 99, not below --vocab 50 (llm.c shard, uint16)");
  }
  EXPECT_THROW(TokenArrayReader(dir.file("."), RawTokenWidth::kUint16, 50), UserError);  // a directory
  EXPECT_THROW(TokenArrayReader(dir.file("missing.bin"), RawTokenWidth::kUint16, 50), UserError);
}

}  // namespace
}  // namespace trident::io
