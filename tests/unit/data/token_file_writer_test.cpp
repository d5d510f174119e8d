// The streaming token-file writer: blocks appended one by one make the same file as the
// whole-file writer, and a write that stops half way leaves neither a partial file nor a lost one.
#include "io/token_file_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "io/token_dataset.h"
#include "io/user_error.h"
#include "tests/unit/data/data_test_support.h"

namespace trident::io {
namespace {

using testing::counting_contents;
using testing::ScratchDir;
using testing::all_tokens;

// Tokens appended one at a time, documents ended between them, across five 1024-token chunks:
// the whole-file writer's tokens, documents and attributes.
TEST(TokenFileWriter, BlocksAppendedAcrossDocumentsMatchTheWholeFileWriter) {
  ScratchDir dir;
  for (const int64_t vocab : {int64_t{1000}, int64_t{70000}}) {  // uint16 and uint32 files
    const int64_t n = 5000;
    const TokenFileContents contents = counting_contents(n, vocab, 4000, 300);
    const std::string whole_path = dir.file("whole" + std::to_string(vocab) + ".h5");
    const std::string blocks_path = dir.file("blocks" + std::to_string(vocab) + ".h5");
    write_token_file(whole_path, contents);

    TokenFileWriter writer(blocks_path, vocab, 1024);  // 1024-token chunks
    std::size_t doc = 1;
    for (int64_t i = 0; i < n; ++i) {
      writer.append(&contents.tokens[static_cast<std::size_t>(i)], 1);
      if (doc < contents.doc_offsets.size() - 1 && static_cast<uint64_t>(i + 1) == contents.doc_offsets[doc]) {
        writer.end_document();
        ++doc;
      }
    }
    EXPECT_EQ(writer.tokens_written(), n);
    EXPECT_FALSE(std::filesystem::exists(blocks_path));  // only PATH.tmp until finish
    writer.finish({.eot_id = contents.eot_id,
                   .tokenizer = contents.tokenizer,
                   .description = contents.description,
                   .train_tokens = contents.train_tokens});
    EXPECT_FALSE(std::filesystem::exists(blocks_path + ".tmp"));

    const TokenFileInfo whole = read_token_file_info(whole_path);
    const TokenFileInfo blocks = read_token_file_info(blocks_path);
    EXPECT_EQ(blocks.total_tokens, whole.total_tokens);
    EXPECT_EQ(blocks.train_tokens, whole.train_tokens);
    EXPECT_EQ(blocks.num_docs, whole.num_docs);
    EXPECT_EQ(blocks.token_bits, whole.token_bits);
    EXPECT_EQ(blocks.vocab_size, whole.vocab_size);
    EXPECT_EQ(blocks.eot_id, whole.eot_id);
    EXPECT_EQ(blocks.description, whole.description);
    EXPECT_EQ(testing::stored_layout(blocks_path).chunk, 1024u);
    EXPECT_EQ(all_tokens(blocks_path), contents.tokens);
  }
}

TEST(TokenFileWriter, LargeBlocksSpanManyChunks) {
  ScratchDir dir;
  const int64_t n = (int64_t{1} << 20) + 37;
  const TokenFileContents contents = counting_contents(n, 50000, n, n);
  TokenFileWriter writer(dir.file("big.h5"), 50000);  // no size hint: 1 Mi-token chunks
  const std::size_t block = 300007;
  for (std::size_t start = 0; start < contents.tokens.size(); start += block) {
    writer.append(contents.tokens.data() + start, std::min(block, contents.tokens.size() - start));
  }
  writer.finish({.eot_id = 0, .tokenizer = "counting", .description = "", .train_tokens = n});
  EXPECT_EQ(testing::stored_layout(dir.file("big.h5")).chunk, hsize_t{1} << 20);
  EXPECT_EQ(read_token_file_info(dir.file("big.h5")).num_docs, 1);  // the open document is ended
  EXPECT_EQ(all_tokens(dir.file("big.h5")), contents.tokens);
}

// A bad token in a later block, or a writer dropped before finish(): PATH.tmp is removed and an
// earlier PATH is what it was.
TEST(TokenFileWriter, AFailedWriteKeepsTheEarlierFile) {
  ScratchDir dir;
  const std::string path = dir.file("keep.h5");
  write_token_file(path, counting_contents(100, 10, 90, 100));
  const std::vector<uint32_t> good(50, 3), bad = {1, 2, 10};
  try {
    TokenFileWriter writer(path, 10);
    writer.append(good.data(), good.size());
    writer.append(bad.data(), bad.size());
    FAIL() << "no UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("token 10 at position 52 is not below vocab_size 10"), std::string::npos)
        << e.what();
  }
  {
    TokenFileWriter dropped(path, 10);
    dropped.append(good.data(), good.size());
    EXPECT_TRUE(std::filesystem::exists(path + ".tmp"));
  }
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(read_token_file_info(path).total_tokens, 100);
  EXPECT_EQ(read_token_file_info(path).train_tokens, 90);
}

TEST(TokenFileWriter, FinishRefusesWhatNoReaderWouldAccept) {
  ScratchDir dir;
  const std::string path = dir.file("f.h5");
  const std::vector<uint32_t> tokens(20, 1);
  auto finish_error = [&](std::size_t count, int64_t eot_id, int64_t train_tokens) -> std::string {
    try {
      TokenFileWriter writer(path, 10);
      writer.append(tokens.data(), count);
      writer.finish({.eot_id = eot_id, .tokenizer = "t", .description = "d", .train_tokens = train_tokens});
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(finish_error(0, 0, 1).find("no tokens"), std::string::npos);
  EXPECT_NE(finish_error(20, 10, 1).find("eot_id 10 is not below"), std::string::npos);
  EXPECT_NE(finish_error(20, 0, 21).find("train_tokens 21 is not in (0, 20]"),
            std::string::npos);
  EXPECT_NE(finish_error(20, 0, 0).find("train_tokens 0"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_THROW(TokenFileWriter(path, 0), UserError);
}

}  // namespace
}  // namespace trident::io
