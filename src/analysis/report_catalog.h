// The report catalog's rows (report_catalog.cpp): one per file of src/analysis/reports/, each
// defined beside the report it runs. A report is a file there that defines
//
//   const ReportEntry& <file name>_report_row();
//
// (src/CMakeLists.txt lists the files into the generated reports.inc, which the catalog reads),
// so that a new report needs no edit of the catalog, the public header, the HTML page or the
// Python package. The row holds what every front end needs: the name and summary that
// `opscope analyze --help` lists, what the report reads of a trace, the ReportOptions it
// reads, the HTA methods the Python package makes from it, and its charts as data.
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "opscope/trace_analysis.h"

namespace opscope::internal {

using Ranks = std::span<const std::shared_ptr<const ProfilerResult>>;

// One part of a chart's label: `text`, then the cell of `column` (none when empty).
struct ChartLabel {
  std::string_view text = {};
  std::string_view column = {};
};

// One colour of a chart: a part of a stacked bar, with its legend name.
struct ChartPart {
  std::string_view name = {};
  std::string_view color = {};  // a CSS colour
  // The column that holds the part's value on each row (a "wide" table), or empty when the
  // table is "long": then ReportChart::series names the part on each row.
  std::string_view column = {};
};

// How the HTML page (src/export/report_html.cpp) charts one table of a report, as data: the
// page knows how to draw each kind, the row says from which columns. A table lacking a column
// named here, or without rows, gets no chart (only its table).
struct ReportChart {
  enum class Kind {
    // Horizontal bars, one per label, stacked from `parts`. A wide table (parts name their
    // columns) has a bar per row; a long one (`series` and `value` set) a bar per run of rows
    // with the same label, each row adding its `value` to the part its `series` cell names.
    kStackedBars,
    // Per value of `group` (in first-row order), a box per row: 25% to 75% with the median,
    // whiskers from min to max, on one scale per group.
    kBoxes,
  };
  std::string_view table = {};  // the Report::name charted ("kernel_type")
  Kind kind = Kind::kStackedBars;
  std::string_view title = {};
  std::string_view unit = {};              // of the values ("%", "us")
  std::span<const ChartLabel> label = {};  // of each bar or box
  // kStackedBars
  std::span<const ChartPart> parts = {};
  std::string_view series = {};  // long tables: the column naming the part
  std::string_view value = {};   // long tables: the column of the value
  // kBoxes: the columns of the groups and of each box's five numbers.
  std::string_view group = {};
  std::string_view min = {}, p25 = {}, median = {}, p75 = {}, max = {};
};

// One report of the catalog.
struct ReportEntry {
  ReportKind kind = {};  // what report_kinds() lists
  // Where the report stands in report_kinds() (and so in --help and its outputs' order):
  // ascending. The files are found in name order, which is not the order the catalog shows.
  int order = 0;
  std::vector<Report> (*run)(Ranks, const ReportOptions&) = nullptr;
  std::span<const ReportChart> charts = {};  // none: the HTML page shows its tables only
};

// A report of one table as a run function: ReportEntry{..., .run = one_table<f>}.
template <Report (*F)(Ranks, const ReportOptions&)>
std::vector<Report> one_table(Ranks ranks, const ReportOptions& options) {
  std::vector<Report> out;
  out.push_back(F(ranks, options));
  return out;
}

// Every row, in report_kinds() order.
std::span<const ReportEntry* const> report_entries();

// The chart the catalog gives the table named `table` (Report::name), or nullptr.
const ReportChart* chart_of(std::string_view table);

}  // namespace opscope::internal
