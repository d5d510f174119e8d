// The one schema of the input deck: every key `section.key` with its type, default, range
// and a one-line description. The parser (io/deck_parser.cpp), the resolved deck written
// with every run, and the reference in docs/input-deck.md all come from this table.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace trident::io {

enum class ValueType { kInt, kFloat, kBool, kString, kChoice };

// One key of the deck. Numbers are checked against [min, max] (each bound optional, and
// exclusive where its flag says so); a choice must be one of `choices`.
struct KeySpec {
  std::string name;           // "section.key", also the command-line override --section.key
  ValueType type = ValueType::kString;
  std::string default_text;   // the default, written in canonical form (see canonical_value)
  std::optional<double> min;  // lower bound of an int or float
  std::optional<double> max;  // upper bound of an int or float
  bool min_exclusive = false;  // min itself is not allowed (e.g. lr > 0)
  bool max_exclusive = false;  // max itself is not allowed (e.g. beta1 < 1)
  std::vector<std::string> choices;  // the allowed values of a kChoice key
  std::string description;    // one line, for the docs table and the comment in config.ini
};

// A [section] of the deck, in the order sections are written.
struct SectionSpec {
  std::string name;         // "train"
  std::string description;  // one line
};

// Every key, grouped by section in deck_sections() order (an immutable static table).
const std::vector<KeySpec>& deck_schema();

// The sections, in the order the resolved deck and the reference are written.
const std::vector<SectionSpec>& deck_sections();

// The key called `name` ("section.key"), or nullptr when the schema has none.
const KeySpec* find_key_spec(const std::string& name);

// The section part of "section.key" ("train" for "train.steps").
std::string section_of(const std::string& name);

// The nearest schema key to a misspelt or misplaced `name`, or "" when none is reasonably
// close (same key in another section, else a small edit distance).
std::string nearest_key(const std::string& name);

// Checks `text` against the key's type, range and choices and returns its canonical text:
// ints in decimal, floats in the shortest form that reads back to the same double, bools as
// true/false. Canonical text parses back to itself, so a written deck reads back identical.
// Throws UserError naming the key, e.g. "train.micro_batch = 0 is out of range (must be >= 1)".
std::string canonical_value(const KeySpec& spec, const std::string& text);

// The allowed values in words: ">= 1", ">= 0 and < 1", "cpu, cuda, auto", or "" when any.
std::string allowed_values_text(const KeySpec& spec);

// `text` with control characters written as \xNN, so a message that quotes it stays one line.
std::string printable(const std::string& text);

// "int", "float", "bool", "string" or "choice".
const char* value_type_name(ValueType type);

// The Markdown reference of every key: one table per section (key, type, default,
// range/choices, description). docs/input-deck.md carries it between generated markers.
std::string deck_reference_markdown();

}  // namespace trident::io
