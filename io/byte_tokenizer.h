// The byte-level tokenizer of `trident prepare text`: token b (0..255) is the byte b, and
// token 256 is end-of-text, appended after each document. Vocabulary 257, no merges, so any
// file round-trips exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace trident::io {

constexpr int64_t kByteVocabSize = 257;
constexpr uint32_t kByteEotId = 256;
constexpr const char* kByteTokenizerName = "bytes";

// The bytes of `text` as tokens (no end-of-text).
std::vector<uint32_t> encode_bytes(std::string_view text);

// Tokens back to bytes; each end-of-text token becomes `eot_text` (empty: dropped).
// Throws std::invalid_argument on a token above 256.
std::string decode_bytes(const std::vector<uint32_t>& tokens, std::string_view eot_text = "");

// One INPUT of `prepare text`: its bytes as tokens, read a block at a time, so a corpus of any
// size (enwik9's 10^9 bytes, say) passes through a bounded buffer. The caller appends the
// end-of-text that closes the document.
class TextFileReader {
 public:
  // Opens `path`. Throws UserError naming it for a directory or a file that cannot be opened.
  explicit TextFileReader(std::string path);

  int64_t tokens() const { return bytes_total_; }  // one a byte: the file's size when opened

  // Reads up to `capacity` of the next bytes into `out` as tokens (resized to what was read;
  // empty at the end). Throws UserError naming the file for a read error (a file that shrank).
  void read(std::size_t capacity, std::vector<uint32_t>& out);

  // After the last read: why the input may not be what the user meant (an empty file; one
  // holding NUL bytes, which text does not), one line, or empty. Its bytes are tokens all the same.
  std::string doubt() const;

 private:
  std::string path_;
  std::ifstream file_;
  int64_t bytes_total_ = 0;
  int64_t position_ = 0;
  int64_t nul_bytes_ = 0;
  std::vector<char> bytes_;
};

}  // namespace trident::io
