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


}  // namespace opscope
