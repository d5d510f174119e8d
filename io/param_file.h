// Parameter files: every tensor of a model under its global name with its global shape, in one
// HDF5 file written collectively through parallel HDF5 (format: docs/param-file.md). Trainer
// checkpoints (docs/checkpoint-format.md) and final parameters are parameter files.
//
// File layout (format "trident-params", version 2):
//   /NAME           one float32 dataset per tensor, named by the tensor's global name as-is
//                   (dots allowed, e.g. "block0.attn.qkv.weight"; flat, no groups), with its
//                   GLOBAL shape, whatever layout wrote it; uint64 attribute "checksum"
//                   (io/tensor_checksum.h: verifiable by any number of readers)
//   root attributes: format, format_version, checksum_algorithm, and the caller's int64,
//                   float64 and string attributes
//
// Ownership: every element is written by exactly one rank. Each rank passes the slices IT
// holds and marks the ones it owns (`write`), optionally only a flat range of its slice (a
// ZeRO-1 shard, or its band of a replica: write_begin / write_count). The union over the ranks
// of (name, global shape) defines the datasets, in order of first appearance by ascending
// world rank. When several ranks mark the SAME part of one tensor as theirs (a tensor held by
// several pipeline stages, like the tied embedding), the lowest world rank among them writes;
// otherwise the owned parts must be disjoint and cover every element.
//
// Transfers: no rank moves more than WriteOptions::max_bytes_per_call in one H5Dwrite or
// H5Dread (MPI-IO counts are int: 2 GiB is the hard limit of many implementations).
//
// io knows no model: these are plain structs.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace trident::io {

inline constexpr int64_t kMaxBytesPerCall = int64_t{1} << 30;  // 1 GiB per rank per transfer

// One tensor as this rank holds it.
struct TensorSlice {
  std::string name;                   // global name; no '/'
  std::vector<int64_t> global_shape;  // shape of the whole tensor
  int split_axis = -1;                // -1: this rank holds the whole tensor
  int64_t slice_begin = 0;            // this rank's range along split_axis
  int64_t slice_extent = 0;
  // Host memory of the elements this rank writes: local elements [write_begin, write_begin +
  // write_count) of its slice (the local shape, row-major); may be null if !write.
  const float* data = nullptr;
  bool write = false;        // this rank owns (writes) the range below of its slice
  int64_t write_begin = 0;   // flat range of the local slice; write_count -1: to its end
  int64_t write_count = -1;
};

struct WriteOptions {
  std::vector<std::pair<std::string, double>> double_attributes;  // root attributes
  int64_t max_bytes_per_call = kMaxBytesPerCall;
};

// Collective over `comm` (every rank calls it, with its own list). Writes PATH.tmp through
// parallel HDF5 (collective dataset creation, collective transfers; ranks owning nothing of a
// tensor take part with an empty selection), flushes it to the disk (MPI_File_sync), closes
// it, then rank 0 renames it to PATH and syncs the directory, and every rank waits at a
// barrier. The parent directory must exist.
// Errors (cannot create, disk full, HDF5 failure, inconsistent slices) throw UserError naming
// the file on EVERY rank: the ranks agree on failure after each collective stage, so none is
// left waiting; PATH.tmp is removed and an existing PATH is untouched.
void write_param_file(const std::string& path, MPI_Comm comm, const std::vector<TensorSlice>& tensors,
                      const std::vector<std::pair<std::string, int64_t>>& int_attributes,
                      const std::vector<std::pair<std::string, std::string>>& string_attributes = {},
                      const WriteOptions& options = {});

// Serial reading for tools and tests (one process, no MPI needed): every dataset name ->
// (global shape, values row-major). Throws UserError naming the file when it cannot be read or
// is not a Trident parameter file.
std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> read_param_file(const std::string& path);

// Every dataset's name and global shape, serially, without reading values.
std::map<std::string, std::vector<int64_t>> list_param_file(const std::string& path);

// One tensor slice to read into this rank's memory.
struct TensorSliceRead {
  std::string name;
  std::vector<int64_t> global_shape;
  int split_axis = -1;
  int64_t slice_begin = 0;
  int64_t slice_extent = 0;
  // Receives local elements [read_begin, read_begin + read_count) of the slice (the local
  // shape, row-major); read_count -1: to the slice's end.
  float* data = nullptr;
  int64_t read_begin = 0;
  int64_t read_count = -1;
  // Rows (axis 0) the file must hold: -1, exactly global_shape[0]; else at least this many, any
  // count beyond being padding (a vocabulary padded for another tensor-parallel size: the real
  // vocabulary's rows).
  int64_t rows_required = -1;
};

// "" when a tensor stored with shape `stored` can be read as `s` (the same shape, or at least
// s.rows_required rows where that is set), else "tensor 'NAME' has shape [..] in the file, where
// the model's is [..]: a file of another model". read_param_slices' check, for a caller that
// wants it before it takes the memory to read into.
std::string stored_shape_problem(const TensorSliceRead& s, const std::vector<int64_t>& stored);

// Collective over `comm` (every rank calls it with its own list): opens the file through
// parallel HDF5 and reads each rank's slices independently, so a file written by one layout is
// read by any other. A tensor with rows_required >= 0 whose stored rows (axis 0) differ from
// global_shape[0] but hold those rows (a vocabulary padded for another tensor-parallel size) is
// read on the rows both have and zero-filled beyond; a missing tensor or any other shape
// difference is a UserError naming the file, the tensor and both shapes, raised on every rank.
void read_param_slices(const std::string& path, MPI_Comm comm, const std::vector<TensorSliceRead>& slices,
                       int64_t max_bytes_per_call = kMaxBytesPerCall);

// Collective over `comm`: reads every dataset once in total (each rank a band of its rows),
// recomputes its checksum and compares it with the stored one. Returns "" when the file
// verifies, else what is wrong (the same text on every rank): it cannot be opened (missing,
// truncated, not HDF5), it is not a parameter file, it has no checksums (format version 1),
// or tensor NAME fails its checksum or cannot be read.
std::string verify_param_file(const std::string& path, MPI_Comm comm);

// A string attribute of the root (e.g. a checkpoint's "deck"), serially; empty when absent.
// Throws UserError naming the file when it cannot be read.
std::optional<std::string> read_param_file_string_attribute(const std::string& path, const std::string& name);

// The root's integer attributes (format_version and the writer's int attributes), serially.
std::map<std::string, int64_t> read_param_file_int_attributes(const std::string& path);

// The root's float64 attributes, serially.
std::map<std::string, double> read_param_file_double_attributes(const std::string& path);

}  // namespace trident::io
