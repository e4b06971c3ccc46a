// report_kinds(), run_report() and what_reports_read(): every report by name, and what a read
// of a trace must keep for a list of them, for the command line (tools/analyze_command.cpp),
// the HTML page and the Python package alike. The rows live beside
// their reports, one file each in src/analysis/reports/ (report_catalog.h); the build lists the
// files into reports.inc, so a new report is a new file and no edit here.
#include "analysis/report_catalog.h"

#include <algorithm>
#include <string>

#include "opscope/error.h"
#include "opscope/trace_reader.h"

namespace opscope::internal {

#define OPSCOPE_REPORT(name) const ReportEntry& name##_report_row();
#include "reports.inc"
#undef OPSCOPE_REPORT

std::span<const ReportEntry* const> report_entries() {
  static const std::vector<const ReportEntry*> entries = [] {
    std::vector<const ReportEntry*> v = {
#define OPSCOPE_REPORT(name) &name##_report_row(),
#include "reports.inc"
#undef OPSCOPE_REPORT
    };
    std::stable_sort(v.begin(), v.end(), [](const ReportEntry* a, const ReportEntry* b) {
      return a->order < b->order;
    });
    return v;
  }();
  return entries;
}

const ReportChart* chart_of(std::string_view table) {
  for (const ReportEntry* e : report_entries()) {
    for (const ReportChart& c : e->charts) {
      if (c.table == table) return &c;
    }
  }
  return nullptr;
}

}  // namespace opscope::internal

namespace opscope {

std::span<const ReportKind> report_kinds() {
  static const std::vector<ReportKind> kinds = [] {
    std::vector<ReportKind> v;
    for (const internal::ReportEntry* e : internal::report_entries()) v.push_back(e->kind);
    return v;
  }();
  return kinds;
}

std::vector<Report> run_report(std::string_view name, internal::Ranks ranks,
                               const ReportOptions& options) {
  for (const internal::ReportEntry* e : internal::report_entries()) {
    if (e->kind.name == name) return e->run(ranks, options);
  }
  std::string allowed;
  for (const internal::ReportEntry* e : internal::report_entries())
    allowed += (allowed.empty() ? "" : ", ") + std::string(e->kind.name);
  throw Error("unknown report '" + std::string(name) + "'; reports: " + allowed);
}

TraceReadOptions what_reports_read(std::span<const std::string> reports) {
  TraceReadOptions read;
  read.cpu_range_args = false;
  read.flows = false;
  read.cpu_ranges = false;
  read.other_args = false;
  for (const ReportKind& k : report_kinds()) {
    if (std::find(reports.begin(), reports.end(), k.name) == reports.end()) continue;
    read.cpu_range_args = read.cpu_range_args || k.reads_cpu_range_args;
    read.flows = read.flows || k.reads_flows;
    read.cpu_ranges = read.cpu_ranges || k.reads_cpu_ranges || k.reads_cpu_range_args;
    read.other_args = read.other_args || k.reads_other_args;
  }
  return read;
}

}  // namespace opscope
