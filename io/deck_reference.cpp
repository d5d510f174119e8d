// The Markdown reference of the deck keys, generated from the schema; docs/input-deck.md
// carries a copy that a unit test keeps identical.
#include <string>

#include "io/deck_schema.h"  // deck_schema, deck_sections, deck_reference_markdown

namespace trident::io {
namespace {

// Text for a Markdown table cell: '|' would end the cell.
std::string table_cell(const std::string& text) {
  std::string cell;
  for (const char c : text) {
    if (c == '|') cell += '\\';
    cell += c;
  }
  return cell;
}

}  // namespace

std::string deck_reference_markdown() {
  std::string markdown;
  for (const SectionSpec& section : deck_sections()) {
    if (!markdown.empty()) markdown += "\n";
    markdown += "### [" + section.name + "]\n\n" + section.description + "\n\n";
    markdown += "| Key | Type | Default | Allowed values | Description |\n";
    markdown += "|---|---|---|---|---|\n";
    for (const KeySpec& spec : deck_schema()) {
      if (section_of(spec.name) != section.name) continue;
      const std::string allowed = allowed_values_text(spec);
      markdown += "| `" + spec.name + "` | " + value_type_name(spec.type) + " | `" +
                  spec.default_text + "` | ";
      if (allowed.empty()) {
        markdown += "any";
      } else {
        markdown += '`';
        markdown += table_cell(allowed);
        markdown += '`';
      }
      markdown += " | " + table_cell(spec.description) + " |\n";
    }
  }
  return markdown;
}

}  // namespace trident::io
