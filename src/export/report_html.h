// The HTML form of analysis reports (format_reports with ReportFormat::kHtml).
#pragma once

#include <span>
#include <string>

#include "opscope/report_output.h"
#include "opscope/trace_analysis.h"

namespace opscope::internal {

// One self-contained page: each report as a table, and as a chart where it reads better
// (temporal, idle, kernel_type, kernel-dist), after what `page` says it was made from and a
// table of contents.
std::string reports_html(std::span<const Report> reports, const ReportPage& page);

}  // namespace opscope::internal
