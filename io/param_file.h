// Parameter files: every tensor of a model under its global name with its global shape, in one
// HDF5 file written collectively through parallel HDF5 (format: docs/param-file.md).
//
// File layout (format "trident-params", version 1):
//   /NAME           one float32 dataset per tensor, named by the tensor's global name as-is
//                   (dots allowed, e.g. "block0.attn.qkv.weight"; flat, no groups), with its
//                   GLOBAL shape, whatever layout wrote it
//   root attributes: format, format_version, and the caller's int64 attributes (the trainer
//                   writes step, dp, tp, pp, vocab, padded_vocab)
//
// Ownership: every element is written by exactly one rank. Each rank passes the slices IT
// holds and marks the ones it owns (`write`); the union over the ranks of (name, global shape)
// defines the datasets, in order of first appearance by ascending world rank. When several
// ranks mark overlapping slices of one tensor as theirs (a tensor held by several pipeline
// stages, like the tied embedding), the lowest world rank among them writes and the others
// write nothing; the owned slices must then cover every element exactly once.
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

// One tensor as this rank holds it.
struct TensorSlice {
  std::string name;                   // global name; no '/'
  std::vector<int64_t> global_shape;  // shape of the whole tensor
  int split_axis = -1;                // -1: this rank holds the whole tensor
  int64_t slice_begin = 0;            // this rank's range along split_axis
  int64_t slice_extent = 0;
  const float* data = nullptr;  // host memory, the local shape row-major (may be null if !write)
  bool write = false;           // this rank owns (writes) this slice
};

// Collective over `comm` (every rank calls it, with its own list). Writes PATH.tmp through
// parallel HDF5 (collective dataset creation, collective transfers; ranks owning nothing of a
// tensor take part with an empty selection), closes it, then rank 0 renames it to PATH and
// every rank waits at a barrier. The parent directory must exist.
// Errors (cannot create, disk full, HDF5 failure, inconsistent slices) throw UserError naming
// the file on EVERY rank: the ranks agree on failure after each collective stage, so none is
// left waiting.
void write_param_file(const std::string& path, MPI_Comm comm, const std::vector<TensorSlice>& tensors,
                      const std::vector<std::pair<std::string, int64_t>>& int_attributes,
                      const std::vector<std::pair<std::string, std::string>>& string_attributes = {});

// Serial reading for tools and tests (one process, no MPI needed): every dataset name ->
// (global shape, values row-major). Throws UserError naming the file when it cannot be read or
// is not a Trident parameter file.
std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> read_param_file(const std::string& path);

// One tensor slice to read into this rank's memory (the local shape, row-major).
struct TensorSliceRead {
  std::string name;
  std::vector<int64_t> global_shape;
  int split_axis = -1;
  int64_t slice_begin = 0;
  int64_t slice_extent = 0;
  float* data = nullptr;
};

// Collective over `comm` (every rank calls it with its own list): opens the file through
// parallel HDF5 and reads each rank's slices independently, so a file written by one layout is
// read by any other. A tensor whose stored shape differs only along axis 0 (a vocabulary padded
// for another tensor-parallel size) is read on the rows both have and zero-filled beyond;
// a missing tensor or any other shape difference is a UserError naming the file and tensor,
// raised on every rank.
void read_param_slices(const std::string& path, MPI_Comm comm, const std::vector<TensorSliceRead>& slices);

// A string attribute of the root (e.g. a checkpoint's "deck"), serially; empty when absent.
// Throws UserError naming the file when it cannot be read.
std::optional<std::string> read_param_file_string_attribute(const std::string& path, const std::string& name);

// The root's integer attributes (format_version and the writer's int attributes), serially.
std::map<std::string, int64_t> read_param_file_int_attributes(const std::string& path);

}  // namespace trident::io
