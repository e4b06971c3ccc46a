// The sort keys of KeyAverages::table() (opscope/key_averages.h), for a caller that checks one
// before rendering (`opscope analyze --sort-by`) and lists them in its message.
#pragma once

#include <string_view>
#include <vector>

#include "opscope/key_averages.h"

namespace opscope::internal {

// The names TableOptions::sort_by accepts, in the order table()'s error message lists them
// (src/analysis/table.cpp).
std::vector<std::string_view> table_sort_keys();

// The rows of `avg` in the order table() shows them with `sort_by` (empty: first-seen order):
// what a caller needs to say which rows a row_limit leaves out. Throws opscope::Error for an
// unknown key, as table() does.
std::vector<const FunctionEventAvg*> table_order(const KeyAverages& avg, std::string_view sort_by);

}  // namespace opscope::internal
