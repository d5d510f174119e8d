// Token files: the collective parallel-HDF5 reader with its validation, the sample order and the
// batch loader (format: docs/data-format.md; the writer is token_file_writer.cpp).
//
// Every HDF5 call's result is checked. A failure while opening or validating a file is the
// user's to fix (wrong path, wrong file), so it becomes one UserError line naming the file;
// HDF5's own error stack printing is switched off meanwhile so that line is all they see.
#include "io/token_dataset.h"

#include <sys/stat.h>  // stat: check_unchanged
#include <hdf5.h>  // H5F*, H5D*, H5A*, H5S*, H5T*, H5P* (parallel build: H5Pset_fapl_mpio)

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>     // std::strerror
#include <filesystem>  // is_directory
#include <limits>
#include <random>  // std::mt19937_64, std::seed_seq (both fully specified by the standard)
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "io/collective_error.h"  // agree_or_throw
#include "io/file_kind.h"    // special_file_kind
#include "io/hdf5_error.h"   // hdf5_error_detail
#include "io/hdf5_handle.h"  // Handle, QuietHdf5Errors
#include "io/hdf5_string.h"  // read_hdf5_string
#include "io/token_file_common.h"  // format name and limits, HDF5 result checks
#include "io/user_error.h"  // UserError
#include "mpi_support/mpi_check.h"

namespace trident::io {
namespace {

using token_file_detail::check_status;
using token_file_detail::file_label;
using token_file_detail::kFormatName;
using token_file_detail::kFormatVersion;
using token_file_detail::kMaxUint16Vocab;
using token_file_detail::make_handle;

// ---------------------------------------------------------------------------------------------
// Reading and validating

class FormatError : public UserError {
 public:
  FormatError(const std::string& path, const std::string& problem)
      : UserError(file_label(path) + ": not a Trident token file (" + problem + ")") {}
};

// The line for a file HDF5 cannot open, with HDF5's reason (a truncated file, say).
std::string open_failure(const std::string& path) {
  const std::string reason = hdf5_error_detail();
  return file_label(path) + ": cannot open (" + (reason.empty() ? "HDF5 cannot read it" : reason) + ")";
}

// Checks that the file can be opened for reading and is HDF5; throws UserError otherwise.
void check_openable(const std::string& path) {
  // Before the open, which would wait for a FIFO's writer for good.
  if (const std::string kind = special_file_kind(path); !kind.empty() && kind != "a directory") {
    throw UserError(file_label(path) + " is " + kind + ", not a regular file: give an HDF5 token file");
  }
  std::FILE* stream = std::fopen(path.c_str(), "rb");
  if (stream == nullptr) {
    throw UserError(file_label(path) + ": cannot open (" + std::strerror(errno) + ")");
  }
  std::fclose(stream);
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    throw UserError(file_label(path) + ": cannot open (Is a directory)");
  }
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 < 0) throw UserError(open_failure(path));
  if (is_hdf5 == 0) throw UserError(file_label(path) + ": not an HDF5 file");
}

Handle open_attribute(hid_t file, const char* name, const std::string& path) {
  const htri_t exists = H5Aexists(file, name);
  check_status(exists, "H5Aexists", path);
  if (exists == 0) throw FormatError(path, std::string("missing attribute '") + name + "'");
  return make_handle(H5Aopen(file, name, H5P_DEFAULT), H5Aclose, "H5Aopen", path);
}

bool has_attribute(hid_t file, const char* name, const std::string& path) {
  const htri_t exists = H5Aexists(file, name);
  check_status(exists, "H5Aexists", path);
  return exists > 0;
}

// The attribute's type class, after checking it is a scalar (or one-element) attribute.
H5T_class_t scalar_attribute_class(hid_t attribute, const char* name, const std::string& path) {
  Handle space = make_handle(H5Aget_space(attribute), H5Sclose, "H5Aget_space", path);
  const hssize_t points = H5Sget_simple_extent_npoints(space.get());
  if (points < 0) check_status(-1, "H5Sget_simple_extent_npoints", path);
  if (points != 1) throw FormatError(path, std::string("attribute '") + name + "' is not scalar");
  Handle type = make_handle(H5Aget_type(attribute), H5Tclose, "H5Aget_type", path);
  const H5T_class_t type_class = H5Tget_class(type.get());
  if (type_class == H5T_NO_CLASS) check_status(-1, "H5Tget_class", path);
  return type_class;
}

