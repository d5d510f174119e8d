// Reading a deck: INI text and `--section.key=value` overrides go through
// Boost.Program_options with every schema key registered as a string; this file then checks
// what Boost cannot (unknown keys with a suggestion, keys given twice, values by type) and
// turns every Boost exception into a one-line UserError.
#include <cerrno>        // errno
#include <cstdio>        // std::fopen, std::fread
#include <map>
#include <memory>        // std::unique_ptr
#include <sstream>       // std::istringstream
#include <stdexcept>     // std::out_of_range
#include <string>
#include <system_error>  // std::generic_category
#include <utility>
#include <vector>

#include <boost/program_options.hpp>  // options_description, parse_config_file, command_line_parser

#include "io/deck.h"         // ResolvedDeck, parse_deck, read_deck_file
#include "io/deck_schema.h"  // deck_schema, find_key_spec, canonical_value, nearest_key
#include "io/user_error.h"   // UserError

namespace trident::io {
namespace po = boost::program_options;
namespace {

// Every schema key as an option taking one string; values are checked after parsing.
po::options_description schema_options() {
  po::options_description options("Trident input deck");
  for (const KeySpec& spec : deck_schema()) {
    options.add_options()(spec.name.c_str(), po::value<std::string>(), spec.description.c_str());
  }
  return options;
}

std::string unknown_key_message(const std::string& source, const std::string& name) {
  const std::string suggestion = nearest_key(name);
  return source + ": unknown key '" + printable(name) + "' " +
         (suggestion.empty() ? std::string("(the keys are listed in docs/input-deck.md)")
                             : "(did you mean '" + suggestion + "'?)");
}

std::string trimmed(const std::string& text) {
  const char* const kSpace = " \t\r\n";
  const size_t first = text.find_first_not_of(kSpace);
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

// The 1-based line of deck_text that Boost reported as `bad_line` (it gives no number), or 0.
int line_number_of(const std::string& deck_text, const std::string& bad_line) {
  std::istringstream lines(deck_text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const size_t comment = line.find('#');
    if (comment != std::string::npos) line.erase(comment);
    if (trimmed(line) == trimmed(bad_line)) return number;
  }
  return 0;
}

// The deck as Boost's INI reader should see it, line for line: without a UTF-8 byte-order mark
// (Windows editors write one; Boost would read it as part of the first line), with every line
// ending in LF (CRLF from Windows, and a lone CR from classic Mac OS editors, which Boost read as
// one long line whose leading comment hid every key: the deck ran silently on its defaults), and
// with section headers written `[ model ]` trimmed to `[model]` (Boost keeps the spaces in the name).
std::string normalized_ini(const std::string& deck_text) {
  static constexpr char kByteOrderMark[] = "\xEF\xBB\xBF";
  const bool bom = deck_text.rfind(kByteOrderMark, 0) == 0;
  std::string lf_text;
  lf_text.reserve(deck_text.size());
  for (std::size_t i = bom ? 3 : 0; i < deck_text.size(); ++i) {
    if (deck_text[i] != '\r') {
      lf_text.push_back(deck_text[i]);
    } else if (i + 1 == deck_text.size() || deck_text[i + 1] != '\n') {
      lf_text.push_back('\n');
    }
  }
  std::istringstream lines(lf_text);
  std::string out, line;
  while (std::getline(lines, line)) {
    const std::string code = trimmed(line.substr(0, line.find('#')));
    if (code.size() >= 2 && code.front() == '[' && code.back() == ']') {
      // Appended piece by piece: GCC 12 sees a false overlap in "[" + std::string + "]" (-Wrestrict).
      const std::string name = trimmed(code.substr(1, code.size() - 2));
      line.assign(1, '[');
      line.append(name);
      line.push_back(']');
    }
    out += line + "\n";
  }
  return out;
}

// The first section header of the normalized `deck_text` that names no schema section, as
// "line N: [name]", or "". Keys under such a header are refused by name (with a suggestion) before
// this is asked, so only an empty one is left: a misspelt header whose keys are all commented
// out, or a deck of another program; either way not what the user meant to run.
std::string unknown_section(const std::string& deck_text) {
  std::istringstream lines(deck_text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const std::string code = trimmed(line.substr(0, line.find('#')));
    if (code.size() < 2 || code.front() != '[' || code.back() != ']') continue;
    const std::string name = code.substr(1, code.size() - 2);
    bool known = false;
    for (const SectionSpec& section : deck_sections()) known = known || section.name == name;
    if (!known) return "line " + std::to_string(number) + ": [" + printable(name) + "]";
  }
  return "";
}

std::string section_names() {
  std::string names;
  for (const SectionSpec& section : deck_sections()) names += (names.empty() ? "" : ", ") + section.name;
  return names;
}

using KeyValues = std::map<std::string, std::string>;

KeyValues read_ini(const std::string& raw_deck_text, const std::string& deck_name,
                   const po::options_description& options) {
  const std::string source = "deck " + printable(deck_name);
  const std::string deck_text = normalized_ini(raw_deck_text);
  po::parsed_options parsed(&options);
  try {
    std::istringstream stream(deck_text);
    parsed = po::parse_config_file(stream, options, /*allow_unregistered=*/true);
  } catch (const po::invalid_config_file_syntax& error) {
    const int line = line_number_of(deck_text, error.tokens());
    throw UserError(source + (line > 0 ? ", line " + std::to_string(line) : std::string()) +
                    ": '" + printable(trimmed(error.tokens())) +
                    "' is not a [section] or a key = value line");
  } catch (const std::exception& error) {
    throw UserError(source + ": " + printable(error.what()));
  }
  KeyValues values;
  for (const po::option& option : parsed.options) {
    if (option.unregistered) throw UserError(unknown_key_message(source, option.string_key));
    if (values.count(option.string_key) > 0) {
      throw UserError(source + ": key '" + option.string_key +
                      "' is given twice (keep one of the lines)");
    }
    values[option.string_key] = option.value.empty() ? std::string() : option.value.front();
  }
  if (const std::string where = unknown_section(deck_text); !where.empty()) {
    throw UserError(source + ", " + where + " is not a section of a Trident deck (the sections are " +
                    section_names() + ")");
  }
  return values;
}

KeyValues read_overrides(const std::vector<std::string>& overrides,
                         const po::options_description& options) {
  const std::string source = "command line";
  namespace style = po::command_line_style;
  for (const std::string& token : overrides) {
    // Boost would take "--" as the end of options and drop it silently.
    if (token == "--") {
      throw UserError(source + ": '--' is not an override of the form --section.key=value");
    }
  }
  po::parsed_options parsed(&options);
  try {
    // No guessing of abbreviated names, no short options: only --section.key[=| ]value.
    parsed = po::command_line_parser(overrides)
                 .options(options)
                 .style(style::allow_long | style::long_allow_adjacent | style::long_allow_next)
                 .allow_unregistered()
                 .run();
  } catch (const po::invalid_command_line_syntax& error) {
    const bool no_value = error.kind() == po::invalid_syntax::missing_parameter ||
                          error.kind() == po::invalid_syntax::empty_adjacent_parameter;
    if (!no_value) throw UserError(source + ": " + printable(error.what()));
    const std::string option = printable(error.get_option_name());
    throw UserError(source + ": " + option + " has no value (write " + option + "=VALUE)");
  } catch (const std::exception& error) {
    throw UserError(source + ": " + printable(error.what()));
  }
  KeyValues values;
  for (const po::option& option : parsed.options) {
    if (option.string_key.empty()) {
      const std::string token = option.original_tokens.empty() ? "" : option.original_tokens[0];
      throw UserError(source + ": '" + printable(token) +
                      "' is not an override of the form --section.key=value");
    }
    if (option.unregistered) throw UserError(unknown_key_message(source, option.string_key));
    // "--run.dir --train.steps=5": Boost takes the next override as the value. A value that
    // starts with "--" must be written --key=--value.
    if (option.original_tokens.size() == 2 && option.original_tokens[1].rfind("--", 0) == 0) {
      throw UserError(source + ": --" + option.string_key + " has no value (write --" + option.string_key +
                      "=VALUE; '" + printable(option.original_tokens[1]) + "' is taken for the next override)");
    }
    if (values.count(option.string_key) > 0) {
      throw UserError(source + ": --" + option.string_key + " is given twice");
    }
    values[option.string_key] = option.value.empty() ? std::string() : option.value.front();
  }
  return values;
}

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};

}  // namespace

const std::string& ResolvedDeck::value(const std::string& name) const {
  for (const auto& [key, text] : entries_) {
    if (key == name) return text;
  }
  throw std::out_of_range("no deck key '" + name + "'");
}

void ResolvedDeck::set(const std::string& name, const std::string& value) {
  const KeySpec* spec = find_key_spec(name);
  if (spec == nullptr) throw std::out_of_range("no deck key '" + name + "'");
  const std::string canonical = canonical_value(*spec, value);
  for (auto& [key, text] : entries_) {
    if (key == name) text = canonical;
  }
}

std::string ResolvedDeck::to_ini() const {
  std::string ini =
      "# Resolved Trident deck: `trident train config.ini --run.dir=NEW` reproduces this run (the same\n"
      "# bits on the same number of ranks; without --run.dir it resumes or refuses the run already there)\n";
  for (const SectionSpec& section : deck_sections()) {
    ini += "\n# " + section.description + "\n[" + section.name + "]\n";
    for (const auto& [name, text] : entries_) {
      if (section_of(name) != section.name) continue;
      const KeySpec* spec = find_key_spec(name);
      ini += "# " + spec->description + "\n" + name.substr(section.name.size() + 1) + " = " +
             text + "\n";
    }
  }
  return ini;
}

ResolvedDeck parse_checkpoint_deck(const std::string& deck_text, const std::string& checkpoint) {
  try {
    return parse_deck(deck_text, "checkpoint '" + checkpoint + "' (its deck)", {});
  } catch (const UserError& e) {
    throw UserError("checkpoint '" + checkpoint + "': its saved deck does not read back (" + e.what() +
                    "): a damaged or foreign file");
  }
}

ResolvedDeck parse_deck(const std::string& deck_text, const std::string& deck_name,
                        const std::vector<std::string>& overrides) {
  const po::options_description options = schema_options();
  const KeyValues from_deck = read_ini(deck_text, deck_name, options);
  const KeyValues from_command_line = read_overrides(overrides, options);

  ResolvedDeck deck;
  for (const KeySpec& spec : deck_schema()) {
    std::string text = spec.default_text;
    if (const auto given = from_deck.find(spec.name); given != from_deck.end()) {
      text = given->second;
    }
    if (const auto given = from_command_line.find(spec.name); given != from_command_line.end()) {
      text = given->second;
    }
    deck.entries_.emplace_back(spec.name, canonical_value(spec, text));
  }
  return deck;
}

std::string read_deck_file(const std::string& path) {
  const auto cannot_read = [&path](int error_number) {
    return UserError("deck '" + printable(path) + "': cannot read (" +
                     std::generic_category().message(error_number) + ")");
  };
  errno = 0;
  const std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) throw cannot_read(errno);
  std::string text;
  char buffer[4096];
  size_t count = 0;
  while ((count = std::fread(buffer, 1, sizeof(buffer), file.get())) > 0) {
    text.append(buffer, count);
  }
  if (std::ferror(file.get())) throw cannot_read(errno);
  return text;
}

}  // namespace trident::io
