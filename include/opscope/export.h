// opscope/export.h: writing a ProfilerResult to files, and reading one back from a trace.
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

namespace opscope {

// Writes the trace of `result` to `path` in the format named `format`, or, when it is empty,
// in the format the path's suffix names; gzip when the path ends in ".gz". The formats:
//   "chrome"  .json, .json.gz   the Kineto-style Chrome trace (below)
// Throws opscope::Error for an unknown format or suffix (naming the ones known), or when the
// file cannot be written.
void export_trace(const ProfilerResult& result, const std::string& path,
                  std::string_view format = {});

// Writes the Kineto-style Chrome trace to `path`, whatever its suffix; gzip when the path ends
// in ".gz". The path is written as "traceName". export_trace(result, path, "chrome").
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

// Reads a Chrome / Kineto trace (.json, or .json.gz by its content) as PyTorch's profiler or
// opscope wrote it: CPU ops and user annotations as ranges, GPU kernels, copies and sets on
// their streams' threads, runtime and driver calls, flows, processes and threads with their
// names, the rank (distributedInfo.rank), the top-level keys as metadata; every other event
// category and every arg without a field of its own is kept (ProfilerResult::other_args), so
// an export writes them back. Timestamps keep their nanoseconds. Throws opscope::Error naming the
// file, the byte offset and what was expected when the file is not a trace.
// The text is read in 64 KiB pieces, so the memory a read takes is the model it builds, not the
// text. On a machine with more than one core, a gzip text is inflated by a second thread
// beside the reading, and a plain text of 1 MiB or more has its pieces parsed on two threads.
std::shared_ptr<const ProfilerResult> read_trace(const std::string& path);

// What a read keeps of a trace: everything by default. A caller that knows what it will ask of
// the model (`opscope analyze`, for the reports it was given: ReportKind says what each reads)
// may leave out what nothing will read, which takes less time and memory. What is left out is
// skipped as the text is walked: JSON that is malformed only inside it is not noticed.
struct TraceReadOptions {
  // The args of CPU ranges (operators, user annotations): input shapes and types, External
  // id, sequence numbers and the args no field holds. Their times, names and threads stay.
  bool cpu_range_args = true;
  // Flow events ("s", "t", "f": Kineto's launch and forward-backward arrows).
  bool flows = true;
  // CPU ranges (operators, user annotations) other than the profiler steps ("ProfilerStep#N"),
  // most of a trace's events. One left out is left as soon as its phase, category and name
  // are read; only its pid and tid are read further, so that the recording process is still
  // the one with the most CPU ranges (ProfilerResult::pid()).
  bool cpu_ranges = true;
  // The args of the events that no field of the model holds (ProfilerResult::other_args: a
  // kernel's occupancy, a copy's bandwidth, what another tool added), kept so that an export
  // writes them back.
  bool other_args = true;
};

// read_trace() of every path, on up to `threads` threads at once (0: one per core), in the
// order given, keeping what `options` says. Throws the error of the first path (in that order)
// that could not be read. A trace gets a second thread (inflating gzip, or parsing a plain
// text of 1 MiB or more) only when there are fewer paths than `threads`.
std::vector<std::shared_ptr<const ProfilerResult>> read_traces(
    std::span<const std::string> paths, unsigned threads = 0, const TraceReadOptions& options = {});

// What a read must keep for the reports named `reports` (ReportKind::name, as run_report()
// takes them; unknown names ask for nothing): what `opscope analyze` reads for its --report.
TraceReadOptions what_reports_read(std::span<const std::string> reports);

}  // namespace opscope
