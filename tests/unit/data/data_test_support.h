// Helpers shared by the data tests: a fresh scratch directory per test, and a small token
// file whose token at position i is i % vocab, so a sample names itself by its first token.
#pragma once

#include <unistd.h>  // getpid

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>

#include "io/token_dataset.h"

namespace trident::io::testing {

// A directory under the system temp folder, removed with everything in it at scope exit.
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("trident-data-test-" + std::to_string(::getpid()) + "-" +
             std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// n tokens, token i = i % vocab, documents of doc_length tokens (the last may be shorter).
inline TokenFileContents counting_contents(int64_t n, int64_t vocab, int64_t train_tokens,
                                           int64_t doc_length) {
  TokenFileContents contents;
  for (int64_t i = 0; i < n; ++i) contents.tokens.push_back(static_cast<uint32_t>(i % vocab));
  for (int64_t start = 0; start < n; start += doc_length) {
    contents.doc_offsets.push_back(static_cast<uint64_t>(start));
  }
  contents.doc_offsets.push_back(static_cast<uint64_t>(n));
  contents.vocab_size = vocab;
  contents.eot_id = vocab - 1;
  contents.tokenizer = "counting";
  contents.description = "token i is i % vocab";
  contents.train_tokens = train_tokens;
  return contents;
}

}  // namespace trident::io::testing
