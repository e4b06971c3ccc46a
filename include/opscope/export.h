// opscope/export.h: writing a ProfilerResult to files.
//
//   opscope::export_chrome_trace(profiler.result(), "trace.json");      // or "trace.json.gz"
//
// The Chrome trace is the Kineto JSON that Perfetto UI, chrome://tracing, TensorBoard and HTA
// read (DESIGN.md, "Chrome trace"). Files are written to a temporary name in the same
// directory and renamed when complete, so a reader never sees half a file and a failed export
// leaves nothing behind. Failures throw opscope::Error naming the path and the reason.
#pragma once

#include <string>
#include <string_view>

#include "opscope/result.h"

namespace opscope {

// Writes the Kineto-style Chrome trace to `path`; gzip when the path ends in ".gz".
// `trace_name` is written as "traceName" (the path when empty).
void export_chrome_trace(const ProfilerResult& result, const std::string& path);

// The same document as a string (uncompressed).
std::string chrome_trace_json(const ProfilerResult& result, const std::string& trace_name = "");

// Returns true when `text` is one complete JSON value (RFC 8259), else false and, when
// `error` is given, a message with the byte offset of the first problem.
bool is_valid_json(std::string_view text, std::string* error = nullptr);

}  // namespace opscope
