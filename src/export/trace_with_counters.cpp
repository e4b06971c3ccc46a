// write_traces_with_counters() (opscope/trace_analysis.h): HTA's generate_trace_with_counters.
//
// HTA re-reads the trace into Python objects and dumps it again, which rewrites every number
// and key order. Here the counter events are spliced into the original text just before the
// "]" that closes its traceEvents, so every original event stays byte for byte as it was,
// including what the model does not hold (counters already there, async pairs, unknown keys).
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/counters.h"
#include "analysis/gpu_work.h"
#include "export/sink.h"
#include "import/json_check.h"
#include "import/trace_text.h"
#include "json/json_writer.h"
#include "opscope/error.h"
#include "opscope/report_output.h"
#include "opscope/trace_analysis.h"

namespace opscope {
namespace {

// A scanner over JSON text that the reader has already accepted: it only needs to find where
// values end, not to check them.
class Scanner {
 public:
  Scanner(std::string_view text, const std::string& path) : s_(text), path_(path) {}

  void skip_space() {
    while (at_ < s_.size() &&
           (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n' || s_[at_] == '\r')) {
      ++at_;
    }
  }
  char peek() const { return at_ < s_.size() ? s_[at_] : '\0'; }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++at_;
  }
  // A string's raw text between its quotes (escapes left as written).
  std::string_view string() {
    expect('"');
    const std::size_t begin = at_;
    while (at_ < s_.size() && s_[at_] != '"') at_ += s_[at_] == '\\' ? 2 : 1;
    if (at_ >= s_.size()) fail("unterminated string");
    return std::string_view(s_).substr(begin, at_++ - begin);
  }
  // Skips one value of any kind.
  void value() {
    skip_space();
    const char c = peek();
    if (c == '"') {
      string();
      return;
    }
    if (c != '{' && c != '[') {
      while (at_ < s_.size() && std::strchr(",}] \t\r\n", s_[at_]) == nullptr) ++at_;
      return;
    }
    int depth = 0;
    while (at_ < s_.size()) {
      const char d = s_[at_];
      if (d == '"') {
        string();
        continue;
      }
      ++at_;
      if (d == '{' || d == '[') ++depth;
      if ((d == '}' || d == ']') && --depth == 0) return;
    }
    fail("unterminated array or object");
  }
  std::size_t at() const { return at_; }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("cannot add counters to trace " + path_ + ": " + what + " at byte " +
                std::to_string(at_));
  }

