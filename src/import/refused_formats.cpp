// Files that sit beside Kineto traces but are not traces (importer.h): told apart by their first
// bytes and refused with a message that says what they are, before any of the file is parsed.
#include <cstddef>
#include <string>
#include <string_view>

#include "import/importer.h"
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

}  // namespace

// PyTorch's ExecutionTraceObserver writes {"schema": ..., "pid": ..., "nodes": [...], ...}: a
// top-level object with "nodes" among its first keys, and no "traceEvents" in the head (a trace
// that has both is read as a Chrome trace, as it always was). Only the keys of the top-level
// object are looked at, so a "nodes" inside a value is not one.
bool sniff_execution_trace(std::string_view head) {
  std::size_t i = skip_whitespace(head, 0);
  if (i == head.size() || head[i] != '{') return false;
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  bool expect_key = false;  // the next string at depth 1 is a key
  std::size_t key_start = 0;
  bool nodes = false;
  for (; i < head.size(); ++i) {
    const char c = head[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
        if (depth == 1 && expect_key) {
          const std::string_view key = head.substr(key_start, i - key_start);
          if (key == "traceEvents") return false;
          nodes = nodes || key == "nodes";
          expect_key = false;
        }
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        key_start = i + 1;
        break;
      case '{':
      case '[':
        if (++depth == 1) expect_key = true;
        break;
      case '}':
      case ']':
        --depth;
        break;
      case ',':
        if (depth == 1) expect_key = true;
        break;
      default:
        break;
    }
  }
  return nodes;
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
  fail(text.path, std::string(kNotAnObject));
}

}  // namespace opscope::import
