// Files that sit beside Kineto traces but are not traces (importer.h): told apart by their first
// bytes and refused with a message that says what they are, before any of the file is parsed.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "import/importer.h"
#include "import/stream_splitter.h"
#include "import/trace_text.h"

namespace opscope::import {
namespace {

std::size_t skip_whitespace(std::string_view text, std::size_t i) {
  while (i < text.size() &&
         (text[i] == ' ' || text[i] == '\n' || text[i] == '\r' || text[i] == '\t')) {
    ++i;
  }
  return i;
}

// Whether `text` opens an array as the value of the top-level key `key`: the cutter's own walk
// of strings, escapes and nesting, told to look for that key (in pieces longer than the text: it
// is never cut).
bool opens_top_level_array(std::string_view text, std::string_view key) {
  StreamSplitter splitter(text.size() + 1, key);
  splitter.feed(text, [](std::string&, std::size_t, std::int64_t) {});
  return splitter.opened();
}

}  // namespace

// PyTorch's ExecutionTraceObserver writes {"schema": ..., "pid": ..., "nodes": [...], ...}: a
// top-level "nodes" array among the first keys, and no "traceEvents" array in the head (a
// trace that has both is read as a Chrome trace, as it always was). Only the top-level keys
// count: a "nodes" inside a value is not one.
bool sniff_execution_trace(std::string_view head) {
  return opens_top_level_array(head, "nodes") && !opens_top_level_array(head, "traceEvents");
}

void refuse_execution_trace(const TraceText& text, ProfilerResult::Builder&,
                            const TraceReadOptions&) {
  fail(text.path, std::string(kExecutionTrace));
}

// export_memory_timeline's .raw.json.gz (PyTorch's too): an array of
// [timestamp, action, bytes, category] arrays, so "[[" and a number.
bool sniff_raw_memory_timeline(std::string_view head) {
  std::size_t i = skip_whitespace(head, 0);
  if (i == head.size() || head[i] != '[') return false;
  i = skip_whitespace(head, i + 1);
  if (i == head.size() || head[i] != '[') return false;
  i = skip_whitespace(head, i + 1);
  return i < head.size() && (head[i] == '-' || (head[i] >= '0' && head[i] <= '9'));
}

void refuse_raw_memory_timeline(const TraceText& text, ProfilerResult::Builder&,
                                const TraceReadOptions&) {
  fail(text.path, std::string(kRawMemoryTimeline));
}

}  // namespace opscope::import
