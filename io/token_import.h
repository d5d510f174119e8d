// Token arrays written by other GPT-2 trainers, read for `trident prepare tokens`: llm.c's data
// shards (a header of 256 int32: magic 20240520 for uint16 GPT-2 tokens or 20240801 for uint32,
// version 1, the token count; then the tokens) and nanoGPT's train.bin / val.bin (raw
// little-endian uint16, no header). Both tokenize with GPT-2's BPE (vocabulary 50257,
// end-of-text 50256), which Trident does not ship: this is how the gpt2-* decks get their data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trident::io {

enum class RawTokenWidth { kUint16, kUint32 };

// Appends the tokens of `path` to `tokens`: an llm.c shard when it starts with one of the
// magics, else raw tokens of `raw_width`. Throws UserError naming the file for an unreadable
// file, an unknown shard version, a count that disagrees with the file's size, a size that is
// not whole tokens, or a token >= vocab (with its position and value). Returns how many tokens
// it appended, and says in `format` which format it read ("llm.c shard, uint16" / "raw uint16").
int64_t append_token_array(const std::string& path, RawTokenWidth raw_width, int64_t vocab,
                           std::vector<uint32_t>& tokens, std::string& format);

}  // namespace trident::io
