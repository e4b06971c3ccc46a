// opscope/export.h: writing a ProfilerResult to files.
//
//   opscope::export_chrome_trace(profiler.result(), "trace.json");      // or "trace.json.gz"
//
// The Chrome trace is the Kineto JSON that Perfetto UI, chrome://tracing, TensorBoard and HTA
// read (DESIGN.md, "Chrome trace"). Files are written to a temporary name in the same
// directory and renamed when complete, so a reader never sees half a file and a failed export
// leaves nothing behind. Failures throw opscope::Error naming the path and the reason.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "opscope/result.h"
#include "opscope/trace_analysis.h"
// Reading traces (read_trace, read_traces, TraceReadOptions) was declared here; it has a header
// of its own now, included so that code written against this one still compiles.
#include "opscope/trace_reader.h"

namespace opscope {

// Writes the Kineto-style Chrome trace to `path`; gzip when the path ends in ".gz".
// `trace_name` is written as "traceName" (the path when empty).
void export_chrome_trace(const ProfilerResult& result, const std::string& path);

// The same document as a string (uncompressed).
std::string chrome_trace_json(const ProfilerResult& result, const std::string& trace_name = "");

// Writes the call stacks of `result` in the collapsed-stacks format that flamegraph.pl and
// speedscope read: one line per event with a stack, frames root first joined by ';', a space,
// and the event's `metric` in integer microseconds ("self_cpu_time_total", or
// "self_cuda_time_total"). Throws opscope::Error for another metric, or when the result was
// recorded without with_stack.
void export_stacks(const ProfilerResult& result, const std::string& path,
                   std::string_view metric = "self_cpu_time_total");

// Writes the memory timeline of `device` ("cpu", "cuda:0"), in the format the suffix names:
//   .html         a page with a stacked-area plot of memory by category over time
//   .json         [times_us, sizes] with one list of bytes per category at each time
//   .json.gz      the same, gzipped
//   .raw.json.gz  [timestamp_ns, action, bytes, category] per change
// Throws opscope::Error for an unknown suffix or device, or when the result lacks one of
// record_shapes, profile_memory, with_stack (PyTorch needs the same three).
void export_memory_timeline(const ProfilerResult& result, const std::string& path,
                            std::string_view device = "cpu");

// Returns true when `text` is one complete JSON value (RFC 8259), else false and, when
// `error` is given, a message with the byte offset of the first problem.
bool is_valid_json(std::string_view text, std::string* error = nullptr);

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
// (an Error naming the file and the reason) no output is left half written.
void write_traces_with_counters(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                                std::span<const std::string> trace_paths,
                                std::span<const std::string> out_paths,
                                const ReportOptions& options = {});

// Reports as text (an aligned table each; a text over 100 bytes, such as a templated kernel's
// name, shortened in the middle with "..."), JSON (one object: {"report": [{"column": value,
// ...}, ...], ...}, the columns HTA's DataFrames have), CSV (a "# report" line before each
// table when there are several) or HTML (one self-contained page: every table, and charts of
// the temporal breakdown, idle time, kernel types and kernel durations across ranks).
std::string format_reports(std::span<const Report> reports, ReportFormat format);

}  // namespace opscope
