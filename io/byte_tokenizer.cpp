// Byte-level tokenizer: bytes are tokens 0..255, end-of-text is 256.
#include "io/byte_tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>  // std::strerror
#include <filesystem>  // is_directory
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <system_error>

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

EncodedDocuments encode_documents(const std::vector<std::string>& files) {
  EncodedDocuments documents;
  documents.doc_offsets.push_back(0);
  for (const std::string& file : files) {
    std::error_code error;
    if (std::filesystem::is_directory(file, error)) {
      throw UserError("input '" + file + "': cannot read (Is a directory)");
    }
    std::ifstream stream(file, std::ios::binary);
    if (!stream) {
      throw UserError("input '" + file + "': cannot open (" + std::strerror(errno) + ")");
    }
    const std::string text{std::istreambuf_iterator<char>(stream),
                           std::istreambuf_iterator<char>()};
    if (stream.bad()) throw UserError("input '" + file + "': read error");
    const auto nul_bytes = std::count(text.begin(), text.end(), '\0');
    if (text.empty()) {
      documents.doubts.push_back("input '" + file + "' is empty: only its end-of-text is written");
    } else if (nul_bytes > 0) {
      documents.doubts.push_back("input '" + file + "' holds " + std::to_string(nul_bytes) + " NUL byte(s) of " +
                                 std::to_string(text.size()) +
                                 ": is it text? (its bytes are written as tokens all the same)");
    }
    for (char c : text) documents.tokens.push_back(static_cast<unsigned char>(c));
    documents.tokens.push_back(kByteEotId);
    documents.doc_offsets.push_back(documents.tokens.size());
  }
  return documents;
}

}  // namespace trident::io
