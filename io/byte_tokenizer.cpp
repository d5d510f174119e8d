// Byte-level tokenizer: bytes are tokens 0..255, end-of-text is 256.
#include "io/byte_tokenizer.h"

#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <utility>

#include "io/input_file.h"  // open_input_file
#include "io/user_error.h"  // UserError

namespace trident::io {

std::vector<uint32_t> encode_bytes(std::string_view text) {
  std::vector<uint32_t> tokens;
  tokens.reserve(text.size());
  for (char c : text) tokens.push_back(static_cast<unsigned char>(c));
  return tokens;
}

std::string decode_bytes(const std::vector<uint32_t>& tokens, std::string_view eot_text) {
  std::string text;
  text.reserve(tokens.size());
  for (uint32_t token : tokens) {
    if (token == kByteEotId) {
      text.append(eot_text);
    } else if (token < kByteEotId) {
      text.push_back(static_cast<char>(static_cast<unsigned char>(token)));
    } else {
      throw std::invalid_argument("decode_bytes: token " + std::to_string(token) +
                                  " is not a byte-tokenizer id");
    }
  }
  return text;
}

TextFileReader::TextFileReader(std::string path) : path_(std::move(path)) {
  bytes_total_ = open_input_file(path_, file_);
}

void TextFileReader::read(std::size_t capacity, std::vector<uint32_t>& out) {
  const auto count = static_cast<std::size_t>(std::min<int64_t>(static_cast<int64_t>(capacity), bytes_total_ - position_));
  out.resize(count);
  if (count == 0) return;
  bytes_.resize(count);
  if (!file_.read(bytes_.data(), static_cast<std::streamsize>(count))) {
    throw UserError("input '" + path_ + "': read error after " + std::to_string(position_) +
                    " bytes (the file changed while being read?)");
  }
  for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<unsigned char>(bytes_[i]);
  nul_bytes_ += std::count(bytes_.begin(), bytes_.end(), '\0');
  position_ += static_cast<int64_t>(count);
}

std::string TextFileReader::doubt() const {
  if (bytes_total_ == 0) return "input '" + path_ + "' is empty: only its end-of-text is written";
  if (nul_bytes_ > 0) {
    return "input '" + path_ + "' holds " + std::to_string(nul_bytes_) + " NUL byte(s) of " +
           std::to_string(bytes_total_) + ": is it text? (its bytes are written as tokens all the same)";
  }
  return {};
}

}  // namespace trident::io
