// Choice tables (choice_table.h).
#include "kernels/choice_table.h"

#include <set>
#include <sstream>

namespace trident::kernels {

namespace {
constexpr const char* kSeparator = " | ";
}  // namespace

std::vector<std::pair<std::string, std::string>> choice_table_lines(const std::string& table) {
  std::vector<std::pair<std::string, std::string>> lines;
  std::istringstream in(table);
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t at = line.find(kSeparator);
    if (at == std::string::npos) continue;
    lines.emplace_back(line.substr(0, at), line.substr(at + 3));
  }
  return lines;
}

std::string merge_choice_tables(const std::vector<std::string>& tables) {
  std::set<std::string> seen;
  std::string merged;
  for (const std::string& table : tables) {
    for (const auto& [key, value] : choice_table_lines(table)) {
      if (!seen.insert(key).second) continue;
      merged += key + kSeparator + value + "\n";
    }
  }
  return merged;
}

}  // namespace trident::kernels
