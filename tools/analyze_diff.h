// `opscope analyze diff CONTROL TEST`: Holistic Trace Analysis's TraceDiff on the command line
// (trace_diff() of opscope/trace_analysis.h). tools/analyze_command.cpp hands it every command
// line whose first argument after `analyze` is `diff`.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace opscope::cli {

// The text of `opscope analyze diff --help`.
std::string analyze_diff_help();

// Runs `args` ("analyze", "diff", ...): prints the tables to `out` or --output, messages to
// `err`; returns the exit code (0, 1 for a trace that cannot be read or lacks the rank or
// iteration asked for). Throws UsageError for a bad command line.
int run_analyze_diff(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace opscope::cli
