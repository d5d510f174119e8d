// The byte-level tokenizer of `trident prepare text`: token b (0..255) is the byte b, and
// token 256 is end-of-text, appended after each document. Vocabulary 257, no merges, so any
// file round-trips exactly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trident::io {

constexpr int64_t kByteVocabSize = 257;
constexpr uint32_t kByteEotId = 256;
constexpr const char* kByteTokenizerName = "bytes";

// Documents as one token stream: doc d is tokens [doc_offsets[d], doc_offsets[d+1]), its
// last token the end-of-text id.
struct EncodedDocuments {
  std::vector<uint32_t> tokens;
  std::vector<uint64_t> doc_offsets;  // starts with 0, ends with tokens.size()
  // Inputs that may not be what the user meant, one line each (an empty file; a file holding NUL
  // bytes, which text does not): encoded all the same, for the caller to warn of.
  std::vector<std::string> doubts;
};

// The bytes of `text` as tokens (no end-of-text).
std::vector<uint32_t> encode_bytes(std::string_view text);

// Tokens back to bytes; each end-of-text token becomes `eot_text` (empty: dropped).
// Throws std::invalid_argument on a token above 256.
std::string decode_bytes(const std::vector<uint32_t>& tokens, std::string_view eot_text = "");

// Each file is one document: its bytes, then end-of-text. Throws UserError naming a file that
// cannot be read.
EncodedDocuments encode_documents(const std::vector<std::string>& files);

}  // namespace trident::io
