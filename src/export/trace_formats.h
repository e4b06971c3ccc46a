// The trace formats a result can be written in, one row each, chosen by name or by the
// output's suffix: what export_trace() (opscope/export.h), the Profiler, the TensorBoard
// handler, the on-demand client and the Python package write through.
//
//   const TraceFormat& f = trace_format_for("run.json.gz");   // the Chrome row
//   std::unique_ptr<Sink> sink = open_file_sink("run.json.gz", {.what = f.what});
//   f.write(result, "run.json.gz", *sink);                    // writes and commits
//
// A new format is a file that writes it (as chrome_trace.cpp writes Chrome's JSON) and a row in
// kFormats (trace_formats.cpp): its name, what errors call it, its suffixes and its writer.
// Whether the file is gzip is the sink's business (a name ending in ".gz"), not the format's.
#pragma once

#include <span>
#include <string_view>

#include "export/sink.h"
#include "opscope/result.h"

namespace opscope::internal {

struct TraceFormat {
  std::string_view name;  // "chrome": how callers and --help name it
  std::string_view what;  // "Chrome trace": how error messages name a file of it
  // The endings of a file name that pick it when no format is named (".json", ".json.gz").
  std::span<const std::string_view> suffixes;
  // Writes `result` to `sink` and commits it; `trace_name` is the name the file gives itself
  // (Chrome's "traceName"). Throws what the sink throws, leaving it uncommitted.
  void (*write)(const ProfilerResult& result, std::string_view trace_name, Sink& sink);
};

// Every format, in the order --help and errors list them.
std::span<const TraceFormat> trace_formats();

// The format with the longest suffix that ends `path`; nullptr when none does.
const TraceFormat* trace_format_by_suffix(std::string_view path);

// The format named `name`, or, when `name` is empty, trace_format_by_suffix(path). Throws
// opscope::Error naming the unknown name or suffix and the ones known.
const TraceFormat& trace_format_for(std::string_view path, std::string_view name = {});

}  // namespace opscope::internal
