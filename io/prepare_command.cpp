// `trident prepare synthetic|text|tokens`: option parsing (Boost.Program_options), argument checks
// that name the option, then the writers of synthetic_source.h and token_file_writer.h.
#include "io/prepare_command.h"

#include <boost/program_options.hpp>  // options_description, command_line_parser, variables_map

#include <algorithm>
#include <cmath>  // std::isnan
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "io/byte_tokenizer.h"     // TextFileReader, kByteVocabSize, kByteEotId
#include "io/file_kind.h"          // special_file_kind
#include "io/hdf5_string.h"        // read_root_string_attribute
#include "io/synthetic_source.h"   // SyntheticSource, make_synthetic_file, train_split_tokens
#include "io/token_dataset.h"      // read_token_file_info
#include "io/token_file_common.h"  // token_file_detail::kFormatName
#include "io/token_file_writer.h"  // TokenFileWriter, write_token_file
#include "io/token_import.h"       // TokenArrayReader
#include "io/user_error.h"         // UserError

namespace trident::io {
namespace {

namespace po = boost::program_options;

// `prepare text` and `prepare tokens` hold one block of an input in memory (64 MiB at 4 bytes a
// token) and say how far they are every 16 blocks of a large input (nanoGPT's openwebtext
// train.bin is one file of 9 billion tokens; enwik9 is 10^9 bytes).
constexpr std::size_t kImportBlockTokens = std::size_t{1} << 24;
constexpr int64_t kImportProgressTokens = int64_t{1} << 28;
static_assert(kImportProgressTokens % kImportBlockTokens == 0, "progress is reported at block ends");

constexpr const char* kUsage =
    "usage: trident prepare synthetic --output FILE [options]\n"
    "       trident prepare text --output FILE [--val-fraction F] INPUT...\n"
    "       trident prepare tokens --output FILE [--val FILE]... [options] INPUT...\n"
    "\n"
    "Writes a Trident token file (HDF5; see docs/data-format.md).\n"
    "  synthetic  tokens from a seeded sparse Markov source whose entropy rate (the loss\n"
    "             floor of a perfect model) is known exactly\n"
    "  text       byte-level tokens (vocabulary 257, end-of-text 256) of the INPUT files,\n"
    "             one document per file\n"
    "  tokens     GPT-2 tokens made by llm.c (its .bin shards) or nanoGPT (train.bin,\n"
    "             val.bin), one document per file: the data of the gpt2-* decks\n"
    "Run `trident prepare SOURCE --help` for a source's options.\n";

std::string format_double(double value, const char* format) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

// Parses `args` (after the source word) against `options`; Boost's errors become UserError.
// Whole option names only, as deck overrides: Boost's default guessing took --val-frac for
// --val-fraction, past the check that refuses it beside --val (which looks for its full name).
po::variables_map parse(const std::string& command, const std::vector<std::string>& args,
                        const po::options_description& options,
                        const po::positional_options_description& positional) {
  po::variables_map values;
  try {
    const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(args).options(options).positional(positional).style(style).run(),
              values);
  } catch (const po::error& e) {
    throw UserError(command + ": " + e.what() + " (see " + command + " --help)");
  }
  return values;
}

// Runs the deferred checks (required options) after --help has had its chance.
void notify(const std::string& command, po::variables_map& values) {
  try {
    po::notify(values);
  } catch (const po::error& e) {
    throw UserError(command + ": " + e.what() + " (see " + command + " --help)");
  }
}

void check_val_fraction(const std::string& command, double val_fraction) {
  if (!(val_fraction > 0.0 && val_fraction <= kMaxValFraction)) {
    throw UserError(command + ": --val-fraction " + format_double(val_fraction, "%.15g") +
                    " must be above 0 and at most " + format_double(kMaxValFraction, "%g") +
                    " (the share of tokens held out for validation)");
  }
}

// The help's words for --val-fraction, with the range check_val_fraction enforces.
std::string val_fraction_help() {
  return "fraction of tokens held out for validation, above 0 and at most " + format_double(kMaxValFraction, "%g");
}

// Whether `path` starts with HDF5's signature (a token file of an earlier prepare, say).
bool is_hdf5_file(const std::string& path) {
  static constexpr char kSignature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  char head[8] = {};
  std::ifstream file(path, std::ios::binary);
  return file.read(head, sizeof head) && std::equal(head, head + 8, kSignature);
}

// --output may replace an earlier token file, never one of the inputs or any other file: a shell
// glob (`--output corpus/*.txt`) would otherwise turn a text file into a token file.
void check_output_replaceable(const std::string& command, const std::string& output,
                              const std::vector<std::string>& inputs) {
  std::error_code ec;
  if (output.empty()) throw UserError(command + ": --output is empty (an unset variable?); give the token file's name");
  if (std::filesystem::is_directory(output, ec)) {
    throw UserError(command + ": --output '" + output + "' is a directory; give the token file's name (e.g. '" +
                    (std::filesystem::path(output) / "tokens.h5").string() + "')");
  }
  for (const std::string& input : inputs) {
    if (std::filesystem::equivalent(output, input, ec)) {
      throw UserError(command + ": --output '" + output + "' is also an INPUT; it would be overwritten (choose " +
                      "another output name)");
    }
    // The file is written as OUTPUT.tmp first, then renamed: that name must not be an input either.
    if (std::filesystem::equivalent(output + ".tmp", input, ec)) {
      throw UserError(command + ": INPUT '" + input + "' is " + output + ".tmp, the name the token file is written under " +
                      "before it is renamed to --output; it would be overwritten (choose another output name)");
    }
  }
  if (!std::filesystem::exists(output, ec)) return;
  // Before is_hdf5_file's read, which would wait for a FIFO's writer for good.
  if (const std::string kind = special_file_kind(output); !kind.empty()) {
    throw UserError(command + ": --output '" + output + "' is " + kind + ", not a regular file; it is left as it is " +
                    "(give the token file's name)");
  }
  if (!is_hdf5_file(output)) {
    throw UserError(command + ": --output '" + output + "' exists and is not an HDF5 file; it is left as it is " +
                    "(remove it, or choose another output name)");
  }
  // Nor an HDF5 file other than a token file: a mistyped --output would destroy a checkpoint.
  const std::optional<std::string> format = read_root_string_attribute(output, "format");
  if (format != token_file_detail::kFormatName) {
    throw UserError(command + ": --output '" + output + "' exists and is not a Trident token file (" +
                    (format == "trident-params" ? "a checkpoint or parameter file"
                                                : "an HDF5 file of another kind, or one that cannot be read") +
                    "); it is left as it is (remove it, or choose another output name)");
  }
}

void print_summary(const std::string& path, std::ostream& out) {
  const TokenFileInfo info = read_token_file_info(path);
  out << "wrote " << path << "\n"
      << "  tokens:      " << info.total_tokens << " (uint" << info.token_bits << ")\n"
      << "  documents:   " << info.num_docs << "\n"
      << "  split:       " << info.train_tokens << " training, "
      << info.total_tokens - info.train_tokens << " validation\n"
      << "  vocabulary:  " << info.vocab_size << " (end-of-text id " << info.eot_id
      << ", tokenizer " << info.tokenizer << ")\n";
  if (!std::isnan(info.entropy_rate_nats)) {
    out << "  entropy rate (loss floor): " << format_double(info.entropy_rate_nats, "%.6f")
        << " nats/token\n";
  }
}

int prepare_synthetic(const std::vector<std::string>& args, std::ostream& out) {
  const std::string command = "trident prepare synthetic";
  std::string output;
  int64_t vocab = 32;
  int order = 2;
  int branching = 4;
  int64_t tokens = 2000000;
  double val_fraction = 0.05;
  int64_t seed = 1234;
  po::options_description options(
      "usage: trident prepare synthetic --output FILE [options]\n\n"
      "Tokens of a sparse order-k Markov source: every context of k tokens has `branching`\n"
      "successors with probabilities p_i = 2^-i / sum_j 2^-j, so the entropy rate is exactly\n"
      "H(p). The file has vocabulary V+1 (end-of-text V, never used) and two documents,\n"
      "the training and the validation split, generated as separate streams.\n\nOptions");
  options.add_options()
      ("help,h", "print this help")
      ("output,o", po::value(&output)->required()->value_name("FILE"), "token file to write")
      ("vocab", po::value(&vocab)->default_value(vocab)->value_name("V"),
       "vocabulary of the source (tokens 0..V-1)")
      ("order", po::value(&order)->default_value(order)->value_name("K"),
       "tokens of context that fix the next-token distribution (0..64)")
      ("branching", po::value(&branching)->default_value(branching)->value_name("B"),
       "successors per context (1..min(V, 64))")
      ("tokens", po::value(&tokens)->default_value(tokens)->value_name("N"),
       "tokens in the file (training + validation, at least 2)")
      ("val-fraction", po::value(&val_fraction)->default_value(val_fraction, "0.05")->value_name("F"),
       val_fraction_help().c_str())
      ("seed", po::value(&seed)->default_value(seed)->value_name("S"),
       "seed of the source's structure and of its draws (>= 0)");
  std::vector<std::string> stray;  // positional words: none are expected, so name the first
  po::options_description accepted;
  accepted.add(options).add_options()("stray", po::value(&stray));
  po::positional_options_description positional;
  positional.add("stray", -1);
  po::variables_map values = parse(command, args, accepted, positional);
  if (values.count("help") != 0) {
    out << options << "\n";
    return 0;
  }
  notify(command, values);
  if (!stray.empty()) {
    throw UserError(command + ": unexpected argument '" + stray.front() + "' (see " + command +
                    " --help)");
  }
  if (vocab < 2 || vocab >= 4294967295LL) {
    throw UserError(command + ": --vocab " + std::to_string(vocab) +
                    " is out of range (2 to 4294967294)");
  }
  if (order < 0 || order > 64) {
    throw UserError(command + ": --order " + std::to_string(order) +
                    " is out of range (0 to 64)");
  }
  const int64_t max_branching = std::min<int64_t>(vocab, 64);
  if (branching < 1 || branching > max_branching) {
    throw UserError(command + ": --branching " + std::to_string(branching) +
                    " is out of range (1 to min(--vocab, 64) = " +
                    std::to_string(max_branching) + ")");
  }
  if (tokens < 2) {
    throw UserError(command + ": --tokens " + std::to_string(tokens) + " must be at least 2");
  }
  check_val_fraction(command, val_fraction);
  if (seed < 0) {
    throw UserError(command + ": --seed " + std::to_string(seed) + " must not be negative");
  }
  check_output_replaceable(command, output, {});
  make_synthetic_file(output, vocab, order, branching, tokens, val_fraction,
                      static_cast<uint64_t>(seed));
  print_summary(output, out);
  return 0;
}

// Parses `options`, whose "input" values (bound to `inputs`) are the positional words. With
// --help prints it to `out` and returns false; otherwise checks the required options and that
// some INPUT was given, and returns true.
bool parse_inputs_and_options(const std::string& command, const std::vector<std::string>& args,
                              const po::options_description& options, const std::vector<std::string>& inputs,
                              std::ostream& out) {
  po::positional_options_description positional;
  positional.add("input", -1);
  po::variables_map values = parse(command, args, options, positional);
  if (values.count("help") != 0) {
    out << options << "\n";
    return false;
  }
  notify(command, values);
  if (inputs.empty()) throw UserError(command + ": no INPUT files given");
  return true;
}

// Appends every token of `reader` (a TokenArrayReader or a TextFileReader) to the writer's open
// document a block at a time, saying how far it is inside a large input.
template <typename Reader>
void copy_tokens(Reader& reader, const std::string& name, TokenFileWriter& writer, std::vector<uint32_t>& block,
                 std::ostream& out) {
  for (int64_t done = 0;;) {
    reader.read(kImportBlockTokens, block);
    if (block.empty()) return;
    writer.append(block.data(), block.size());
    done += static_cast<int64_t>(block.size());
    if (done % kImportProgressTokens == 0 && done < reader.tokens()) {
      out << "  " << name << ": " << done << " of " << reader.tokens() << " tokens" << std::endl;
    }
  }
}

int prepare_text(const std::vector<std::string>& args, std::ostream& out) {
  const std::string command = "trident prepare text";
  std::string output;
  double val_fraction = 0.05;
  std::vector<std::string> inputs;
  po::options_description options(
      "usage: trident prepare text --output FILE [--val-fraction F] INPUT...\n\n"
      "Byte-level tokens of the INPUT files (token b is byte b, end-of-text is 256, vocabulary\n"
      "257); each file is one document followed by end-of-text. The last tokens, a fraction\n"
      "F of them, are the validation split.\n\nOptions");
  options.add_options()
      ("help,h", "print this help")
      ("output,o", po::value(&output)->required()->value_name("FILE"), "token file to write")
      ("val-fraction", po::value(&val_fraction)->default_value(val_fraction, "0.05")->value_name("F"),
       val_fraction_help().c_str())
      ("input", po::value(&inputs)->value_name("INPUT"), "text files, one document each");
  if (!parse_inputs_and_options(command, args, options, inputs, out)) return 0;
  check_val_fraction(command, val_fraction);

  check_output_replaceable(command, output, inputs);
  // Every input is opened first (one that cannot be read is refused before anything is written);
  // the sizes give the split and the file's size up front.
  int64_t n = 0, text_bytes = 0;
  for (const std::string& input : inputs) {
    const int64_t bytes = TextFileReader(input).tokens();
    text_bytes += bytes;
    n += bytes + 1;  // the document's bytes and its end-of-text
  }
  if (text_bytes == 0) {
    throw UserError(command + ": " + (inputs.size() == 1 ? "INPUT '" + inputs.front() + "' is empty"
                                                         : "every INPUT is empty") +
                    ": there is no text to make tokens of");
  }
  TokenFileWriter writer(output, kByteVocabSize, n);
  std::vector<uint32_t> block;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    TextFileReader reader(inputs[i]);
    copy_tokens(reader, inputs[i], writer, block, out);
    writer.append(&kByteEotId, 1);
    writer.end_document();
    if (const std::string doubt = reader.doubt(); !doubt.empty()) out << "warning: " << doubt << "\n";
    out << "  [" << i + 1 << "/" << inputs.size() << "] " << inputs[i] << ": " << reader.tokens() << " bytes"
        << std::endl;
  }
  writer.finish({.eot_id = kByteEotId,
                 .tokenizer = kByteTokenizerName,
                 .description = "byte-level text of " + std::to_string(inputs.size()) +
                                " file(s), one document each, end-of-text after each",
                 .train_tokens = train_split_tokens(n, val_fraction)});
  print_summary(output, out);
  return 0;
}

