// SyntheticSource: a sparse order-k Markov source with an exactly known entropy rate, and the
// writer of its token files. Successor sets come from a counter-based hash (splitmix64) of
// (seed, context), so the source needs no table; draws come from std::mt19937_64 turned into
// doubles by our own conversion, so the stream is the same with every standard library.
#include "io/synthetic_source.h"

#include <algorithm>  // std::min, std::clamp
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>  // std::mt19937_64, std::seed_seq (both fully specified by the standard)
#include <sstream>
#include <string>
#include <vector>

#include "io/token_file_writer.h"  // write_token_file, TokenFileContents
#include "io/user_error.h"     // UserError

namespace trident::io {
namespace {

constexpr int kMaxOrder = 64;
constexpr int kMaxBranching = 64;
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

// splitmix64's finaliser: a bijective 64-bit mix, good enough to pick successors.
uint64_t mix(uint64_t x) {
  x += kGolden;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

std::string format_double(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.6f", value);
  return buffer;
}

}  // namespace

SyntheticSource::SyntheticSource(int64_t vocab, int order, int branching, uint64_t seed)
    : vocab_(vocab), order_(order), branching_(branching), seed_(seed) {
  if (vocab < 2 || vocab >= int64_t{std::numeric_limits<uint32_t>::max()}) {
    throw UserError("synthetic source: vocabulary " + std::to_string(vocab) +
                    " is out of range (2 to 4294967294)");
  }
  if (order < 0 || order > kMaxOrder) {
    throw UserError("synthetic source: order " + std::to_string(order) +
                    " is out of range (0 to " + std::to_string(kMaxOrder) + ")");
  }
  const int64_t max_branching = std::min<int64_t>(vocab, kMaxBranching);
  if (branching < 1 || branching > max_branching) {
    throw UserError("synthetic source: branching " + std::to_string(branching) +
                    " is out of range (1 to min(vocabulary, " + std::to_string(kMaxBranching) +
                    ") = " + std::to_string(max_branching) + ")");
  }
  double total = 0.0;
  for (int i = 0; i < branching; ++i) {
    probabilities_.push_back(std::ldexp(1.0, -i));
    total += probabilities_.back();
  }
  double running = 0.0;
  for (double& p : probabilities_) {
    p /= total;
    running += p;
    cumulative_.push_back(running);
  }
  cumulative_.back() = 1.0;  // so a draw u in [0, 1) always finds a successor
}

double SyntheticSource::entropy_rate_nats() const {
  double entropy = 0.0;
  for (double p : probabilities_) entropy -= p * std::log(p);
  return entropy;
}

uint64_t SyntheticSource::context_hash(const uint32_t* context) const {
  uint64_t hash = mix(seed_ ^ 0x5EED5EED5EED5EEDULL);
  for (int i = 0; i < order_; ++i) hash = mix(hash ^ (uint64_t{context[i]} + 1));
  return hash;
}

// The first b entries of a Fisher-Yates shuffle of [0, V) driven by the context hash, with
// the shuffled array kept sparse (only positions that were swapped are stored): b distinct
// tokens, the first of which gets p_0.
void SyntheticSource::fill_successors(uint64_t hash, uint32_t* out) const {
  uint64_t moved_from[kMaxBranching];  // position r that received an earlier value ...
  uint64_t moved_value[kMaxBranching];  // ... and that value
  int moved = 0;
  const auto value_at = [&](uint64_t position) {
    for (int m = 0; m < moved; ++m) {
      if (moved_from[m] == position) return moved_value[m];
    }
    return position;
  };
  const uint64_t vocab = static_cast<uint64_t>(vocab_);
  for (int j = 0; j < branching_; ++j) {
    const uint64_t position = static_cast<uint64_t>(j);
    const uint64_t pick = position + mix(hash + (position + 1) * kGolden) % (vocab - position);
    const uint64_t picked_value = value_at(pick);
    const uint64_t displaced_value = value_at(position);
    out[j] = static_cast<uint32_t>(picked_value);
    // Position j is never read again (later picks are > j), so only `pick` needs recording.
    bool found = false;
    for (int m = 0; m < moved; ++m) {
      if (moved_from[m] == pick) {
        moved_value[m] = displaced_value;
        found = true;
      }
    }
    if (!found) {
      moved_from[moved] = pick;
      moved_value[moved] = displaced_value;
      ++moved;
    }
  }
}

std::vector<uint32_t> SyntheticSource::successors(const std::vector<uint32_t>& context) const {
  std::vector<uint32_t> window(static_cast<size_t>(order_), 0);
  const size_t given = std::min(context.size(), window.size());
  for (size_t i = 0; i < given; ++i) {
    window[window.size() - given + i] = context[context.size() - given + i];
  }
  std::vector<uint32_t> out(static_cast<size_t>(branching_));
  fill_successors(context_hash(window.data()), out.data());
  return out;
}

std::vector<uint32_t> SyntheticSource::generate(int64_t n, uint64_t stream) const {
  std::vector<uint32_t> tokens;
  if (n <= 0) return tokens;
  tokens.reserve(static_cast<size_t>(n));
  std::seed_seq seeds{static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32),
                      static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32),
                      0x7D1Du};
  std::mt19937_64 rng(seeds);
  // The starting context is drawn from (seed, stream) and is not part of the stream.
  std::vector<uint32_t> context(static_cast<size_t>(order_));
  for (int i = 0; i < order_; ++i) {
    const uint64_t draw = mix(mix(seed_ ^ (stream * kGolden)) + static_cast<uint64_t>(i));
    context[static_cast<size_t>(i)] = static_cast<uint32_t>(draw % static_cast<uint64_t>(vocab_));
  }
  std::vector<uint32_t> next(static_cast<size_t>(branching_));
  for (int64_t t = 0; t < n; ++t) {
    fill_successors(context_hash(context.data()), next.data());
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // uniform in [0, 1)
    size_t choice = 0;
    while (u >= cumulative_[choice]) ++choice;
    const uint32_t token = next[choice];
    tokens.push_back(token);
    if (order_ > 0) {
      context.erase(context.begin());
      context.push_back(token);
    }
  }
  return tokens;
}

