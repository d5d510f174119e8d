// Writing token files (format: docs/data-format.md, read by token_dataset.h). One process
// writes, serially, to PATH.tmp and renames it to PATH at the end, so a reader never sees half a
// file and an earlier PATH survives a write that fails.
//
// TokenFileWriter streams: tokens are appended block by block, so a corpus larger than memory
// (fineweb's 10 billion GPT-2 tokens) is written with one block in memory. write_token_file is
// the whole-file form for contents already in memory (synthetic and byte-level text).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/hdf5_handle.h"

namespace trident::io {

// The root attributes written when a file is finished (the token width follows vocab_size).
struct TokenFileAttributes {
  int64_t eot_id = 0;
  std::string tokenizer;
  std::string description;
  int64_t train_tokens = 0;        // tokens [0, train_tokens) are the training split
  double entropy_rate_nats = NAN;  // known loss floor of a synthetic source, else NaN
};

class TokenFileWriter {
 public:
  // Creates PATH.tmp (and PATH's directory). vocab_size fixes the width: uint16 up to 65536,
  // else uint32. expected_tokens, when known (> 0), keeps the chunk of a small file small: a
  // chunk is min(expected_tokens, 1 Mi) tokens, else 1 Mi. Throws UserError naming PATH.
  TokenFileWriter(std::string path, int64_t vocab_size, int64_t expected_tokens = 0);
  // Without finish() (an exception on the way), PATH.tmp is removed and PATH left as it was.
  ~TokenFileWriter();
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;

  // Appends tokens to the open document. Throws UserError for a token >= vocab_size (naming its
  // position in the file) or a failed write.
  void append(const uint32_t* tokens, std::size_t count);
  // Ends the open document (one with no tokens is allowed: an empty input file).
  void end_document();
  int64_t tokens_written() const { return written_; }

  // Ends an open document, writes /doc_offsets and the attributes, closes the file and renames
  // it to PATH. Throws UserError for no tokens, an eot_id or train_tokens out of range.
  void finish(const TokenFileAttributes& attributes);

 private:
  std::string path_;
  std::string temporary_;
  int64_t vocab_size_ = 0;
  int64_t written_ = 0;
  std::vector<uint64_t> doc_offsets_{0};
  std::vector<uint16_t> narrow_;  // the block in the file's width, when that is uint16
  Handle file_;
  Handle tokens_;  // /tokens, extended at every append
};

// Everything a whole-file writer supplies; tokens < vocab_size.
struct TokenFileContents {
  std::vector<uint32_t> tokens;
  std::vector<uint64_t> doc_offsets;  // starts with 0, ends with tokens.size()
  int64_t vocab_size = 0;
  int64_t eot_id = 0;
  std::string tokenizer;
  std::string description;
  int64_t train_tokens = 0;
  double entropy_rate_nats = NAN;
};

// Writes a token file through TokenFileWriter. Throws UserError naming the path on bad contents
// (doc_offsets that do not rise from 0 to the token count, and what finish() refuses) or I/O.
void write_token_file(const std::string& path, const TokenFileContents& contents);

}  // namespace trident::io
