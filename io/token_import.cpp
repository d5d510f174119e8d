#include "io/token_import.h"

#include <algorithm>  // std::min, std::equal
#include <array>
#include <cerrno>
#include <cstring>  // std::strerror
#include <utility>

#include "io/input_file.h"  // open_input_file
#include "io/user_error.h"

namespace trident::io {
namespace {

constexpr int32_t kLlmcGpt2Magic = 20240520;   // uint16 tokens
constexpr int32_t kLlmcUint32Magic = 20240801;  // uint32 tokens (llm.c's Llama 3 shards)
constexpr std::size_t kLlmcHeaderInts = 256;
constexpr std::size_t kLlmcHeaderBytes = 4 * kLlmcHeaderInts;

// Little-endian unsigned of `width` bytes at p (the files are written on little-endian hosts).
uint32_t load_little_endian(const unsigned char* p, std::size_t width) {
  uint32_t v = 0;
  for (std::size_t i = width; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

int32_t header_int(const std::array<unsigned char, kLlmcHeaderBytes>& header, std::size_t index) {
  return static_cast<int32_t>(load_little_endian(header.data() + 4 * index, 4));
}

}  // namespace

TokenArrayReader::TokenArrayReader(std::string path, RawTokenWidth raw_width, int64_t vocab)
    : path_(std::move(path)), vocab_(vocab) {
  const std::string where = "input '" + path_ + "': ";
  const auto size = static_cast<std::size_t>(open_input_file(path_, file_));

  std::array<unsigned char, kLlmcHeaderBytes> header{};
  const std::size_t head = std::min(size, kLlmcHeaderBytes);
  if (!file_.read(reinterpret_cast<char*>(header.data()), static_cast<std::streamsize>(head))) {
    throw UserError(where + "cannot read its first bytes (" + std::strerror(errno) + ")");
  }
  // Read as raw tokens, these would only fail as tokens out of the vocabulary: say what they are.
  static constexpr unsigned char kHdf5Signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  if (head >= 8 && std::equal(kHdf5Signature, kHdf5Signature + 8, header.begin())) {
    throw UserError(where + "an HDF5 file (a Trident token file is already prepared: give it as data.path), "
                    "not an array of tokens");
  }
  const int32_t magic = head >= 4 ? header_int(header, 0) : 0;
  if (size < kLlmcHeaderBytes && (magic == kLlmcGpt2Magic || magic == kLlmcUint32Magic)) {
    throw UserError(where + "starts with llm.c's shard magic " + std::to_string(magic) + " but holds " +
                    std::to_string(size) + " bytes, fewer than the shard header's " +
                    std::to_string(kLlmcHeaderBytes) + ": truncated");
  }
  std::size_t body = size;
  if (magic == kLlmcGpt2Magic || magic == kLlmcUint32Magic) {
    width_ = magic == kLlmcGpt2Magic ? 2 : 4;
    if (const int32_t version = header_int(header, 1); version != 1) {
      throw UserError(where + "llm.c shard of version " + std::to_string(version) + ", this Trident reads version 1");
    }
    const int64_t count = header_int(header, 2);
    body = size - kLlmcHeaderBytes;
    if (count < 0 || static_cast<std::size_t>(count) * width_ != body) {
      throw UserError(where + "llm.c shard header says " + std::to_string(count) + " tokens but the file holds " +
                      std::to_string(body) + " bytes after it (" + std::to_string(width_) +
                      " a token): truncated or not a shard");
    }
    format_ = std::string("llm.c shard, uint") + (width_ == 2 ? "16" : "32");
  } else {
    width_ = raw_width == RawTokenWidth::kUint16 ? 2 : 4;
    if (size % width_ != 0) {
      throw UserError(where + std::to_string(size) + " bytes is not a whole number of uint" +
                      (width_ == 2 ? "16" : "32") + " tokens (raw tokens without llm.c's header; see --raw)");
    }
    format_ = std::string("raw uint") + (width_ == 2 ? "16" : "32");
    file_.clear();
    file_.seekg(0);  // the bytes read as a possible header are tokens
  }
  tokens_ = static_cast<int64_t>(body / width_);
}

void TokenArrayReader::read(std::size_t capacity, std::vector<uint32_t>& out) {
  const auto count = static_cast<std::size_t>(std::min<int64_t>(static_cast<int64_t>(capacity), tokens_ - position_));
  out.resize(count);
  if (count == 0) return;
  bytes_.resize(count * width_);
  if (!file_.read(reinterpret_cast<char*>(bytes_.data()), static_cast<std::streamsize>(bytes_.size()))) {
    throw UserError("input '" + path_ + "': read error after " + std::to_string(position_) +
                    " tokens (the file changed while being read?)");
  }
  for (std::size_t i = 0; i < count; ++i) {
    out[i] = load_little_endian(bytes_.data() + i * width_, width_);
    if (static_cast<int64_t>(out[i]) >= vocab_) {
      throw UserError("input '" + path_ + "': token " + std::to_string(position_ + static_cast<int64_t>(i)) +
                      " is " + std::to_string(out[i]) + ", not below --vocab " + std::to_string(vocab_) + " (" +
                      format_ + ")");
    }
  }
  position_ += static_cast<int64_t>(count);
}

}  // namespace trident::io
