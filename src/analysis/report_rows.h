// A report whose rows come rank by rank, put in rank order: what the reports over HTA's counters
// (src/analysis/reports/queue.cpp, counters.cpp) are built with.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "analysis/gpu_work.h"
#include "opscope/trace_analysis.h"

namespace opscope::internal {

using Ranks = std::span<const std::shared_ptr<const ProfilerResult>>;

inline std::int64_t rank_at(Ranks ranks, std::size_t i, const ReportOptions& options) {
  return opscope::rank_of(*ranks[i], options.first_position + static_cast<std::int64_t>(i));
}

// A row of cells, each made in place: a braced list would copy every cell out of an
// initializer_list, which is slower and which g++ 14 misreads as a read of an uninitialized
// string (-Wmaybe-uninitialized inside std::variant).
template <typename... Cells>
std::vector<ReportCell> make_row(Cells&&... cells) {
  std::vector<ReportCell> row;
  row.reserve(sizeof...(Cells));
  (row.emplace_back(std::forward<Cells>(cells)), ...);
  return row;
}

// A report whose rows come rank by rank, in rank order: add_rows(result, rank, drop_last, add)
// calls add(row) for each row of one rank.
template <typename AddRows>
Report per_rank_report(std::string name, std::vector<std::string> columns, Ranks ranks,
                       const ReportOptions& options, AddRows&& add_rows) {
  Report report;
  report.name = std::move(name);
  report.columns = std::move(columns);
  std::vector<std::pair<std::int64_t, std::vector<ReportCell>>> rows;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const std::int64_t rank = rank_at(ranks, i, options);
    add_rows(*ranks[i], rank, drop_last_step(*ranks[i], options), [&](std::vector<ReportCell> row) {
      rows.push_back({rank, std::move(row)});
    });
  }
  sort_by_rank(rows);
  for (auto& [rank, row] : rows) report.rows.push_back(std::move(row));
  return report;
}

}  // namespace opscope::internal
