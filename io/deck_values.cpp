// Checking one deck value against its key's type, range and choices, and writing it in the
// canonical text that a written deck carries (so the deck reads back identical).
#include <charconv>      // std::from_chars, std::to_chars
#include <cmath>         // std::isfinite
#include <cstdint>       // int64_t
#include <string>
#include <string_view>
#include <system_error>  // std::errc

#include "io/deck_schema.h"  // KeySpec, canonical_value
#include "io/user_error.h"   // UserError

namespace trident::io {
namespace {

// from_chars accepts no leading '+', people write one: drop a single '+' before a digit or '.'.
std::string_view without_plus(std::string_view text) {
  if (text.size() > 1 && text[0] == '+' && text[1] != '-' && text[1] != '+') {
    text.remove_prefix(1);
  }
  return text;
}

// Shortest text that reads back to exactly `value`, exponent without '+' or leading zeros
// ("6e-4", not "6e-04"; "2e6", not "2e+06").
std::string format_double(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, result.ptr);
  const size_t e = text.find('e');
  if (e == std::string::npos) return text;
  std::string exponent = text.substr(e + 1);
  std::string sign;
  if (!exponent.empty() && (exponent[0] == '+' || exponent[0] == '-')) {
    if (exponent[0] == '-') sign = "-";
    exponent.erase(0, 1);
  }
  const size_t first_digit = exponent.find_first_not_of('0');
  exponent = first_digit == std::string::npos ? "0" : exponent.substr(first_digit);
  return text.substr(0, e + 1) + sign + exponent;
}

std::string format_bound(const KeySpec& spec, double bound) {
  if (spec.type == ValueType::kInt) return std::to_string(static_cast<int64_t>(bound));
  return format_double(bound);
}

[[noreturn]] void fail(const KeySpec& spec, const std::string& text, const std::string& what) {
  throw UserError(spec.name + " = '" + printable(text) + "' " + what);
}

void check_range(const KeySpec& spec, const std::string& text, double value) {
  const bool below = spec.min && (spec.min_exclusive ? value <= *spec.min : value < *spec.min);
  const bool above = spec.max && (spec.max_exclusive ? value >= *spec.max : value > *spec.max);
  if (below || above) {
    throw UserError(spec.name + " = " + printable(text) + " is out of range (must be " +
                    allowed_values_text(spec) + ")");
  }
}

std::string canonical_int(const KeySpec& spec, const std::string& text) {
  const std::string_view digits = without_plus(text);
  int64_t value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error == std::errc::result_out_of_range) {
    fail(spec, text, "is out of range (must fit in a 64-bit integer)");
  }
  if (error != std::errc() || end != digits.data() + digits.size()) {
    fail(spec, text, "is not an integer");
  }
  check_range(spec, text, static_cast<double>(value));
  return std::to_string(value);
}

std::string canonical_float(const KeySpec& spec, const std::string& text) {
  const std::string_view digits = without_plus(text);
  double value = 0.0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  // Too large or too small in magnitude alike (1e999, 1e-999): a double holds neither.
  if (error == std::errc::result_out_of_range) {
    fail(spec, text, "is beyond what a double holds (magnitudes from about 2e-308 to 1.8e308)");
  }
  if (error != std::errc() || end != digits.data() + digits.size()) {
    fail(spec, text, "is not a number");
  }
  if (!std::isfinite(value)) fail(spec, text, "is not a finite number");
  if (value == 0.0) value = 0.0;  // -0 is written as 0
  check_range(spec, text, value);
  return format_double(value);
}

std::string canonical_bool(const KeySpec& spec, const std::string& text) {
  for (const char* truthy : {"true", "1", "yes", "on"}) {
    if (text == truthy) return "true";
  }
  for (const char* falsy : {"false", "0", "no", "off"}) {
    if (text == falsy) return "false";
  }
  fail(spec, text, "is not a boolean (use true/false, yes/no, on/off or 1/0)");
}

// Strings are kept as given, but must survive a written deck: the INI reader trims spaces
// and cuts at '#', so neither may appear where it would be lost.
std::string canonical_string(const KeySpec& spec, const std::string& text) {
  if (text.empty()) throw UserError(spec.name + " is empty (give a value)");
  if (text.find('#') != std::string::npos) {
    fail(spec, text, "contains '#', which starts a comment in a deck");
  }
  for (const char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      fail(spec, text, "contains a control character");
    }
  }
  if (text.front() == ' ' || text.back() == ' ') {
    fail(spec, text, "starts or ends with a space");
  }
  return text;
}

std::string canonical_choice(const KeySpec& spec, const std::string& text) {
  for (const std::string& choice : spec.choices) {
    if (text == choice) return text;
  }
  fail(spec, text, "is not one of: " + allowed_values_text(spec));
}

}  // namespace

std::string printable(const std::string& text) {
  static const char kHex[] = "0123456789abcdef";
  std::string shown;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      shown += "\\x";
      shown += kHex[byte >> 4];
      shown += kHex[byte & 0xf];
    } else {
      shown += c;
    }
  }
  return shown;
}

std::string canonical_value(const KeySpec& spec, const std::string& text) {
  switch (spec.type) {
    case ValueType::kInt: return canonical_int(spec, text);
    case ValueType::kFloat: return canonical_float(spec, text);
    case ValueType::kBool: return canonical_bool(spec, text);
    case ValueType::kString: return canonical_string(spec, text);
    case ValueType::kChoice: return canonical_choice(spec, text);
  }
  return text;
}

std::string allowed_values_text(const KeySpec& spec) {
  switch (spec.type) {
    case ValueType::kChoice: {
      std::string list;
      for (const std::string& choice : spec.choices) {
        list += (list.empty() ? "" : ", ") + choice;
      }
      return list;
    }
    case ValueType::kBool: return "true, false";
    case ValueType::kString: return "";
    case ValueType::kInt:
    case ValueType::kFloat: break;
  }
  std::string lower;
  std::string upper;
  if (spec.min) lower = (spec.min_exclusive ? "> " : ">= ") + format_bound(spec, *spec.min);
  if (spec.max) upper = (spec.max_exclusive ? "< " : "<= ") + format_bound(spec, *spec.max);
  if (!lower.empty() && !upper.empty()) return lower + " and " + upper;
  return lower + upper;
}

const char* value_type_name(ValueType type) {
  switch (type) {
    case ValueType::kInt: return "int";
    case ValueType::kFloat: return "float";
    case ValueType::kBool: return "bool";
    case ValueType::kString: return "string";
    case ValueType::kChoice: return "choice";
  }
  return "?";
}

}  // namespace trident::io