int prepare_tokens(const std::vector<std::string>& args, std::ostream& out) {
  const std::string command = "trident prepare tokens";
  std::string output, raw = "uint16", tokenizer = "gpt2";
  int64_t vocab = 50257, eot = 50256;
  double val_fraction = 0.05;
  std::vector<std::string> inputs, val_inputs;
  po::options_description options(
      "usage: trident prepare tokens --output FILE [--val FILE]... [options] INPUT...\n\n"
      "Tokens another program made, usually with GPT-2's tokenizer (which Trident does not ship):\n"
      "llm.c's data shards (dev/data/*.py: a 1 KiB header, magic 20240520 for uint16 tokens or\n"
      "20240801 for uint32) or raw little-endian arrays such as nanoGPT's train.bin and val.bin.\n"
      "Each file is one document. The INPUT files are the training split, the --val files the\n"
      "validation split; without --val the last F of the tokens are.\n\n"
      "  trident prepare tokens --output data/shakespeare.h5 --val tiny_shakespeare_val.bin \\\n"
      "      tiny_shakespeare_train.bin\n"
      "  trident prepare tokens --output data/owt.h5 --val val.bin train.bin\n\nOptions");
  options.add_options()
      ("help,h", "print this help")
      ("output,o", po::value(&output)->required()->value_name("FILE"), "token file to write")
      ("val", po::value(&val_inputs)->composing()->value_name("FILE"), "a validation file (once per file)")
      ("vocab", po::value(&vocab)->default_value(vocab)->value_name("V"),
       "vocabulary (every token must be below it; GPT-2's by default)")
      ("eot", po::value(&eot)->default_value(eot)->value_name("ID"), "end-of-text token id")
      ("tokenizer", po::value(&tokenizer)->default_value(tokenizer)->value_name("NAME"),
       "the tokenizer's name, kept in the file")
      ("raw", po::value(&raw)->default_value(raw)->value_name("TYPE"),
       "uint16 or uint32: the tokens of files without llm.c's header")
      ("val-fraction", po::value(&val_fraction)->default_value(val_fraction, "0.05")->value_name("F"),
       (val_fraction_help() + ", when no --val is given").c_str())
      ("input", po::value(&inputs)->value_name("INPUT"), "training files");
  if (!parse_inputs_and_options(command, args, options, inputs, out)) return 0;
  if (raw != "uint16" && raw != "uint32") {
    throw UserError(command + ": --raw '" + raw + "' is not one of: uint16, uint32");
  }
  if (vocab < 2 || vocab >= 4294967295LL) {
    throw UserError(command + ": --vocab " + std::to_string(vocab) + " is out of range (2 to 4294967294)");
  }
  if (eot < 0 || eot >= vocab) {
    throw UserError(command + ": --eot " + std::to_string(eot) + " is not a token of --vocab " + std::to_string(vocab));
  }
  // The name is printed in one-line reports (check, train's start-up): printable ASCII only, so a
  // stray newline or shell quoting mistake cannot split or garble them.
  if (tokenizer.empty() || std::any_of(tokenizer.begin(), tokenizer.end(), [](char c) { return c < 0x20 || c > 0x7e; })) {
    throw UserError(command + ": --tokenizer must be a name of printable ASCII characters (for example gpt2 or "
                    "llama3), not empty and without line breaks or control characters");
  }
  if (val_inputs.empty()) check_val_fraction(command, val_fraction);
  const bool fraction_given = std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a.rfind("--val-fraction", 0) == 0;
  });
  if (fraction_given && !val_inputs.empty()) {
    throw UserError(command + ": --val-fraction and --val both say what is held out for validation; give one " +
                    "(with --val files the fraction is not used)");
  }
  // A file given as both INPUT and --val would make validation a copy of training data.
  for (const std::string& val : val_inputs) {
    for (const std::string& input : inputs) {
      std::error_code ec;
      if (std::filesystem::equivalent(val, input, ec)) {
        throw UserError(command + ": '" + val + "' is both an INPUT and a --val file: the validation loss would " +
                        "be measured on training data");
      }
    }
  }
  std::vector<std::string> all = inputs;
  all.insert(all.end(), val_inputs.begin(), val_inputs.end());
  check_output_replaceable(command, output, all);

  const RawTokenWidth width = raw == "uint16" ? RawTokenWidth::kUint16 : RawTokenWidth::kUint32;
  // Every header first: a truncated shard is refused before the first token is written, and the
  // counts give the splits and the file's size up front.
  int64_t train = 0, n = 0;
  std::string formats;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const TokenArrayReader reader(all[i], width, vocab);
    if (reader.tokens() == 0) out << "warning: input '" << all[i] << "' holds no tokens\n";
    n += reader.tokens();
    if (i < inputs.size()) train = n;
    if (formats.find(reader.format()) == std::string::npos) formats += (formats.empty() ? "" : ", ") + reader.format();
  }
  if (!val_inputs.empty() && (train == 0 || n == train)) {
    throw UserError(command + ": the " + (train == 0 ? "training (INPUT)" : "validation (--val)") +
                    " files hold no tokens; each split needs at least one");
  }

  if (val_inputs.empty() && n < 2) {
    throw UserError(command + ": the INPUT files hold " + std::to_string(n) + " token(s); splitting off the "
                    "validation part (--val-fraction) needs at least 2, or give the validation split as --val files");
  }
  TokenFileWriter writer(output, vocab, n);
  std::vector<uint32_t> block;
  for (std::size_t i = 0; i < all.size(); ++i) {
    TokenArrayReader reader(all[i], width, vocab);
    copy_tokens(reader, all[i], writer, block, out);
    writer.end_document();
    out << "  [" << i + 1 << "/" << all.size() << "] " << all[i] << ": " << reader.tokens() << " tokens ("
        << reader.format() << (i < inputs.size() ? ", training" : ", validation") << ")" << std::endl;
  }
  writer.finish({.eot_id = eot,
                 .tokenizer = tokenizer,
                 .description = "tokens of " + std::to_string(all.size()) + " file(s) (" + formats +
                                "), one document each",
                 .train_tokens = val_inputs.empty() ? train_split_tokens(n, val_fraction) : train});
  print_summary(output, out);
  return 0;
}

}  // namespace

int run_prepare(const std::vector<std::string>& args, std::ostream& out) {
  if (args.empty()) {
    throw UserError("trident prepare: missing source: synthetic, text or tokens (see trident prepare --help)");
  }
  const std::string& source = args.front();
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (source == "--help" || source == "-h" || source == "help") {
    out << kUsage;
    return 0;
  }
  if (source == "synthetic") return prepare_synthetic(rest, out);
  if (source == "text") return prepare_text(rest, out);
  if (source == "tokens") return prepare_tokens(rest, out);
  throw UserError("trident prepare: unknown source '" + source +
                  "' (expected synthetic, text or tokens; see trident prepare --help)");
}

int run_prepare(const std::vector<std::string>& args) { return run_prepare(args, std::cout); }

}  // namespace trident::io