// Reads a string attribute, fixed- or variable-length, ASCII or UTF-8 (io/hdf5_string.h).
std::string read_string_attribute(hid_t file, const char* name, const std::string& path) {
  Handle attribute = open_attribute(file, name, path);
  if (scalar_attribute_class(attribute.get(), name, path) != H5T_STRING) {
    throw FormatError(path, std::string("attribute '") + name + "' is not a string");
  }
  Handle type = make_handle(H5Aget_type(attribute.get()), H5Tclose, "H5Aget_type", path);
  if (const auto value = read_hdf5_string(attribute.get(), type.get())) return *value;
  const std::string reason = hdf5_error_detail();
  throw UserError(file_label(path) + ": attribute '" + name + "' cannot be read" +
                  (reason.empty() ? "" : " (" + reason + ")"));
}

int64_t read_int_attribute(hid_t file, const char* name, const std::string& path) {
  Handle attribute = open_attribute(file, name, path);
  if (scalar_attribute_class(attribute.get(), name, path) != H5T_INTEGER) {
    throw FormatError(path, std::string("attribute '") + name + "' is not an integer");
  }
  int64_t value = 0;
  check_status(H5Aread(attribute.get(), H5T_NATIVE_INT64, &value), "H5Aread", path);
  return value;
}

double read_double_attribute(hid_t file, const char* name, const std::string& path) {
  Handle attribute = open_attribute(file, name, path);
  const H5T_class_t type_class = scalar_attribute_class(attribute.get(), name, path);
  if (type_class != H5T_FLOAT && type_class != H5T_INTEGER) {
    throw FormatError(path, std::string("attribute '") + name + "' is not a number");
  }
  double value = 0.0;
  check_status(H5Aread(attribute.get(), H5T_NATIVE_DOUBLE, &value), "H5Aread", path);
  return value;
}

// Opens a 1-D unsigned-integer dataset; returns it with its length and element size.
Handle open_vector(hid_t file, const char* name, hsize_t& length, size_t& element_size,
                   const std::string& path) {
  const htri_t exists = H5Lexists(file, name, H5P_DEFAULT);
  check_status(exists, "H5Lexists", path);
  if (exists == 0) throw FormatError(path, std::string("missing dataset '/") + name + "'");
  Handle dataset = make_handle(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose, "H5Dopen2", path);
  Handle space = make_handle(H5Dget_space(dataset.get()), H5Sclose, "H5Dget_space", path);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  check_status(rank, "H5Sget_simple_extent_ndims", path);
  if (rank != 1) throw FormatError(path, std::string("dataset '/") + name + "' is not 1-D");
  check_status(H5Sget_simple_extent_dims(space.get(), &length, nullptr),
               "H5Sget_simple_extent_dims", path);
  Handle type = make_handle(H5Dget_type(dataset.get()), H5Tclose, "H5Dget_type", path);
  element_size = H5Tget_size(type.get());
  if (H5Tget_class(type.get()) != H5T_INTEGER || H5Tget_sign(type.get()) != H5T_SGN_NONE) {
    throw FormatError(path, std::string("dataset '/") + name + "' is not of an unsigned type");
  }
  return dataset;
}