 private:
  std::string_view s_;
  const std::string& path_;
  std::size_t at_ = 0;
};

// Where the "]" closing the top-level traceEvents array is, and whether the array is empty.
struct TraceEventsEnd {
  std::size_t close;
  bool empty;
};

TraceEventsEnd find_trace_events_end(std::string_view text, const std::string& path) {
  Scanner sc(text, path);
  sc.expect('{');
  for (;;) {
    sc.skip_space();
    if (sc.peek() == '}') break;
    const std::string_view key = sc.string();
    sc.expect(':');
    sc.skip_space();
    if (key == "traceEvents" && sc.peek() == '[') {
      const std::size_t open = sc.at();
      sc.value();
      const std::size_t close = sc.at() - 1;
      const bool empty = text.find_first_not_of(" \t\r\n", open + 1) == close;  // "[ ]"
      return {close, empty};
    }
    sc.value();
    sc.skip_space();
    if (sc.peek() != ',') break;
    sc.expect(',');
  }
  sc.fail("no \"traceEvents\" array at the top level");
}

// One counter event on a line of its own, preceded by ",\n": {"pid", "ts", "args": {arg:
// value}, "ph": "C", "name"}, and an "id" when `id` >= 0 (a counter per stream: Perfetto and
// chrome://tracing tell same-named counters apart by id). write_value writes the value.
template <typename WriteValue>
void counter_event(internal::JsonWriter& w, std::int64_t pid, std::int64_t ts_ns,
                   std::string_view name, std::string_view arg, WriteValue&& write_value,
                   std::int64_t id) {
  w.append(",\n");
  w.set_need_comma(false);
  w.begin_object();
  w.key("pid");
  w.integer(pid);
  w.key("ts");
  w.micros(ts_ns);
  w.key("args");
  w.begin_object();
  w.key(arg);
  write_value();
  w.end_object();
  w.key("ph");
  w.string("C");
  w.key("name");
  w.string(name);
  if (id >= 0) {
    w.key("id");
    w.integer(id);
  }
  w.end_object();
}

// The counter events of one rank — HTA's convert_time_series_to_events: the queue lengths per
// stream, then the bandwidths per kind.
// `count`: how many events were written.
std::string counter_events(const ProfilerResult& r, bool drop_last, std::size_t& count) {
  internal::JsonWriter w;
  count = 0;
  for (const internal::QueuePoint& p : internal::queue_length_series(r, drop_last)) {
    counter_event(
        w, p.pid, p.ts_ns, "Queue Length", "Queue Length", [&] { w.integer(p.queue_length); },
        p.stream);
    ++count;
  }
  for (const internal::BandwidthPoint& p : internal::memory_bw_series(r, drop_last)) {
    counter_event(
        w, p.pid, p.ts_ns, p.name, "Memcpy BW", [&] { w.number(p.gbps); }, -1);
    ++count;
  }
  return w.str();
}

}  // namespace

std::vector<std::size_t> write_traces_with_counters(
    std::span<const std::shared_ptr<const ProfilerResult>> ranks,
    std::span<const std::string> trace_paths, std::span<const std::string> out_paths,
    const ReportOptions& options, const TraceLimits& limits) {
  if (trace_paths.size() != ranks.size() || out_paths.size() != ranks.size()) {
    throw Error("write_traces_with_counters: " + std::to_string(ranks.size()) + " ranks, " +
                std::to_string(trace_paths.size()) + " trace paths and " +
                std::to_string(out_paths.size()) + " output paths; expected as many of each");
  }
  const std::set<std::string> distinct(out_paths.begin(), out_paths.end());
  if (distinct.size() != out_paths.size()) {
    throw Error("write_traces_with_counters: two ranks would be written to the same file");
  }
  // Every file is complete under its temporary name before any is renamed: a failure on
  // the third rank leaves neither the first two nor a half third.
  std::vector<std::unique_ptr<internal::Sink>> sinks;
  std::vector<std::size_t> written(ranks.size(), 0);
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    simdjson::padded_string padded;
    try {
      padded = import::load_trace_text(trace_paths[i], limits);
    } catch (const std::bad_alloc&) {
      import::fail_out_of_memory(trace_paths[i]);
    } catch (const std::length_error&) {
      import::fail_out_of_memory(trace_paths[i]);
    }
    const std::string_view text(padded.data(), padded.size());
    // The text is read again to be copied: checked again, so that what is spliced is the JSON
    // the reader accepted, even if the file changed since.
    import::check_trace_json(trace_paths[i], text);
    const TraceEventsEnd end = find_trace_events_end(text, trace_paths[i]);
    std::string counters =
        counter_events(*ranks[i], internal::drop_last_step(*ranks[i], options), written[i]);
    // Into an empty array the first event goes without the comma.
    std::string_view inserted = counters;
    if (end.empty && !inserted.empty()) inserted.remove_prefix(1);
    sinks.push_back(internal::open_file_sink(out_paths[i], {.what = "trace with counters"}));
    internal::Sink& sink = *sinks.back();
    sink.write(std::string_view(text).substr(0, end.close));
    sink.write(inserted);
    if (!inserted.empty()) sink.write("\n");
    sink.write(std::string_view(text).substr(end.close));
  }
  for (const auto& sink : sinks) sink->commit();
  return written;
}

}  // namespace opscope
