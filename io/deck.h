// The input deck: INI text plus `--section.key=value` overrides, parsed with
// Boost.Program_options against the one schema (io/deck_schema.h), validated, resolved.
//
// Every rank parses the same text the same way, so a bad deck throws the same UserError on
// every rank (no rank waits on another).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "io/run_config.h"

namespace trident::io {

// A deck with every key of the schema present (defaults filled in), in schema order.
class ResolvedDeck {
 public:
  // (name, value) in schema order, values as text exactly as they will be written.
  const std::vector<std::pair<std::string, std::string>>& entries() const { return entries_; }
  // The value of `section.key`; throws std::out_of_range for a name not in the schema.
  const std::string& value(const std::string& name) const;
  // Replaces one value (used to write resolved derived values, e.g. parallel.dp = 0 -> 2).
  void set(const std::string& name, const std::string& value);
  // INI text: one [section] block per section, a comment with each key's description,
  // readable back by parse_deck to reproduce the run.
  std::string to_ini() const;

 private:
  friend ResolvedDeck parse_deck(const std::string&, const std::string&,
                                 const std::vector<std::string>&);
  std::vector<std::pair<std::string, std::string>> entries_;
};

// Parses deck text (deck_name is used only in messages, e.g. the file path) and applies the
// command-line overrides (each "--section.key=value" or "--section.key value" already split
// by the shell; an element not of that form is an error). Throws UserError on: a syntax error,
// an unknown key (naming the nearest valid key), a malformed value, a value out of range or
// not among the choices, a key given twice.
ResolvedDeck parse_deck(const std::string& deck_text, const std::string& deck_name,
                        const std::vector<std::string>& overrides);

// The deck saved in checkpoint `checkpoint` (its `deck` attribute), parsed as parse_deck does;
// an error names the checkpoint, as the user did not write that text.
ResolvedDeck parse_checkpoint_deck(const std::string& deck_text, const std::string& checkpoint);

// Reads the deck file (UserError naming the file when missing or unreadable).
std::string read_deck_file(const std::string& path);

// Typed values of a resolved deck; checks relations between keys that need no knowledge of
// the world size or the dataset (e.g. heads divides hidden, global_batch divisible by
// micro_batch, seq_len <= context, min_lr <= lr) and throws UserError naming the keys.
RunConfig to_run_config(const ResolvedDeck& deck);

}  // namespace trident::io