// Reads and validates everything but the tokens themselves; returns /tokens still open.
Handle read_info(hid_t file, const std::string& path, TokenFileInfo& info) {
  info = TokenFileInfo{};
  info.path = path;
  const std::string format = read_string_attribute(file, "format", path);
  if (format != kFormatName) {
    throw FormatError(path, "attribute 'format' is '" + format + "', expected '" +
                                kFormatName + "'");
  }
  const int64_t version = read_int_attribute(file, "format_version", path);
  if (version != kFormatVersion) {
    throw UserError(file_label(path) + ": unsupported format_version " +
                    std::to_string(version) + " (this Trident reads version " +
                    std::to_string(kFormatVersion) + ")");
  }
  info.vocab_size = read_int_attribute(file, "vocab_size", path);
  info.eot_id = read_int_attribute(file, "eot_id", path);
  info.tokenizer = read_string_attribute(file, "tokenizer", path);
  info.train_tokens = read_int_attribute(file, "train_tokens", path);
  if (has_attribute(file, "description", path)) {
    info.description = read_string_attribute(file, "description", path);
  }
  if (has_attribute(file, "entropy_rate_nats", path)) {
    info.entropy_rate_nats = read_double_attribute(file, "entropy_rate_nats", path);
  }
  const std::string bad = file_label(path) + ": inconsistent token file: ";
  if (info.vocab_size <= 0 || info.vocab_size > int64_t{std::numeric_limits<uint32_t>::max()} + 1) {
    throw UserError(bad + "vocab_size " + std::to_string(info.vocab_size) + " is out of range");
  }
  if (info.eot_id < 0 || info.eot_id >= info.vocab_size) {
    throw UserError(bad + "eot_id " + std::to_string(info.eot_id) + " is not below vocab_size " +
                    std::to_string(info.vocab_size));
  }

  hsize_t total = 0;
  size_t token_bytes = 0;
  Handle tokens = open_vector(file, "tokens", total, token_bytes, path);
  if (token_bytes != 2 && token_bytes != 4) {
    throw FormatError(path, "dataset '/tokens' is neither uint16 nor uint32");
  }
  info.token_bits = static_cast<int>(token_bytes * 8);
  info.total_tokens = static_cast<int64_t>(total);
  if (token_bytes == 2 && info.vocab_size > kMaxUint16Vocab) {
    throw UserError(bad + "tokens are uint16 but vocab_size is " +
                    std::to_string(info.vocab_size));
  }
  if (info.train_tokens <= 0 || info.train_tokens > info.total_tokens) {
    throw UserError(bad + "train_tokens " + std::to_string(info.train_tokens) +
                    " is not in (0, " + std::to_string(info.total_tokens) + "]");
  }

  hsize_t offset_count = 0;
  size_t offset_bytes = 0;
  Handle offsets_dataset = open_vector(file, "doc_offsets", offset_count, offset_bytes, path);
  if (offset_count < 2) throw UserError(bad + "doc_offsets has fewer than 2 entries");
  std::vector<uint64_t> offsets(offset_count);
  check_status(H5Dread(offsets_dataset.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                       offsets.data()),
               "H5Dread", path);
  if (offsets.front() != 0 || offsets.back() != total ||
      !std::is_sorted(offsets.begin(), offsets.end())) {
    throw UserError(bad + "doc_offsets do not rise from 0 to the token count " +
                    std::to_string(total));
  }
  info.num_docs = static_cast<int64_t>(offset_count) - 1;
  return tokens;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

TokenFileInfo read_token_file_info(const std::string& path) {
  const QuietHdf5Errors quiet;
  check_openable(path);
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (file.get() < 0) throw UserError(open_failure(path));
  TokenFileInfo info;
  read_info(file.get(), path, info);
  return info;
}

TokenDataset::TokenDataset(const std::string& path, MPI_Comm comm) {
  const QuietHdf5Errors quiet;
  // Every rank checks, then all agree, so no rank enters the collective H5Fopen alone. Every
  // rank throws the first failing rank's reason, which rank 0 prints: a rank other than 0 that
  // fails alone (a node that does not see the file) is named, as rank 0 could open it.
  int rank = 0;
  TRIDENT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  const std::string where = rank == 0 ? std::string() : " (on rank " + std::to_string(rank) + ")";
  std::string local_error;
  try {
    check_openable(path);
  } catch (const UserError& e) {
    local_error = e.what() + where;
  }
  agree_or_throw(comm, local_error);

  Handle access = make_handle(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "H5Pcreate", path);
  check_status(H5Pset_fapl_mpio(access.get(), comm, MPI_INFO_NULL), "H5Pset_fapl_mpio", path);
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, access.get()), H5Fclose);
  if (file.get() < 0) local_error = open_failure(path) + where;
  agree_or_throw(comm, local_error);
  Handle tokens;
  try {
    tokens = read_info(file.get(), path, info_);
  } catch (const UserError& e) {
    local_error = e.what() + where;
  }
  agree_or_throw(comm, local_error);  // on failure, the handles close on every rank as the exception unwinds
  tokens_ = tokens.release();
  file_ = file.release();
  struct stat status {};
  if (::stat(path.c_str(), &status) == 0) {
    opened_ = {static_cast<uint64_t>(status.st_dev), static_cast<uint64_t>(status.st_ino),
               static_cast<int64_t>(status.st_size),
               static_cast<int64_t>(status.st_mtim.tv_sec) * 1000000000 + status.st_mtim.tv_nsec};
  }
}

