// Rewrites a CUDA source into C++ for the CPU emulation (tests/emulation/cuda_emulation.h):
//
//   kernel<T><<<grid, block, bytes, stream>>>(a, b)
//     -> ::cuda_emu::launch("kernel<T>", ::cuda_emu::LaunchConfig(grid, block, bytes, stream),
//                           [](auto&... emulated_argument) { kernel<T>(emulated_argument...); }, a, b)
//   extern __shared__ float shared[];
//     -> float* shared = static_cast<float*>(::cuda_emu::dynamic_shared_memory());
//   __shared__ float tile[64][65];
//     -> static char emulated_shared_tile = 0;
//        auto& tile = ::cuda_emu::block_shared<float[64][65]>(&emulated_shared_tile);
//
// The last gives each block its own heap allocation of the exact size, filled with 0xff bytes
// (NaN) as uninitialised shared memory may hold anything: an index past the end of a shared
// array is then AddressSanitizer's heap-buffer-overflow, and a read before any write is NaN,
// where a thread-local static would be neither. Headers (.cuh) are translated too, for the
// declarations inside device functions (block_reduce.cuh).
//
// Everything else is copied as it is, and every line keeps its number (the newlines of a
// rewritten span follow its replacement), so compiler messages and the emulation's own name
// the original file and line: a #line directive at the top names the .cu file.
//
// Usage: translate_launches IN.cu OUT.cpp
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace {

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == ':'; }

std::string newlines_in(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') out += '\n';
  }
  return out;
}

