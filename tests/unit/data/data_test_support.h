// Helpers shared by the data tests: a fresh scratch directory per test, and a small token
// file whose token at position i is i % vocab, so a sample names itself by its first token.
#pragma once

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>  // getpid

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "io/token_dataset.h"
#include "io/token_file_writer.h"

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

// The HDF5 type of /tokens as written: its size in bytes and whether it is chunked.
struct StoredLayout {
  size_t element_bytes = 0;
  bool chunked = false;
  hsize_t chunk = 0;
};

inline StoredLayout stored_layout(const std::string& path) {
  StoredLayout layout;
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(file, 0);
  const hid_t dataset = H5Dopen2(file, "tokens", H5P_DEFAULT);
  const hid_t type = H5Dget_type(dataset);
  layout.element_bytes = H5Tget_size(type);
  const hid_t create = H5Dget_create_plist(dataset);
  layout.chunked = H5Pget_layout(create) == H5D_CHUNKED;
  if (layout.chunked) H5Pget_chunk(create, 1, &layout.chunk);
  H5Pclose(create);
  H5Tclose(type);
  H5Dclose(dataset);
  H5Fclose(file);
  return layout;
}

// Every token of the file, read back through TokenDataset: each split as one sample.
inline std::vector<uint32_t> all_tokens(const std::string& path) {
  const TokenDataset dataset(path, MPI_COMM_SELF);
  const TokenFileInfo& info = dataset.info();
  std::vector<uint32_t> tokens;
  for (const auto& [split, n] : {std::pair{Split::kTrain, info.train_tokens},
                                 std::pair{Split::kValidation, info.total_tokens - info.train_tokens}}) {
    if (n < 2) continue;  // a split of one token holds no sample
    std::vector<int32_t> sample(static_cast<std::size_t>(n));
    dataset.read_sample(split, 0, static_cast<int>(n - 1), sample.data());
    tokens.insert(tokens.end(), sample.begin(), sample.end());
  }
  return tokens;
}

// Replaces the root string attribute `name` of the HDF5 file at `path` by `value`, stored as
// h5py would (variable-length) or fixed-length, in UTF-8 or ASCII.
inline void rewrite_string_attribute(const std::string& path, const char* name, const std::string& value,
                                     bool variable, bool utf8) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  if (H5Aexists(file, name) > 0) H5Adelete(file, name);
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, variable ? H5T_VARIABLE : value.size());
  H5Tset_cset(type, utf8 ? H5T_CSET_UTF8 : H5T_CSET_ASCII);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t attribute = H5Acreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(attribute, 0);
  const char* text = value.c_str();
  EXPECT_GE(variable ? H5Awrite(attribute, type, &text) : H5Awrite(attribute, type, text), 0);
  H5Aclose(attribute);
  H5Sclose(space);
  H5Tclose(type);
  H5Fclose(file);
}

// Overwrites the existing root integer attribute `name` of the HDF5 file at `path` with `value`.
inline void set_int_attribute(const std::string& path, const char* name, int64_t value) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const hid_t attribute = H5Aopen(file, name, H5P_DEFAULT);
  ASSERT_GE(attribute, 0);
  EXPECT_GE(H5Awrite(attribute, H5T_NATIVE_INT64, &value), 0);
  H5Aclose(attribute);
  H5Fclose(file);
}

// Little-endian bytes of `values`, each `width` bytes wide, after an optional llm.c header (256
// int32, the given ones first, zeros after).
inline std::string token_bytes(const std::vector<uint32_t>& values, int width,
                               const std::vector<int32_t>& header = {}) {
  std::string bytes;
  auto put = [&bytes](uint32_t v, int w) {
    for (int i = 0; i < w; ++i) bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
  };
  if (!header.empty()) {
    for (std::size_t i = 0; i < 256; ++i) put(i < header.size() ? static_cast<uint32_t>(header[i]) : 0u, 4);
  }
  for (uint32_t v : values) put(v, width);
  return bytes;
}

}  // namespace trident::io::testing