void TokenDataset::check_unchanged() const {
  if (opened_.inode == 0) return;
  const std::string& path = info_.path;
  struct stat status {};
  const int64_t modified =
      ::stat(path.c_str(), &status) == 0
          ? static_cast<int64_t>(status.st_mtim.tv_sec) * 1000000000 + status.st_mtim.tv_nsec
          : -1;
  std::string change;
  if (modified < 0) {
    change = "it is gone (" + std::string(std::strerror(errno)) + ")";
  } else if (static_cast<uint64_t>(status.st_ino) != opened_.inode ||
             static_cast<uint64_t>(status.st_dev) != opened_.device) {
    change = "another file now has its name";
  } else if (static_cast<int64_t>(status.st_size) != opened_.size) {
    change = "its size was " + std::to_string(opened_.size) + " bytes at start-up and is " +
             std::to_string(static_cast<int64_t>(status.st_size)) + " now";
  } else if (modified != opened_.modified_ns) {
    change = "it was written to since start-up";
  } else {
    return;
  }
  throw UserError(file_label(path) + ": changed while training (" + change +
                  "): its tokens are no longer the ones the run began on. Restore it (a new dataset wants a new "
                  "name) and rerun to resume from the newest checkpoint");
}

TokenDataset::~TokenDataset() {
  if (tokens_ >= 0) H5Dclose(tokens_);
  if (file_ >= 0) H5Fclose(file_);
}

int64_t TokenDataset::num_samples(Split split, int seq_len) const {
  if (seq_len <= 0) throw std::invalid_argument("num_samples: seq_len must be positive");
  const int64_t tokens = split == Split::kTrain ? info_.train_tokens
                                                : info_.total_tokens - info_.train_tokens;
  return tokens < 1 ? 0 : (tokens - 1) / seq_len;
}

void TokenDataset::read_sample(Split split, int64_t index, int seq_len, int32_t* out) const {
  const int64_t count = num_samples(split, seq_len);
  if (index < 0 || index >= count) {
    throw std::out_of_range("read_sample: sample " + std::to_string(index) + " of a split of " +
                            std::to_string(count) + " samples");
  }
  const int64_t split_start = split == Split::kTrain ? 0 : info_.train_tokens;
  const auto start = static_cast<hsize_t>(split_start + index * seq_len);
  const auto length = static_cast<hsize_t>(seq_len) + 1;
  const std::string& path = info_.path;

  Handle file_space = make_handle(H5Dget_space(static_cast<hid_t>(tokens_)), H5Sclose,
                                  "H5Dget_space", path);
  check_status(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &length,
                                   nullptr),
               "H5Sselect_hyperslab", path);
  Handle memory_space = make_handle(H5Screate_simple(1, &length, nullptr), H5Sclose,
                                    "H5Screate_simple", path);
  Handle transfer = make_handle(H5Pcreate(H5P_DATASET_XFER), H5Pclose, "H5Pcreate", path);
  check_status(H5Pset_dxpl_mpio(transfer.get(), H5FD_MPIO_INDEPENDENT), "H5Pset_dxpl_mpio",
               path);
  check_status(H5Dread(static_cast<hid_t>(tokens_), H5T_NATIVE_INT32, memory_space.get(),
                       file_space.get(), transfer.get(), out),
               "H5Dread", path);
  for (hsize_t i = 0; i < length; ++i) {
    if (out[i] < 0 || out[i] >= info_.vocab_size) {
      throw UserError(file_label(path) + ": token at position " + std::to_string(start + i) +
                      " is not below vocab_size " + std::to_string(info_.vocab_size));
    }
  }
}

// ---------------------------------------------------------------------------------------------

SampleOrder::SampleOrder(int64_t num_samples, uint64_t seed)
    : num_samples_(num_samples), seed_(seed) {
  if (num_samples <= 0) throw std::invalid_argument("SampleOrder: no samples to order");
}

std::vector<int64_t> SampleOrder::permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  const auto epoch_bits = static_cast<uint64_t>(epoch);
  std::seed_seq seeds{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                      static_cast<uint32_t>(epoch_bits), static_cast<uint32_t>(epoch_bits >> 32)};
  std::mt19937_64 rng(seeds);
  // Fisher-Yates, back to front; j uniform in [0, i] by rejection (no modulo bias).
  for (size_t i = order.size(); i > 1; --i) {
    const uint64_t bound = i;  // choose among positions 0..i-1
    const uint64_t limit = std::numeric_limits<uint64_t>::max() -
                           std::numeric_limits<uint64_t>::max() % bound;
    uint64_t draw = rng();
    while (draw >= limit) draw = rng();
    std::swap(order[i - 1], order[draw % bound]);
  }
  return order;
}

