#include "io/token_import.h"

#include <cerrno>
#include <cstring>  // std::strerror
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "io/user_error.h"

namespace trident::io {
namespace {

constexpr int32_t kLlmcGpt2Magic = 20240520;   // uint16 tokens
constexpr int32_t kLlmcUint32Magic = 20240801;  // uint32 tokens (llm.c's Llama 3 shards)
constexpr std::size_t kLlmcHeaderInts = 256;

// Little-endian unsigned of `width` bytes at p (the files are written on little-endian hosts).
uint32_t load_little_endian(const unsigned char* p, std::size_t width) {
  uint32_t v = 0;
  for (std::size_t i = width; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

int32_t header_int(const std::string& bytes, std::size_t index) {
  return static_cast<int32_t>(load_little_endian(reinterpret_cast<const unsigned char*>(bytes.data()) + 4 * index, 4));
}

}  // namespace

int64_t append_token_array(const std::string& path, RawTokenWidth raw_width, int64_t vocab,
                           std::vector<uint32_t>& tokens, std::string& format) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw UserError("input '" + path + "': cannot read (Is a directory)");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw UserError("input '" + path + "': cannot open (" + std::strerror(errno) + ")");
  const std::string bytes{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  if (file.bad()) throw UserError("input '" + path + "': read error");

  std::size_t begin = 0, width = raw_width == RawTokenWidth::kUint16 ? 2 : 4;
  const int32_t magic = bytes.size() >= 4 * kLlmcHeaderInts ? header_int(bytes, 0) : 0;
  if (magic == kLlmcGpt2Magic || magic == kLlmcUint32Magic) {
    width = magic == kLlmcGpt2Magic ? 2 : 4;
    if (const int32_t version = header_int(bytes, 1); version != 1) {
      throw UserError("input '" + path + "': llm.c shard of version " + std::to_string(version) +
                      ", this Trident reads version 1");
    }
    const int64_t count = header_int(bytes, 2);
    begin = 4 * kLlmcHeaderInts;
    if (count < 0 || static_cast<std::size_t>(count) * width != bytes.size() - begin) {
      throw UserError("input '" + path + "': llm.c shard header says " + std::to_string(count) + " tokens but the file holds " +
                      std::to_string(bytes.size() - begin) + " bytes after it (" + std::to_string(width) +
                      " a token): truncated or not a shard");
    }
    format = std::string("llm.c shard, uint") + (width == 2 ? "16" : "32");
  } else {
    if (bytes.size() % width != 0) {
      throw UserError("input '" + path + "': " + std::to_string(bytes.size()) + " bytes is not a whole number of uint" +
                      (width == 2 ? "16" : "32") + " tokens (raw tokens without llm.c's header; see --raw)");
    }
    format = std::string("raw uint") + (width == 2 ? "16" : "32");
  }
  const std::size_t n = (bytes.size() - begin) / width;
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data()) + begin;
  tokens.reserve(tokens.size() + n);
  for (std::size_t i = 0; i < n; ++i) {
    const uint32_t token = load_little_endian(data + i * width, width);
    if (static_cast<int64_t>(token) >= vocab) {
      throw UserError("input '" + path + "': token " + std::to_string(i) + " is " + std::to_string(token) +
                      ", not below --vocab " + std::to_string(vocab) + " (" + format + ")");
    }
    tokens.push_back(token);
  }
  return static_cast<int64_t>(n);
}

}  // namespace trident::io