std::string collapse_space(const std::string& text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

// The start of the callee expression that ends just before `end` (names, ::, balanced <...>).
std::size_t callee_start(const std::string& s, std::size_t end) {
  std::size_t i = end;
  while (i > 0 && std::isspace(static_cast<unsigned char>(s[i - 1])) != 0) --i;
  while (i > 0) {
    const char c = s[i - 1];
    if (c == '>') {
      int depth = 0;
      do {
        if (s[i - 1] == '>') ++depth;
        if (s[i - 1] == '<') --depth;
        --i;
      } while (i > 0 && depth > 0);
      while (i > 0 && std::isspace(static_cast<unsigned char>(s[i - 1])) != 0) --i;
    } else if (is_name_char(c)) {
      --i;
    } else {
      break;
    }
  }
  return i;
}

// The index just past the bracket that closes the one at `open`.
std::size_t matching(const std::string& s, std::size_t open, char left, char right) {
  int depth = 0;
  for (std::size_t i = open; i < s.size(); ++i) {
    if (s[i] == left) ++depth;
    if (s[i] == right && --depth == 0) return i + 1;
  }
  throw std::runtime_error("unbalanced " + std::string(1, left) + " at offset " + std::to_string(open));
}

// `__shared__ TYPE NAME DIMS` (collapsed, without `__shared__`): the block's own copy.
std::string block_shared(const std::string& declaration) {
  if (declaration.find(',') != std::string::npos || declaration.find('=') != std::string::npos) {
    throw std::runtime_error("one __shared__ variable per declaration, without an initialiser: " + declaration);
  }
  const std::size_t bracket = declaration.find('[');
  const std::string head = declaration.substr(0, bracket);  // TYPE NAME
  const std::string dims = bracket == std::string::npos ? "" : declaration.substr(bracket);
  std::size_t end = head.size();
  while (end > 0 && head[end - 1] == ' ') --end;
  std::size_t start = end;
  while (start > 0 && is_name_char(head[start - 1]) && head[start - 1] != ':') --start;
  const std::string name = head.substr(start, end - start);
  std::string type = head.substr(0, start);
  while (!type.empty() && type.back() == ' ') type.pop_back();
  if (name.empty() || type.empty()) throw std::runtime_error("cannot read the shared declaration: " + declaration);
  const std::string key = "emulated_shared_" + name;
  return "static char " + key + " = 0; auto& " + name + " = ::cuda_emu::block_shared<" + type + dims + ">(&" + key +
         ");";
}

std::string translate(const std::string& in) {
  std::string out;
  std::size_t i = 0;
  while (i < in.size()) {
    // Comments and string literals pass through untouched.
    if (in.compare(i, 2, "//") == 0) {
      const std::size_t end = in.find('\n', i);
      const std::size_t stop = end == std::string::npos ? in.size() : end;
      out.append(in, i, stop - i);
      i = stop;
      continue;
    }
    if (in.compare(i, 2, "/*") == 0) {
      const std::size_t end = in.find("*/", i + 2);
      const std::size_t stop = end == std::string::npos ? in.size() : end + 2;
      out.append(in, i, stop - i);
      i = stop;
      continue;
    }
    if (in[i] == '"') {
      std::size_t j = i + 1;
      while (j < in.size() && in[j] != '"') j += in[j] == '\\' ? 2 : 1;
      out.append(in, i, j + 1 - i);
      i = j + 1;
      continue;
    }
    if (in.compare(i, 17, "extern __shared__") == 0) {
      const std::size_t semicolon = in.find(';', i);
      const std::string declaration = collapse_space(in.substr(i + 17, semicolon - i - 17));  // "float shared[]"
      const std::size_t bracket = declaration.rfind("[]");
      const std::size_t space = declaration.rfind(' ', bracket);
      if (bracket == std::string::npos || space == std::string::npos) {
        throw std::runtime_error("cannot read the dynamic shared declaration: " + declaration);
      }
      const std::string type = declaration.substr(0, space);
      const std::string name = declaration.substr(space + 1, bracket - space - 1);
      out += type + "* " + name + " = static_cast<" + type + "*>(::cuda_emu::dynamic_shared_memory());";
      out += newlines_in(in.substr(i, semicolon - i));
      i = semicolon + 1;
      continue;
    }
    if (in.compare(i, 10, "__shared__") == 0 && (i == 0 || !is_name_char(in[i - 1])) &&
        (i + 10 >= in.size() || !is_name_char(in[i + 10]))) {
      const std::size_t semicolon = in.find(';', i);
      if (semicolon == std::string::npos) throw std::runtime_error("a __shared__ declaration without its ';'");
      out += block_shared(collapse_space(in.substr(i + 10, semicolon - i - 10)));
      out += newlines_in(in.substr(i, semicolon - i));
      i = semicolon + 1;
      continue;
    }
    if (in.compare(i, 3, "<<<") == 0) {
      const std::size_t config_end = in.find(">>>", i);
      if (config_end == std::string::npos) throw std::runtime_error("<<< without >>>");
      std::size_t open = config_end + 3;
      while (open < in.size() && std::isspace(static_cast<unsigned char>(in[open])) != 0) ++open;
      if (open >= in.size() || in[open] != '(') throw std::runtime_error("a launch without its argument list");
      const std::size_t close = matching(in, open, '(', ')');
      // The callee has already been copied to out: take it back.
      const std::size_t start = callee_start(out, out.size());
      const std::string callee_text = out.substr(start);
      out.resize(start);
      const std::string callee = collapse_space(callee_text);
      const std::string config = in.substr(i + 3, config_end - i - 3);
      const std::string args = in.substr(open + 1, close - open - 2);
      const bool no_args = collapse_space(args).empty();
      out += "::cuda_emu::launch(\"" + callee + "\", ::cuda_emu::LaunchConfig(" + collapse_space(config) +
             "), [](auto&... emulated_argument) { " + callee + "(emulated_argument...); }" +
             (no_args ? "" : ", " + args) + ")";
      out += newlines_in(callee_text) + newlines_in(config) + newlines_in(in.substr(config_end, open - config_end));
      i = close;
      continue;
    }
    out += in[i++];
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: translate_launches IN.cu OUT.cpp\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::cerr << "translate_launches: cannot read " << argv[1] << "\n";
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    const std::string translated = "#line 1 \"" + std::string(argv[1]) + "\"\n" + translate(text.str());
    const std::string temporary = std::string(argv[2]) + ".tmp";
    {
      std::ofstream out(temporary);
      out << translated;
      if (!out) throw std::runtime_error("cannot write " + temporary);
    }
    if (std::rename(temporary.c_str(), argv[2]) != 0) throw std::runtime_error("cannot write " + std::string(argv[2]));
  } catch (const std::exception& e) {
    std::cerr << "translate_launches: " << argv[1] << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