int64_t SampleOrder::sample_at(int64_t position) {
  if (position < 0) throw std::out_of_range("SampleOrder: negative stream position");
  const int64_t epoch = position / num_samples_;
  if (epoch != cached_epoch_) {
    cached_ = permutation(num_samples_, seed_, epoch);
    cached_epoch_ = epoch;
  }
  return cached_[static_cast<size_t>(position % num_samples_)];
}

// ---------------------------------------------------------------------------------------------

namespace {

BatchGeometry checked_geometry(const BatchGeometry& geometry) {
  if (geometry.seq_len <= 0 || geometry.micro_batch <= 0 || geometry.dp_size <= 0 ||
      geometry.dp_rank < 0 || geometry.dp_rank >= geometry.dp_size ||
      geometry.global_batch <= 0 ||
      geometry.global_batch % (geometry.micro_batch * geometry.dp_size) != 0) {
    throw std::invalid_argument(
        "BatchLoader: global_batch must be a positive multiple of micro_batch * dp_size, and "
        "0 <= dp_rank < dp_size, seq_len > 0");
  }
  return geometry;
}

int64_t checked_train_samples(const TokenDataset& dataset, int seq_len) {
  const int64_t count = dataset.num_samples(Split::kTrain, seq_len);
  if (count <= 0) {
    throw UserError(file_label(dataset.info().path) + ": the training split of " +
                    std::to_string(dataset.info().train_tokens) +
                    " tokens holds no sample of seq_len + 1 = " + std::to_string(seq_len + 1) +
                    " tokens");
  }
  return count;
}

}  // namespace

BatchLoader::BatchLoader(const TokenDataset& dataset, BatchGeometry geometry, uint64_t seed)
    : dataset_(dataset),
      geometry_(checked_geometry(geometry)),
      order_(checked_train_samples(dataset, geometry.seq_len), seed),
      row_(static_cast<size_t>(geometry.seq_len) + 1) {}

void BatchLoader::load_train(int64_t step, int64_t micro, int32_t* tokens, int32_t* targets) {
  if (step < 0 || micro < 0 || micro >= geometry_.micro_batches_per_step()) {
    throw std::out_of_range("BatchLoader::load_train: step or micro-batch out of range");
  }
  if (micro == 0) dataset_.check_unchanged();
  const int64_t slice = geometry_.global_batch / geometry_.dp_size;
  const int64_t first = step * geometry_.global_batch + geometry_.dp_rank * slice +
                        micro * geometry_.micro_batch;
  for (int64_t row = 0; row < geometry_.micro_batch; ++row) {
    load(Split::kTrain, order_.sample_at(first + row), row, tokens, targets);
  }
}

void BatchLoader::load_validation(int64_t eval_batch, int64_t micro, int32_t* tokens,
                                  int32_t* targets) {
  if (eval_batch < 0 || micro < 0 || micro >= geometry_.micro_batches_per_step()) {
    throw std::out_of_range("BatchLoader::load_validation: batch or micro-batch out of range");
  }
  if (eval_batch == 0 && micro == 0) dataset_.check_unchanged();
  const int64_t count = dataset_.num_samples(Split::kValidation, geometry_.seq_len);
  if (count <= 0) {
    const TokenFileInfo& info = dataset_.info();
    throw UserError(file_label(info.path) + ": the validation split of " +
                    std::to_string(info.total_tokens - info.train_tokens) +
                    " tokens holds no sample of seq_len + 1 = " +
                    std::to_string(geometry_.seq_len + 1) + " tokens");
  }
  const int64_t slice = geometry_.global_batch / geometry_.dp_size;
  const int64_t first = eval_batch * geometry_.global_batch + geometry_.dp_rank * slice +
                        micro * geometry_.micro_batch;
  for (int64_t row = 0; row < geometry_.micro_batch; ++row) {
    load(Split::kValidation, (first + row) % count, row, tokens, targets);
  }
}

void BatchLoader::load(Split split, int64_t sample, int64_t row, int32_t* tokens,
                       int32_t* targets) {
  const int seq_len = geometry_.seq_len;
  dataset_.read_sample(split, sample, seq_len, row_.data());
  std::copy(row_.begin(), row_.end() - 1, tokens + row * seq_len);
  std::copy(row_.begin() + 1, row_.end(), targets + row * seq_len);
}

}  // namespace trident::io
