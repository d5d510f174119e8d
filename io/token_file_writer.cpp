// The token-file writer: /tokens grows by one hyperslab per append (a chunked dataset of
// unlimited length), /doc_offsets and the attributes are written at finish().
#include "io/token_file_writer.h"

#include <hdf5.h>

#include <algorithm>
#include <cerrno>
#include <cstring>  // std::strerror
#include <filesystem>  // create_directories, rename, remove
#include <limits>
#include <system_error>
#include <utility>

#include "io/disk_space.h"         // check_free_space
#include "io/token_file_common.h"  // kFormatName, file_label, check_status, make_handle (and hdf5_error_detail)
#include "io/user_error.h"

namespace trident::io {
namespace {

using token_file_detail::check_status;
using token_file_detail::file_label;
using token_file_detail::make_handle;

std::string cannot_write(const std::string& path) { return file_label(path) + ": cannot write: "; }

void write_string_attribute(hid_t file, const char* name, const std::string& value,
                            const std::string& path) {
  // Fixed-length, null-terminated ASCII: h5dump and h5py both show it as a plain string.
  Handle type = make_handle(H5Tcopy(H5T_C_S1), H5Tclose, "H5Tcopy", path);
  check_status(H5Tset_size(type.get(), value.size() + 1), "H5Tset_size", path);
  check_status(H5Tset_strpad(type.get(), H5T_STR_NULLTERM), "H5Tset_strpad", path);
  Handle space = make_handle(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate", path);
  Handle attribute = make_handle(
      H5Acreate2(file, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
      "H5Acreate2", path);
  check_status(H5Awrite(attribute.get(), type.get(), value.c_str()), "H5Awrite", path);
}

void write_scalar_attribute(hid_t file, const char* name, hid_t file_type, hid_t memory_type,
                            const void* value, const std::string& path) {
  Handle space = make_handle(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate", path);
  Handle attribute =
      make_handle(H5Acreate2(file, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                  H5Aclose, "H5Acreate2", path);
  check_status(H5Awrite(attribute.get(), memory_type, value), "H5Awrite", path);
}

void write_int_attribute(hid_t file, const char* name, int64_t value, const std::string& path) {
  write_scalar_attribute(file, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value, path);
}

bool narrow_tokens(int64_t vocab_size) { return vocab_size <= token_file_detail::kMaxUint16Vocab; }

}  // namespace

TokenFileWriter::TokenFileWriter(std::string path, int64_t vocab_size, int64_t expected_tokens)
    : path_(std::move(path)), temporary_(path_ + ".tmp"), vocab_size_(vocab_size) {
  if (vocab_size <= 0 || vocab_size > int64_t{std::numeric_limits<uint32_t>::max()} + 1) {
    throw UserError(cannot_write(path_) + "vocab_size " + std::to_string(vocab_size) + " is out of range");
  }
  const std::filesystem::path target(path_);
  std::error_code error;
  if (target.has_parent_path()) {
    std::filesystem::create_directories(target.parent_path(), error);
    if (error) {
      throw UserError(file_label(path_) + ": cannot create directory '" + target.parent_path().string() + "' (" +
                      error.message() + ")");
    }
  }
  // Before HDF5 holds the file: chunks it cannot write on a full disk came back as zeros with
  // exit 0 (io/disk_space.h). The tokens, the document offsets (a few) and room for HDF5's metadata.
  if (expected_tokens > 0) {
    const int64_t token_bytes = narrow_tokens(vocab_size) ? 2 : 4;
    check_free_space(temporary_, file_label(path_), expected_tokens * token_bytes + (int64_t{64} << 10));
  }
  const QuietHdf5Errors quiet;
  errno = 0;
  const hid_t file_id = H5Fcreate(temporary_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file_id < 0) {
    // The reason is the system's, from the open() inside HDF5 (HDF5's own text spells it less plainly).
    const int reason = errno;
    throw UserError(file_label(path_) + ": cannot create '" + temporary_ + "'" +
                    (reason != 0 ? std::string(" (") + std::strerror(reason) + ")" : std::string()));
  }
  file_ = Handle(file_id, H5Fclose);
  try {
    const hsize_t empty = 0, unlimited = H5S_UNLIMITED;
    const hsize_t chunk = expected_tokens > 0 ? std::min(static_cast<hsize_t>(expected_tokens), token_file_detail::kChunkTokens)
                                              : token_file_detail::kChunkTokens;
    Handle space = make_handle(H5Screate_simple(1, &empty, &unlimited), H5Sclose, "H5Screate_simple", path_);
    Handle create = make_handle(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "H5Pcreate", path_);
    check_status(H5Pset_chunk(create.get(), 1, &chunk), "H5Pset_chunk", path_);
    const hid_t file_type = narrow_tokens(vocab_size) ? H5T_STD_U16LE : H5T_STD_U32LE;
    tokens_ = make_handle(H5Dcreate2(file_.get(), "tokens", file_type, space.get(), H5P_DEFAULT, create.get(),
                                     H5P_DEFAULT),
                          H5Dclose, "H5Dcreate2", path_);
  } catch (...) {
    file_.reset();
    std::filesystem::remove(temporary_, error);
    throw;
  }
}

TokenFileWriter::~TokenFileWriter() {
  if (file_.get() < 0) return;  // finished
  const QuietHdf5Errors quiet;
  tokens_.reset();
  file_.reset();
  std::error_code ignored;
  std::filesystem::remove(temporary_, ignored);
}

void TokenFileWriter::append(const uint32_t* tokens, std::size_t count) {
  if (count == 0) return;
  for (std::size_t i = 0; i < count; ++i) {
    if (tokens[i] >= vocab_size_) {
      throw UserError(cannot_write(path_) + "token " + std::to_string(tokens[i]) + " at position " +
                      std::to_string(written_ + static_cast<int64_t>(i)) + " is not below vocab_size " +
                      std::to_string(vocab_size_));
    }
  }
  const void* data = tokens;
  hid_t memory_type = H5T_NATIVE_UINT32;
  if (narrow_tokens(vocab_size_)) {
    narrow_.assign(tokens, tokens + count);
    data = narrow_.data();
    memory_type = H5T_NATIVE_UINT16;
  }
  const QuietHdf5Errors quiet;
  const auto start = static_cast<hsize_t>(written_), length = static_cast<hsize_t>(count);
  const hsize_t size = start + length;
  check_status(H5Dset_extent(tokens_.get(), &size), "H5Dset_extent", path_);
  Handle file_space = make_handle(H5Dget_space(tokens_.get()), H5Sclose, "H5Dget_space", path_);
  check_status(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &length, nullptr),
               "H5Sselect_hyperslab", path_);
  Handle memory_space = make_handle(H5Screate_simple(1, &length, nullptr), H5Sclose, "H5Screate_simple", path_);
  check_status(H5Dwrite(tokens_.get(), memory_type, memory_space.get(), file_space.get(), H5P_DEFAULT, data),
               "H5Dwrite", path_);
  written_ = static_cast<int64_t>(size);
}

void TokenFileWriter::end_document() { doc_offsets_.push_back(static_cast<uint64_t>(written_)); }

void TokenFileWriter::finish(const TokenFileAttributes& attributes) {
  const std::string where = cannot_write(path_);
  if (written_ == 0) throw UserError(where + "no tokens");
  if (attributes.eot_id < 0 || attributes.eot_id >= vocab_size_) {
    throw UserError(where + "eot_id " + std::to_string(attributes.eot_id) + " is not below vocab_size " +
                    std::to_string(vocab_size_));
  }
  if (attributes.train_tokens <= 0 || attributes.train_tokens > written_) {
    throw UserError(where + "train_tokens " + std::to_string(attributes.train_tokens) + " is not in (0, " +
                    std::to_string(written_) + "]");
  }
  if (doc_offsets_.back() != static_cast<uint64_t>(written_)) end_document();

  const QuietHdf5Errors quiet;
  const hid_t file = file_.get();
  const auto offsets = static_cast<hsize_t>(doc_offsets_.size());
  Handle space = make_handle(H5Screate_simple(1, &offsets, nullptr), H5Sclose, "H5Screate_simple", path_);
  Handle dataset = make_handle(
      H5Dcreate2(file, "doc_offsets", H5T_STD_U64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose,
      "H5Dcreate2", path_);
  check_status(H5Dwrite(dataset.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, doc_offsets_.data()),
               "H5Dwrite", path_);
  dataset.reset();
  write_string_attribute(file, "format", token_file_detail::kFormatName, path_);
  write_int_attribute(file, "format_version", token_file_detail::kFormatVersion, path_);
  write_int_attribute(file, "vocab_size", vocab_size_, path_);
  write_int_attribute(file, "eot_id", attributes.eot_id, path_);
  write_string_attribute(file, "tokenizer", attributes.tokenizer, path_);
  write_int_attribute(file, "train_tokens", attributes.train_tokens, path_);
  write_string_attribute(file, "description", attributes.description, path_);
  if (!std::isnan(attributes.entropy_rate_nats)) {
    write_scalar_attribute(file, "entropy_rate_nats", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE,
                           &attributes.entropy_rate_nats, path_);
  }
  tokens_.reset();
  std::error_code error;
  // The flush writes what HDF5 still caches (the last chunks, the metadata): a full disk shows
  // here. H5Fclose alone may succeed and leave the failing writes to the library's exit.
  if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) {
    const std::string detail = hdf5_error_detail();
    file_.reset();
    std::filesystem::remove(temporary_, error);
    throw UserError(file_label(path_) + ": cannot finish writing '" + temporary_ + "' (" +
                    (detail.empty() ? std::string("disk full?") : detail) + ")");
  }
  if (H5Fclose(file_.release()) < 0) {
    std::filesystem::remove(temporary_, error);
    check_status(-1, "H5Fclose", path_);
  }
  std::filesystem::rename(temporary_, path_, error);
  if (error) {
    std::error_code ignored;
    std::filesystem::remove(temporary_, ignored);
    throw UserError(file_label(path_) + ": cannot rename '" + temporary_ + "' to it (" + error.message() + ")");
  }
}

void write_token_file(const std::string& path, const TokenFileContents& contents) {
  const std::vector<uint64_t>& offsets = contents.doc_offsets;
  const uint64_t n = contents.tokens.size();
  if (offsets.size() < 2 || offsets.front() != 0 || offsets.back() != n ||
      !std::is_sorted(offsets.begin(), offsets.end())) {
    throw UserError(cannot_write(path) + "doc_offsets must rise from 0 to the token count " + std::to_string(n));
  }
  TokenFileWriter writer(path, contents.vocab_size, static_cast<int64_t>(n));
  for (std::size_t d = 0; d + 1 < offsets.size(); ++d) {
    writer.append(contents.tokens.data() + offsets[d], offsets[d + 1] - offsets[d]);
    writer.end_document();
  }
  writer.finish({.eot_id = contents.eot_id,
                 .tokenizer = contents.tokenizer,
                 .description = contents.description,
                 .train_tokens = contents.train_tokens,
                 .entropy_rate_nats = contents.entropy_rate_nats});
}

}  // namespace trident::io
