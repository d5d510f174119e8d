// Token arrays written by other GPT-2 trainers, read for `trident prepare tokens`: llm.c's data
// shards (a header of 256 int32: magic 20240520 for uint16 GPT-2 tokens or 20240801 for uint32,
// version 1, the token count; then the tokens) and nanoGPT's train.bin / val.bin (raw
// little-endian uint16, no header). Both tokenize with GPT-2's BPE (vocabulary 50257,
// end-of-text 50256), which Trident does not ship: this is how the gpt2-* decks get their data.
//
// The file is read a block at a time, so a corpus of any size passes through a bounded buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace trident::io {

enum class RawTokenWidth { kUint16, kUint32 };

class TokenArrayReader {
 public:
  // Opens `path` and reads its header: an llm.c shard when it starts with one of the magics,
  // else raw tokens of `raw_width`. Throws UserError naming the file for an unreadable file or a
  // directory, an unknown shard version, a count that disagrees with the file's size, or a size
  // that is not whole tokens.
  TokenArrayReader(std::string path, RawTokenWidth raw_width, int64_t vocab);

  const std::string& format() const { return format_; }  // "llm.c shard, uint16" / "raw uint32"
  int64_t tokens() const { return tokens_; }              // the file's token count

  // Reads up to `capacity` of the next tokens into `out` (resized to what was read; empty at
  // the end). Throws UserError for a read error or a token >= vocab, with its position and value.
  void read(std::size_t capacity, std::vector<uint32_t>& out);

 private:
  std::string path_;
  int64_t vocab_ = 0;
  std::ifstream file_;
  std::string format_;
  std::size_t width_ = 2;  // bytes a token
  int64_t tokens_ = 0;
  int64_t position_ = 0;   // tokens read so far
  std::vector<unsigned char> bytes_;
};

}  // namespace trident::io
