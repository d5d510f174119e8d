// Token datasets: one HDF5 file of tokens (format: docs/data-format.md), read through parallel
// HDF5 by every rank, each reading only the samples it trains on.
//
// File layout (format "trident-tokens", version 1):
//   /tokens       1-D chunked, uint16 when vocab_size <= 65536 else uint32
//   /doc_offsets  1-D uint64, n_docs + 1 entries, doc d is tokens [off[d], off[d+1])
//   root attributes: format, format_version, vocab_size, eot_id, tokenizer, train_tokens
//   (tokens [0, train_tokens) are the training split, the rest validation), description, and
//   entropy_rate_nats for synthetic sources (NaN / absent otherwise).
//
// A sample of sequence length T is T+1 consecutive tokens (inputs and targets shifted by one);
// sample i of a split starts at token i*T of that split, so a split of n tokens holds
// (n - 1) / T samples.
#pragma once

#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace trident::io {

enum class Split { kTrain, kValidation };

struct TokenFileInfo {
  std::string path;
  int64_t vocab_size = 0;
  int64_t eot_id = 0;
  std::string tokenizer;
  std::string description;
  int64_t total_tokens = 0;
  int64_t train_tokens = 0;
  int64_t num_docs = 0;
  double entropy_rate_nats = NAN;  // known loss floor of a synthetic source, else NaN
  int token_bits = 16;             // 16 or 32
};

// An open token file. open() is collective over `comm` (every rank of it calls it).
class TokenDataset {
 public:
  // Throws UserError naming the file when it is missing, unreadable, not an HDF5 file, or not
  // of this format (missing dataset or attribute, wrong version, inconsistent sizes).
  TokenDataset(const std::string& path, MPI_Comm comm);
  ~TokenDataset();
  TokenDataset(const TokenDataset&) = delete;
  TokenDataset& operator=(const TokenDataset&) = delete;

  const TokenFileInfo& info() const { return info_; }
  int64_t num_samples(Split split, int seq_len) const;
  // Reads sample `index` of `split` (independent hyperslab read of seq_len+1 tokens) into
  // out[0..seq_len] as int32. Throws std::out_of_range when index >= num_samples.
  void read_sample(Split split, int64_t index, int seq_len, int32_t* out) const;
  // Throws UserError when the file is no longer the one opened: another size, modification
  // time or inode (rewritten, truncated, replaced under the run). Reads past a truncated end
  // come back as zeros through MPI-IO, and a file rewritten in place gives other tokens: either
  // would train on without an error. One stat(2); the batch loader calls it once a step.
  void check_unchanged() const;

 private:
  // What stat(2) said of the file when it was opened (all 0: it could not say, nothing checked).
  struct FileIdentity {
    uint64_t device = 0, inode = 0;
    int64_t size = 0, modified_ns = 0;
  };
  TokenFileInfo info_;
  FileIdentity opened_;
  int64_t file_ = -1;     // hid_t, kept as int64 so this header needs no HDF5
  int64_t tokens_ = -1;   // hid_t of /tokens
};

// Reads only the attributes (no MPI needed). Throws UserError like TokenDataset.
TokenFileInfo read_token_file_info(const std::string& path);

// The training sample order: a permutation of [0, n) per epoch from (seed, epoch) by
// Fisher-Yates on std::mt19937_64 (our own loop, not std::shuffle, whose output the standard
// leaves to each library). Position p of the endless stream is sample perm(p / n)[p % n].
class SampleOrder {
 public:
  SampleOrder(int64_t num_samples, uint64_t seed);
  int64_t sample_at(int64_t position);  // caches the permutation of the last epoch used
  int64_t num_samples() const { return num_samples_; }
  static std::vector<int64_t> permutation(int64_t n, uint64_t seed, int64_t epoch);

 private:
  int64_t num_samples_;
  uint64_t seed_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> cached_;
};

// Which samples a data rank trains on. The global batch of step s is stream positions
// [s*G, (s+1)*G) (G = global_batch); data rank r owns [r*G/dp, (r+1)*G/dp) of it, and
// micro-batch k of the rank covers the next micro_batch positions of that slice. So the
// global batch is the same set of samples for every dp.
struct BatchGeometry {
  int64_t global_batch = 0;
  int64_t micro_batch = 0;
  int dp_size = 1;
  int dp_rank = 0;
  int seq_len = 0;
  int64_t micro_batches_per_step() const { return global_batch / (micro_batch * dp_size); }
};

class BatchLoader {
 public:
  BatchLoader(const TokenDataset& dataset, BatchGeometry geometry, uint64_t seed);
  // tokens and targets each hold micro_batch * seq_len int32 (row-major [micro_batch, T]).
  void load_train(int64_t step, int64_t micro, int32_t* tokens, int32_t* targets);
  // Validation batches are taken in file order (no shuffle), wrapping around the split.
  void load_validation(int64_t eval_batch, int64_t micro, int32_t* tokens, int32_t* targets);

 private:
  void load(Split split, int64_t sample, int64_t row, int32_t* tokens, int32_t* targets);
  const TokenDataset& dataset_;
  BatchGeometry geometry_;
  SampleOrder order_;
  std::vector<int32_t> row_;  // seq_len + 1
};

}  // namespace trident::io
