// A seeded sparse Markov source of order k whose entropy rate is known exactly, so a model
// trained on it has a loss floor to compare with (docs/data-format.md, "Synthetic source").
//
// Vocabulary V (tokens 0..V-1), order k, branching b. Every context (the previous k tokens)
// has b distinct successor tokens, chosen by hashing (seed, context), and the same
// probability vector p_i = 2^-i / sum_j 2^-j (i = 0..b-1) is assigned to them in the order
// the hash picked them, so the order differs from context to context. Since the next-token
// distribution given any context has entropy H(p), the entropy rate of the source is exactly
// H(p) nats/token whatever its stationary distribution: no predictor that sees the past can
// reach a lower expected cross-entropy.
//
// Successors are recomputed from the hash on every step, so no V^k table is needed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/token_dataset.h"     // TokenFileInfo
#include "io/validation_split.h"  // kMaxValFraction

namespace trident::io {

class SyntheticSource {
 public:
  // Throws UserError when a parameter is out of range: 2 <= vocab < 2^32 - 1,
  // 0 <= order <= 64, 1 <= branching <= min(vocab, 64) (p_63 = 2^-63 already never occurs).
  SyntheticSource(int64_t vocab, int order, int branching, uint64_t seed);

  // n tokens of the stream `stream` (0 = training, 1 = validation, ...): the same transition
  // structure for every stream, but each starts from its own seed-derived (unseen) context
  // and draws with its own random sequence. Deterministic in (seed, stream, n); a shorter
  // request is a prefix of a longer one.
  std::vector<uint32_t> generate(int64_t n, uint64_t stream = 0) const;

  // H(p) in nats: the exact entropy rate, i.e. the loss floor of a perfect model.
  double entropy_rate_nats() const;

  // The b successors of `context` (its last k tokens are used; fewer than k means the
  // missing oldest tokens are 0), most probable first: successors(c)[i] has probability p_i.
  std::vector<uint32_t> successors(const std::vector<uint32_t>& context) const;

  const std::vector<double>& probabilities() const { return probabilities_; }
  int64_t vocab() const { return vocab_; }
  int order() const { return order_; }
  int branching() const { return branching_; }
  // One line naming the source and its parameters, stored as the file's description.
  std::string description() const;
  // The description's first part, which names the transition structure: "synthetic order-2
  // Markov source: vocabulary 32, branching 4".
  static std::string parameters_text(int64_t vocab, int order, int branching);

 private:
  uint64_t context_hash(const uint32_t* context) const;  // context: k tokens, oldest first
  void fill_successors(uint64_t hash, uint32_t* out) const;

  int64_t vocab_;
  int order_;
  int branching_;
  uint64_t seed_;
  std::vector<double> probabilities_;  // p_i, i = 0..b-1
  std::vector<double> cumulative_;     // p_0 + ... + p_i, the last forced to 1
};

// Writes a synthetic token file (serial; one process calls it): `tokens` tokens, the first
// floor(tokens * (1 - val_fraction)) of them (at least one token in each split) from stream 0
// as the training split, the rest from stream 1 as the validation split. vocab_size is
// vocab + 1 with eot_id = vocab: the end-of-text token never occurs; the two splits are the
// file's two documents. The file records entropy_rate_nats. Throws UserError on bad
// parameters (naming them) or when the file cannot be written.
void make_synthetic_file(const std::string& path, int64_t vocab, int order, int branching,
                         int64_t tokens, double val_fraction, uint64_t seed);

// The training split size for n tokens: floor(n * (1 - val_fraction)), clamped so that each
// split holds at least one token. Throws UserError unless n >= 2 and 0 < val_fraction <=
// kMaxValFraction.
int64_t train_split_tokens(int64_t n, double val_fraction);

// How the token file of `info`, a synthetic source, differs from what make_synthetic_file would
// write with these parameters, or "" when it does not: data.generate = synthetic makes the file
// only where it is missing, so a deck whose data.synthetic_* changed would otherwise train on
// the old file silently. The seed (run.seed) is left out, so that a seed sweep shares one file.
std::string synthetic_file_difference(const TokenFileInfo& info, int64_t vocab, int order, int branching,
                                      int64_t tokens, double val_fraction);

}  // namespace trident::io
