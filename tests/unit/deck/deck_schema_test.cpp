// The schema itself: defaults valid and canonical, names well formed, and the reference in
// docs/input-deck.md identical to the one generated from the schema.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "io/deck_schema.h"  // deck_schema, deck_sections, deck_reference_markdown

namespace trident::io {
namespace {

TEST(DeckSchema, DefaultsAreValidAndCanonical) {
  for (const KeySpec& spec : deck_schema()) {
    EXPECT_EQ(canonical_value(spec, spec.default_text), spec.default_text) << spec.name;
  }
}

TEST(DeckSchema, KeysAreUniqueGroupedBySectionAndDescribedOnOneLine) {
  std::set<std::string> names;
  size_t section = 0;
  for (const KeySpec& spec : deck_schema()) {
    EXPECT_TRUE(names.insert(spec.name).second) << "twice: " << spec.name;
    // Keys of one section are together, sections in deck_sections() order.
    while (section < deck_sections().size() &&
           deck_sections()[section].name != section_of(spec.name)) {
      ++section;
    }
    EXPECT_LT(section, deck_sections().size()) << spec.name << " is out of section order";
    EXPECT_EQ(spec.name.find('.'), spec.name.rfind('.')) << spec.name;
    EXPECT_FALSE(spec.description.empty()) << spec.name;
    EXPECT_EQ(spec.description.find('\n'), std::string::npos) << spec.name;
    EXPECT_EQ(spec.type == ValueType::kChoice, !spec.choices.empty()) << spec.name;
  }
}

TEST(DeckSchema, NearestKeyForgivesTyposButNotNonsense) {
  EXPECT_EQ(nearest_key("train.stepz"), "train.steps");
  EXPECT_EQ(nearest_key("model.hiden"), "model.hidden");
  EXPECT_EQ(nearest_key("train.lr"), "optim.lr");
  EXPECT_EQ(nearest_key("banana.split"), "");
}

TEST(DeckSchema, DocsCarryTheGeneratedReference) {
  const std::string docs_path = std::string(TRIDENT_SOURCE_DIR) + "/docs/input-deck.md";
  std::ifstream docs_file(docs_path);
  ASSERT_TRUE(docs_file) << "cannot read " << docs_path;
  std::stringstream buffer;
  buffer << docs_file.rdbuf();
  const std::string docs = buffer.str();

  const std::string begin = "<!-- BEGIN GENERATED: deck keys -->";
  const std::string end = "<!-- END GENERATED: deck keys -->";
  const size_t begin_at = docs.find(begin);
  const size_t end_at = docs.find(end);
  ASSERT_NE(begin_at, std::string::npos) << docs_path << " lacks the line " << begin;
  ASSERT_NE(end_at, std::string::npos) << docs_path << " lacks the line " << end;
  ASSERT_LT(begin_at, end_at);

  const std::string block = begin + "\n\n" + deck_reference_markdown() + "\n" + end;
  const std::string found = docs.substr(begin_at, end_at + end.size() - begin_at);
  if (found != block) {
    const std::string block_path = std::string(TRIDENT_BINARY_DIR) + "/deck_reference.md";
    std::ofstream(block_path) << block << "\n";
    const std::string fixed_path = std::string(TRIDENT_BINARY_DIR) + "/input-deck.md";
    std::ofstream(fixed_path) << docs.substr(0, begin_at) << block
                              << docs.substr(end_at + end.size());
    ADD_FAILURE() << "docs/input-deck.md is out of date with the deck schema "
                  << "(io/deck_schema.cpp). Regenerate it: replace the lines from " << begin
                  << " to " << end << " with the contents of " << block_path
                  << ", or simply: cp " << fixed_path << " " << docs_path;
  }
}

}  // namespace
}  // namespace trident::io
