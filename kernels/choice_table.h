// Choices a backend makes on each rank by measuring (cuBLASLt's kernel per product shape under
// run.matmul_algorithms = timed), as text, so that the ranks can agree on one set and a
// checkpoint can keep it: a restart then runs the kernels the uninterrupted run ran. One choice a
// line, "KEY | VALUE", in the backend's own words on either side.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace trident::kernels {

// The lines of a table as (key, value) pairs, in order; a line without " | " is passed over.
std::vector<std::pair<std::string, std::string>> choice_table_lines(const std::string& table);

// One table of several (every rank's, in rank order): each key's line from the first table that
// has it, in the order first seen. So every rank computes the same table from the same inputs.
std::string merge_choice_tables(const std::vector<std::string>& tables);

}  // namespace trident::kernels
