// opscope/report_output.h: the reports of opscope/trace_analysis.h as files a person reads,
// and traces written back with HTA's counters.
//
//   std::vector<opscope::Report> reports = opscope::run_report("idle", ranks);
//   std::cout << opscope::format_reports(reports, opscope::ReportFormat::kText);
//
// Both throw opscope::Error naming the file and the reason; files are written under a
// temporary name and renamed when complete.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "opscope/result.h"
#include "opscope/trace_analysis.h"
#include "opscope/trace_reader.h"

namespace opscope {

// HTA's generate_trace_with_counters (opscope/trace_analysis.h has the series), for every
// rank: writes trace_paths[i] (the file
// ranks[i] was read from) to out_paths[i] with the queue-length and copy-bandwidth time
// series appended to its traceEvents as counter events ("ph":"C"), as HTA writes them:
//   {"pid": <GPU pid>, "ts": <us>, "args": {"Queue Length": 3}, "ph": "C",
//    "name": "Queue Length", "id": <stream>}
//   {"pid": <GPU pid>, "ts": <us>, "args": {"Memcpy BW": 12.5}, "ph": "C", "name": "Memcpy DtoH"}
// at the trace's own times. Every byte of the original outside the end of traceEvents is kept
// as it was; the output is gzip when its name ends in ".gz" (HTA gzips whatever the name).
// Each file is written under a temporary name and all are renamed at the end, so on failure
// (an Error naming the file and the reason) no output is left half written. The files are read
// again within `limits`, as the ranks were read. Returns how many counter events each file
// got.
std::vector<std::size_t> write_traces_with_counters(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                                std::span<const std::string> trace_paths,
                                std::span<const std::string> out_paths,
                                const ReportOptions& options = {}, const TraceLimits& limits = {});

// One flow arrow of the overlaid critical-path trace: from the start (or end) of one event to
// the start (or end) of another, as HTA's overlay_critical_path_analysis draws a CPEdge.
struct CriticalPathFlow {
  std::int32_t from_event = 0;  // index into r.events()
  bool from_start = true;
  std::int32_t to_event = 0;
  bool to_start = true;
  CriticalPathEdgeType type = CriticalPathEdgeType::kOperatorKernel;
  std::int64_t weight_us = 0;  // HTA writes int(weight)
  bool critical = false;
};

// HTA's overlay_critical_path_analysis output for one rank: the trace's complete events with
// "args.critical": 1 on `critical_events`, each flow as a "ph":"s" / "ph":"f" pair named
// "critical_path" whose args hold weight, critical and type (HTA's edge type value). With
// `only_critical_events`, complete events that are neither critical nor user annotations or
// Python functions are left out. Written gzip (as HTA writes it) through a temporary name; an
// Error names the file and the reason.
void write_critical_path_trace(const ProfilerResult& r, const std::string& out_path,
                               std::span<const std::int32_t> critical_events,
                               std::span<const CriticalPathFlow> flows, bool only_critical_events);

// What an HTML page of reports says it was made from, by what command and when (every field
// may be empty; the page then leaves it out).
struct ReportPage {
  std::vector<std::string> inputs;  // the trace files read
  std::string command;              // the command line, as it was typed
  std::string made_at;              // when, as the caller writes it (the CLI: UTC, ISO 8601)
};

// Reports as text (an aligned table each; a text over 100 bytes, such as a templated kernel's
// name, shortened in the middle with "...", keeping where names of one column that would look
// alike differ), JSON (one object: {"report": [{"column": value, ...}, ...], ...}, the columns
// HTA's DataFrames have), CSV (a "# report" line before each table when there are several) or
// HTML (one self-contained page: `page`, a table of contents, every table with long names
// clipped to three lines and whole on hover, the ops table in torch's units, and charts of the
// temporal breakdown, idle time, kernel types and kernel durations across ranks).
std::string format_reports(std::span<const Report> reports, ReportFormat format,
                           const ReportPage& page = {});

}  // namespace opscope
