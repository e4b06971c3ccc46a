// What the trace-reading subcommands share (analyze, analyze diff, merge): which files a list of
// paths names, the --format values, and writing the result whole or not at all.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "opscope/report_output.h"
#include "opscope/trace_analysis.h"
#include "opscope/trace_reader.h"

namespace opscope::cli {

// The trace files `paths` name: files as given; a directory's .json and .json.gz files (its top
// level, as HTA lists it) in name order, leaving out `exclude` (an output file that may lie
// among them) and the files PyTorch keeps beside its traces that are not Chrome traces
// (import::non_trace_kind(): an execution trace, a raw memory timeline), each with a line in
// `skipped` saying what it is. A file named alone is taken as given (its read then refuses
// it). Throws Error for a path that does not exist or a directory without traces.
std::vector<std::string> trace_files(const std::vector<std::string>& paths,
                                     const std::string& exclude = {},
                                     std::vector<std::string>* skipped = nullptr);

// What is wrong with reading `files` together as the ranks of one job, one line per file that
// repeats an earlier one, naming both: the same file (one path twice, or two links to one
// file), the same bytes (a copy), or, from `claimed` (each file's distributedInfo.rank, -1
// when it has none; empty: not known yet), the same rank. Empty when nothing repeats.
std::vector<std::string> repeated_inputs(const std::vector<std::string>& files,
                                         const std::vector<std::int64_t>& claimed = {});

// The flags that set TraceLimits (--max-gzip-ratio R, --max-event-size BYTES): true when `flag`
// is one, its value taken from `value` and checked (a UsageError otherwise).
bool parse_limit_flag(const std::string& flag, const std::function<std::string()>& value,
                      TraceLimits& limits);
// Their lines for a command's --help (merge takes the first only: it holds a text whole).
extern const char* const kGzipLimitHelp;
extern const char* const kEventLimitHelp;

// How the traces' times are held (TraceTimes, opscope/trace_reader.h): --times MODE, with MODE
// ns (the default: the nanoseconds as written), hta (HTA's default rounding: each event inward
// to whole microseconds) or hta-float (HTA's doubles, as with HTA_DISABLE_NS_ROUNDING=1);
// --hta-rounding is --times hta. The caller checks that --hta-rounding has no value.
TraceTimes parse_times(const std::string& flag, const std::string& text);
// Their lines for a command's --help.
extern const char* const kTimesHelp;
// What a command says on standard error when its times are not the nanoseconds as written
// (empty for kNanoseconds), so that a figure is never taken for the other kind.
std::string times_note(const std::string& command, TraceTimes times);

// text, json, csv or html; otherwise a UsageError naming the value and those allowed.
ReportFormat parse_report_format(const std::string& text);

// `text` to `output`: standard output when it is empty, else the file, written under a
// temporary name renamed when complete (gzip for a name ending in .gz), so that a reader never
// sees half of it and a failure leaves nothing. Throws Error.
void write_output(const std::string& output, const std::string& text, std::ostream& out,
                  const char* what);

// What an HTML page says it was made from: `inputs`, the command line (`opscope ARGS...`,
// each argument quoted for a POSIX shell where it needs it) and now, in UTC (ISO 8601).
ReportPage report_page(const std::vector<std::string>& args, std::vector<std::string> inputs);

}  // namespace opscope::cli
