// Merging the ranks' choice tables (kernels/choice_table.h).
#include "kernels/choice_table.h"

#include <gtest/gtest.h>

namespace trident::kernels {
namespace {

TEST(ChoiceTable, ReadsKeyAndValueOfEachLine) {
  const auto lines = choice_table_lines("a b | 1 2\nno separator\nc|d\n\nkey | value | more\n");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], (std::pair<std::string, std::string>{"a b", "1 2"}));
  EXPECT_EQ(lines[1], (std::pair<std::string, std::string>{"key", "value | more"}));
}

TEST(ChoiceTable, TheFirstTableWithAKeyDecidesIt) {
  const std::string rank0 = "library | v1\nshape 1 | answer 2\n";
  const std::string rank1 = "library | v1\nshape 1 | answer 0\nshape 2 | answer 1\n";
  const std::string rank2 = "shape 3 | answer 1\nshape 2 | answer 2\n";
  EXPECT_EQ(merge_choice_tables({rank0, rank1, rank2}),
            "library | v1\nshape 1 | answer 2\nshape 2 | answer 1\nshape 3 | answer 1\n");
  // Another order of the ranks, another winner: every rank must merge in rank order.
  EXPECT_EQ(merge_choice_tables({rank1, rank0}), "library | v1\nshape 1 | answer 0\nshape 2 | answer 1\n");
}

TEST(ChoiceTable, EmptyTablesMergeToNothing) {
  EXPECT_EQ(merge_choice_tables({}), "");
  EXPECT_EQ(merge_choice_tables({"", ""}), "");
  // Merging a merged table again changes nothing: ranks that adopted it agree on it.
  const std::string merged = merge_choice_tables({"x | 1\n", "y | 2\nx | 3\n"});
  EXPECT_EQ(merge_choice_tables({merged, "y | 5\n"}), merged);
}

}  // namespace
}  // namespace trident::kernels