std::string SyntheticSource::parameters_text(int64_t vocab, int order, int branching) {
  std::ostringstream text;
  text << "synthetic order-" << order << " Markov source: vocabulary " << vocab << ", branching " << branching;
  return text.str();
}

std::string SyntheticSource::description() const {
  std::ostringstream text;
  text << parameters_text(vocab_, order_, branching_) << ", seed " << seed_
       << ", successor probabilities p_i = 2^-i / sum_j 2^-j; entropy rate "
       << format_double(entropy_rate_nats()) << " nats/token";
  return text.str();
}

int64_t train_split_tokens(int64_t n, double val_fraction) {
  if (!(val_fraction > 0.0 && val_fraction <= kMaxValFraction)) {
    throw UserError("validation fraction " + format_double(val_fraction) + " is not above 0 and at most " +
                    format_double(kMaxValFraction));
  }
  if (n < 2) {
    throw UserError(std::to_string(n) +
                    " tokens cannot be split into training and validation (need at least 2)");
  }
  auto train = static_cast<int64_t>(std::floor(static_cast<double>(n) * (1.0 - val_fraction)));
  return std::clamp<int64_t>(train, 1, n - 1);
}

void make_synthetic_file(const std::string& path, int64_t vocab, int order, int branching,
                         int64_t tokens, double val_fraction, uint64_t seed) {
  const SyntheticSource source(vocab, order, branching, seed);
  const int64_t train = train_split_tokens(tokens, val_fraction);

  TokenFileContents contents;
  contents.tokens = source.generate(train, 0);
  const std::vector<uint32_t> validation = source.generate(tokens - train, 1);
  contents.tokens.insert(contents.tokens.end(), validation.begin(), validation.end());
  contents.doc_offsets = {0, static_cast<uint64_t>(train), static_cast<uint64_t>(tokens)};
  contents.vocab_size = vocab + 1;
  contents.eot_id = vocab;
  contents.tokenizer = "synthetic";
  contents.description =
      source.description() +
      "; two documents (training split from stream 0, validation split from stream 1), the "
      "end-of-text id " + std::to_string(vocab) + " never occurs";
  contents.train_tokens = train;
  contents.entropy_rate_nats = source.entropy_rate_nats();
  write_token_file(path, contents);
}

std::string synthetic_file_difference(const TokenFileInfo& info, int64_t vocab, int order, int branching,
                                      int64_t tokens, double val_fraction) {
  const std::string parameters = SyntheticSource::parameters_text(vocab, order, branching);
  const int64_t train = train_split_tokens(tokens, val_fraction);
  if (info.description.rfind(parameters + ",", 0) == 0 && info.total_tokens == tokens && info.train_tokens == train) {
    return "";
  }
  const std::string made = info.description.substr(0, info.description.find(", seed"));
  return "'" + made + "', " + std::to_string(info.total_tokens) + " tokens, " + std::to_string(info.train_tokens) +
         " for training; the deck's data.synthetic_* and data.val_fraction ask for '" + parameters + "', " +
         std::to_string(tokens) + " tokens, " + std::to_string(train) + " for training";
}

}  // namespace trident::io
