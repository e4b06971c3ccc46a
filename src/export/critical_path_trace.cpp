// write_critical_path_trace() (opscope/report_output.h): HTA's overlay_critical_path_analysis
// file. HTA loads the raw trace, marks the critical events, drops the others on request and
// appends a flow pair per edge; here the complete events come from the model (the events HTA's
// DataFrame holds, with their ids, streams and devices), so the file is a trace of those with
// the overlay, not a byte copy of the original.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/hta_events.h"
#include "export/sink.h"
#include "json/json_writer.h"
#include "opscope/report_output.h"
#include "opscope/trace_analysis.h"

namespace opscope {
namespace {

std::int64_t pid_of(const ProfilerResult& r, const Event& e) {
  const ThreadInfo& t = r.threads()[static_cast<std::size_t>(e.thread)];
  return t.pid >= 0 ? t.pid : r.pid();
}

std::int64_t tid_of(const ProfilerResult& r, const Event& e) {
  return static_cast<std::int64_t>(r.threads()[static_cast<std::size_t>(e.thread)].tid);
}

// The device an event's args name (GPU work), -1 for none: HTA ends a flow on a device event
// up to 1 us before the event's end so that the arrow lands inside it.
std::int64_t device_of(const ProfilerResult& r, const Event& e) {
  const EventDetail* d = r.detail(e);
  return d != nullptr && (is_gpu_kind(e.kind) || e.kind == EventKind::kOther) ? d->gpu.device : -1;
}

}  // namespace

void write_critical_path_trace(const ProfilerResult& r, const std::string& out_path,
                               std::span<const std::int32_t> critical_events,
                               std::span<const CriticalPathFlow> flows, bool only_critical_events) {
  const std::vector<Event>& events = r.events();
  std::vector<std::uint8_t> critical(events.size(), 0);
  for (const std::int32_t k : critical_events) {
    if (k >= 0 && static_cast<std::size_t>(k) < events.size())
      critical[static_cast<std::size_t>(k)] = 1;
  }
  internal::JsonWriter w(1 << 20);
  w.begin_object();
  w.key("traceEvents");
  w.begin_array();
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (!internal::in_hta_frame(r, e)) continue;
    const std::string_view cat = r.category(e);
    if (only_critical_events && critical[i] == 0 && cat != "user_annotation" &&
        cat != "python_function") {
      continue;
    }
    w.begin_object();
    w.key("ph");
    w.string("X");
    w.key("cat");
    w.string(cat);
    w.key("name");
    w.string(e.name);
    w.key("pid");
    w.integer(pid_of(r, e));
    w.key("tid");
    w.integer(tid_of(r, e));
    w.key("ts");
    w.micros(e.start_ns);
    w.key("dur");
    w.micros(e.duration_ns());
    w.key("args");
    w.begin_object();
    if (const EventDetail* d = r.detail(e); d != nullptr) {
      if (d->gpu.correlation >= 0) {
        w.key("correlation");
        w.integer(d->gpu.correlation);
      }
      if (d->gpu.stream >= 0) {
        w.key("stream");
        w.integer(d->gpu.stream);
      }
      if (d->gpu.device >= 0) {
        w.key("device");
        w.integer(d->gpu.device);
      }
    }
    if (critical[i] != 0) {
      w.key("critical");
      w.integer(1);
    }
    w.end_object();
    w.end_object();
  }
  std::int64_t id = 0;
  for (const CriticalPathFlow& f : flows) {
    for (int side = 0; side < 2; ++side) {
      const std::int32_t k = side == 0 ? f.from_event : f.to_event;
      const bool at_start = side == 0 ? f.from_start : f.to_start;
      const Event& e = events[static_cast<std::size_t>(k)];
      std::int64_t end_ns = e.end_ns;
      if (device_of(r, e) >= 0) end_ns -= std::min<std::int64_t>(1000, e.duration_ns());
      w.begin_object();
      w.key("ph");
      w.string(side == 0 ? "s" : "f");
      w.key("id");
      w.integer(id);
      w.key("pid");
      w.integer(pid_of(r, e));
      w.key("tid");
      w.integer(tid_of(r, e));
      w.key("ts");
      // HTA writes int(ts) of microseconds.
      w.integer((at_start ? e.start_ns : end_ns) / 1000);
      w.key("cat");
      w.string("critical_path");
      w.key("name");
      w.string("critical_path");
      w.key("args");
      w.begin_object();
      w.key("weight");
      w.integer(f.weight_us);
      w.key("critical");
      w.boolean(f.critical);
      w.key("type");
      w.string(critical_path_edge_type_name(f.type));
      w.end_object();
      if (side == 1) {
        w.key("bp");
        w.string("e");
      }
      w.end_object();
    }
    ++id;
  }
  w.end_array();
  w.end_object();
  // gzip whatever the name, as HTA writes it.
  internal::GzipFileSink sink(out_path, {.what = "overlaid critical-path trace"});
  sink.write(w.view());
  sink.commit();
}

}  // namespace opscope
