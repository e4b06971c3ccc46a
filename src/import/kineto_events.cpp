// EventReader (kineto_events.h): the events of a Kineto / Chrome trace into a Piece.
//
// Each event is walked with simdjson's On-Demand API, which parses only what is asked for: its
// fields are visited in document order and values the model does not hold are kept as their raw
// JSON text (ProfilerResult::other_args). Numbers that are times are taken from their text, not
// through a double: Kineto writes microseconds with a nanosecond fraction (1682725898236567.123),
// more digits than a double holds.
#include "import/kineto_events.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include "model/kineto_schema.h"
#include "model/profiler_step.h"
#include "opscope/error.h"

namespace opscope::import {

// The events of the array `events` (walked in the text of place()), into `piece`; every
// `flush_every` events (0: never) `flush(piece)` is called, which joins them to the model
// and clears the piece.
template <typename Flush>
void EventReader::read_each_event(od::array& events, Piece& piece, std::size_t flush_every,
                                  Flush&& flush) {
  piece_ = &piece;
  for (auto item : events) {
    od::value ev;
    check(item.get(ev), "an event");
    const char* at = nullptr;
    if (ev.current_location().get(at) == simdjson::SUCCESS) place_.last_event_at = at;
    od::object e;
    check(ev.get_object().get(e), "an event object");
    read_event(e);
    if (flush_every != 0 && piece.events.size() >= flush_every) flush(piece);
  }
}

void EventReader::read_events(od::array& events, Piece& piece, std::size_t flush_every,
                              const std::function<void(Piece&)>& flush) {
  read_each_event(events, piece, flush_every, flush);
}

void EventReader::read_piece(std::string_view text, std::int64_t offset, od::parser& parser,
                             Piece& piece) {
  piece.clear();
  place_ = Place{text, offset, INT64_MAX, 0, /*streamed=*/true, nullptr};
  try {
    if (parser.capacity() < text.size()) {
      // Room for pieces a little longer than this one too: a piece ends after the event that
      // crosses its nominal size, and each longer one would otherwise have the parser's
      // buffers allocated, and their pages written, anew.
      check(parser.allocate(text.size() + text.size() / 8), "room to parse the events");
    }
    od::document doc;
    check(
        parser.iterate(text.data(), text.size(), text.size() + simdjson::SIMDJSON_PADDING).get(doc),
        "the events");
    check_grammar(parser, text, /*root_is_events=*/true);
    od::array events;
    check(doc.get_array().get(events), "an array of events");
    read_each_event(events, piece, 0, [](Piece&) {});
  } catch (...) {
    piece.error = std::current_exception();
  }
}

inline void EventReader::read_event(od::object& e) {
  std::string_view ph, cat, name;
  // The times as written, read by the rule (checked_time) once the event is whole: so that a
  // refusal names the event, and so that the events the options leave out are held to the
  // rule too (a file's verdict must not depend on the reports asked for).
  std::string_view ts_raw, dur_raw;
  Id pid;
  Id tid;
  Id id;
  bool has_id = false;
  std::string_view args_raw;
  // A complete event's args are read where they stand (one pass over their text) when its
  // phase and category came first, as Kineto and opscope write them; otherwise their text is
  // kept and read once the event is whole.
  Event pre;
  EventDetail& pre_detail = detail_;  // its GPU part reset below when used (the args set
                                      // nothing else); added to the piece by copy
  bool args_read = false;
  bool args_any = false;
  EventKind kind = EventKind::kOther;
  RecordScope scope = RecordScope::kFunction;
  bool left_out = false;     // a CPU range the options leave out: only its thread (and its
                             // times, for the rule) are read further
  bool flow_left_out = false;  // a flow the options leave out: only its times are read further
  bool range_asked = false;  // leaves_out() was asked, with the phase, category and name known
  const auto ask_left_out = [&] {
    if (range_asked || ph.empty() || cat.empty() || name.empty()) return;
    range_asked = true;
    left_out = leaves_out(ph, cat, name);
  };

  for (auto field : e) {
    // The key compared as it is written, without unescaping it into a buffer: every field
    // the model reads has a plain name (a name spelled with escapes is not recognized, and
    // goes where unknown fields go).
    // The field used where the iteration built it, not copied out (read_arg says why).
    check(field.error(), "an event field");
    od::field&& f = std::move(field).value_unsafe();
    const simdjson::ondemand::raw_json_string key = f.key();
    od::value& v = f.value();
    const char* k = key.raw();
    const auto key_is = [&](const char* name) { return key.unsafe_is_equal(name); };
    if (left_out || flow_left_out) {
      if (k[0] == 't' && key_is("ts")) {
        ts_raw = time_text(v, "ts");
      } else if (k[0] == 'd' && key_is("dur")) {
        dur_raw = time_text(v, "dur");
      } else if (flow_left_out) {
        // Its name, for a refusal of its times to name it (a flow's phase comes first).
        if (k[0] == 'n' && key_is("name")) check(v.get_string().get(name), "\"name\" as a string");
      } else if (k[0] == 'p' && key_is("pid")) {
        pid = read_id(v);
        if (!pid.text.empty()) note_text_pid(pid.text);
      } else if (k[0] == 't' && key_is("tid")) {
        tid = read_id(v);
      }
      continue;  // the value is skipped unread
    }
    if (k[0] == 'p' && key_is("ph")) {
      check(v.get_string().get(ph), "\"ph\" as a string");
      // A flow left out is left as soon as its phase is known: the rest is skipped unread, but
      // for its times.
      if (!options_.flows && is_flow_phase(ph)) flow_left_out = true;
      ask_left_out();
    } else if (k[0] == 'c' && key_is("cat")) {
      check(v.get_string().get(cat), "\"cat\" as a string");
      ask_left_out();
    } else if (k[0] == 'n' && key_is("name")) {
      od::json_type type = od::json_type::null;
      check(v.type().get(type), "a name");
      if (type == od::json_type::string) {
        check(v.get_string().get(name), "\"name\" as a string");
      } else {
        name = raw_of(v, "a name");
      }
      ask_left_out();
    } else if (k[0] == 'p' && key_is("pid")) {
      pid = read_id(v);
      if (!pid.text.empty()) note_text_pid(pid.text);
    } else if (k[0] == 't' && key_is("tid")) {
      tid = read_id(v);
    } else if (k[0] == 't' && key_is("ts")) {
      ts_raw = time_text(v, "ts");
    } else if (k[0] == 'd' && key_is("dur")) {
      dur_raw = time_text(v, "dur");
    } else if (k[0] == 'i' && key_is("id")) {
      id = read_id(v);
      has_id = true;
    } else if (k[0] == 'a' && key_is("args")) {
      if (ph.size() == 1 && ph[0] == 'X' && !cat.empty()) {
        od::object o;
        if (v.get_object().get(o) != simdjson::SUCCESS) {
          fail("expected \"args\" to be an object" + at_event());
        }
        kind = kind_of(cat, scope);
        args_read = true;
        if (!reads_args_of(kind)) continue;
        reset_gpu(pre_detail);
        args_any = read_args_object(o, pre, pre_detail, kind != EventKind::kRange);
      } else {
        args_raw = raw_of(v, "\"args\"");
      }
    } else {
      // "bp" (flows bind to the enclosing slice, which is how Kineto writes them), "s",
      // "id2", "tts", ...: not kept.
      raw_of(v, "a value");
    }
  }
  // The rule for times (trace_times.h), on every event whatever its phase and whether or not
  // the options keep it. A duration is a time too: the same bound. Both within it, ts + dur
  // cannot overflow.
  const bool has_ts = !ts_raw.empty();
  const bool has_dur = !dur_raw.empty();
  const std::int64_t ts = has_ts ? checked_time(ts_raw, "ts", name) : 0;
  const std::int64_t dur = has_dur ? checked_time(dur_raw, "dur", name) : 0;
  if (has_dur && !end_in_range(ts, dur)) [[unlikely]] {
    fail(end_refusal(ts_raw, dur_raw, ts, dur, time_place(dur_raw, name)));
  }
  // Every event is a row of HTA's frame, whatever the model keeps of it.
  if (options_.times != TraceTimes::kNanoseconds)
    piece_->ts_column |= static_cast<std::uint8_t>(ts_column_of(ts_raw));
  if (flow_left_out) return;
  if (ph.empty()) {
    ++piece_->skipped;
    return;
  }
  ask_left_out();  // in case the phase, category or name came last
  if (left_out) {
    ++piece_->threads[static_cast<std::size_t>(thread_index(pid, tid))].cpu_ranges;
    return;
  }
  switch (ph[0]) {
    case 'X':
      if (!has_ts) fail("a complete event (\"ph\":\"X\") without \"ts\"" + at_event());
      if (!args_read) {
        kind = kind_of(cat, scope);
        if (reads_args_of(kind)) {
          reset_gpu(pre_detail);
          args_any = read_args(args_raw, pre, pre_detail, kind != EventKind::kRange);
        }
      }
      add_complete(cat, kind, scope, name, pid, tid, ts,
                   has_dur ? std::max<std::int64_t>(dur, 0) : 0, pre, pre_detail, args_any);
      return;
    case 'i':
    case 'I':
      if (!has_ts) fail("an instant event without \"ts\"" + at_event());
      add_instant(cat, name, pid, tid, ts, args_raw);
      return;
    case 'M':
      read_metadata_event(name, pid, tid, args_raw);
      return;
    case 's':
    case 'f':
    case 't':
      if (!has_ts || !has_id || !options_.flows) return;
      add_flow_end(ph[0], cat, id, thread_index(pid, tid), ts);
      return;
    default:
      // Counters ("C"), async pairs ("b"/"e"), objects: not in the model yet; counted and
      // reported.
      ++piece_->skipped;
      return;
  }
}

// Whether a complete event is a CPU range other than a profiler step, which the options
// leave out (TraceReadOptions::cpu_ranges), from its phase, category and name.
inline bool EventReader::leaves_out(std::string_view ph, std::string_view cat,
                                    std::string_view name) const {
  if (options_.cpu_ranges || ph.size() != 1 || ph[0] != 'X') return false;
  RecordScope scope = RecordScope::kFunction;
  return kind_of(cat, scope) == EventKind::kRange && !internal::is_profiler_step(name);
}

// The detail's GPU part as a default one, copied from one that was not just written: a
// temporary EventDetail, built by narrow stores and copied at once by wide loads, stalled
// on store forwarding (perf annotate: a sixth of read_event's samples).
inline void EventReader::reset_gpu(EventDetail& d) {
  static const GpuInfo kNone{};
  d.gpu = kNone;
}

// Kineto names some processes with text ("Spans", "Traces"); they are numbered in the order
// the trace first names them (Reader::text_pid), which the piece keeps.
inline void EventReader::note_text_pid(const std::string& text) {
  std::vector<std::string>& seen = piece_->text_pids;
  if (std::find(seen.begin(), seen.end(), text) == seen.end()) seen.push_back(text);
}

// The piece's index of the thread (pid, tid), added the first time it is named.
inline std::int32_t EventReader::thread_index(const Id& pid, const Id& tid) {
  std::vector<Piece::Thread>& threads = piece_->threads;
  const auto same = [&](const Piece::Thread& t) { return t.tid == tid && t.pid == pid; };
  if (last_thread_ < threads.size() && same(threads[last_thread_])) {
    return static_cast<std::int32_t>(last_thread_);
  }
  for (last_thread_ = 0; last_thread_ < threads.size(); ++last_thread_) {
    if (same(threads[last_thread_])) return static_cast<std::int32_t>(last_thread_);
  }
  threads.push_back({pid, tid});
  return static_cast<std::int32_t>(last_thread_);
}

inline EventKind EventReader::kind_of(std::string_view cat, RecordScope& scope) {
  scope = RecordScope::kFunction;
  if (is(cat, "cpu_op") || is(cat, "Operator") || is(cat, "operator")) return EventKind::kRange;
  if (is(cat, "user_annotation")) {
    scope = RecordScope::kUserScope;
    return EventKind::kRange;
  }
  if (is(cat, "kernel") || is(cat, "Kernel")) return EventKind::kKernel;
  if (is(cat, "gpu_memcpy") || is(cat, "Memcpy")) return EventKind::kMemcpy;
  if (is(cat, "gpu_memset") || is(cat, "Memset")) return EventKind::kMemset;
  if (is(cat, "cuda_runtime") || is(cat, "Runtime") || is(cat, "hip_runtime") ||
      is(cat, "privateuse1_runtime")) {
    return EventKind::kRuntime;
  }
  if (is(cat, "cuda_driver") || is(cat, "Driver") || is(cat, "hip_driver"))
    return EventKind::kDriver;
  if (is(cat, "gpu_user_annotation")) return EventKind::kGpuAnnotation;
  return EventKind::kOther;
}

// A category for Event::category as the piece holds it: 1 + its index in the piece's.
inline std::uint16_t EventReader::category(std::string_view cat) {
  const std::size_t i = piece_->categories.index(cat);
  return static_cast<std::uint16_t>(std::min<std::size_t>(i + 1, UINT16_MAX));
}

// 0 when the kind and scope imply the category.
inline std::uint16_t EventReader::category_index(std::string_view cat, EventKind kind,
                                                 RecordScope scope) {
  return cat == implied_category(kind, scope) ? 0 : category(cat);
}

// "[1, 2, 3]" into `out`; false for anything else.
inline bool EventReader::triple_of(std::string_view raw, std::int32_t (&out)[3]) {
  if (raw.size() < 2 || raw.front() != '[' || raw.back() != ']') return false;
  raw = raw.substr(1, raw.size() - 2);
  for (int i = 0; i < 3; ++i) {
    const std::size_t comma = raw.find(',');
    if ((i < 2) != (comma != std::string_view::npos)) return false;
    std::string_view item = raw.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    std::int64_t n = 0;
    if (!int_of(item, n)) return false;
    out[i] = static_cast<std::int32_t>(n);
    if (comma != std::string_view::npos) raw.remove_prefix(comma + 1);
  }
  return true;
}

// Reads the args object: the fields the model holds go to `e` and `d`; every other arg, and
// a known one whose value is not what the field holds (AMD's "stream": "0x0"), is kept as
// JSON text for e.other_args. Returns whether `d` holds anything.
inline bool EventReader::read_args(std::string_view raw, Event& e, EventDetail& d, bool gpu_side) {
  if (raw.empty() || raw == "{}") return false;
  od::document doc;
  check(iterate_within(args_parser_, raw).get(doc), "\"args\"");
  od::object o;
  if (doc.get_object().get(o) != simdjson::SUCCESS) {
    fail("expected \"args\" to be an object" + at_event());
  }
  return read_args_object(o, e, d, gpu_side);
}

// The args object's fields, walked in the document (the main one, or a value's text parsed
// in place: either way its text lies in place().doc).
inline bool EventReader::read_args_object(od::object& o, Event& e, EventDetail& d, bool gpu_side) {
  bool any = false;
  std::string& other = other_args_;  // one buffer for every event: its text is kept (copied)
  other.clear();
  for (auto f : o) {
    std::string_view key, value_raw;
    read_arg(f, key, value_raw);
    std::int64_t n = 0;
    const bool is_int = int_of(value_raw, n);
    bool kept = true;
    if (is(key, kineto::kExternalId) && is_int) {
      if (gpu_side) {
        d.gpu.external_id = n;
        any = true;
      } else {
        e.handle = static_cast<std::uint64_t>(n);
      }
    } else if (is(key, kineto::kSequenceNumber) && !gpu_side && is_int) {
      e.sequence_nr = n;
    } else if (is(key, kineto::kFwdThreadId) && !gpu_side && is_int) {
      e.forward_thread_id = static_cast<std::uint64_t>(n);
    } else if (is(key, kineto::kRecordFunctionId) && !gpu_side && is_int) {
      // The same as "External id" when opscope wrote the trace; written again from it.
    } else if (is(key, kineto::kCorrelation) && is_int) {
      d.gpu.correlation = n;
      any = true;
    } else if (is(key, kineto::kDevice) && gpu_side && is_int) {
      d.gpu.device = static_cast<std::int32_t>(n);
      any = true;
    } else if (is(key, kineto::kStream) && gpu_side && is_int) {
      d.gpu.stream = n;
      any = true;
    } else if (is(key, kineto::kGrid) && gpu_side && triple_of(value_raw, d.gpu.grid)) {
      any = true;
    } else if (is(key, kineto::kBlock) && gpu_side && triple_of(value_raw, d.gpu.block)) {
      any = true;
    } else if (is(key, kineto::kRegistersPerThread) && gpu_side && is_int) {
      d.gpu.registers_per_thread = static_cast<std::int32_t>(n);
      any = true;
    } else if (is(key, kineto::kSharedMemory) && gpu_side && is_int) {
      d.gpu.shared_memory = n;
      any = true;
    } else if (is(key, kineto::kBytes) && gpu_side && is_int) {
      d.gpu.bytes = n;
      any = true;
    } else {
      kept = false;
    }
    if (kept || !options_.other_args) continue;
    add_other_arg(other, key, value_raw);
  }
  if (!other.empty()) e.other_args = keep_other_args(other);
  return any;
}

// An arg no field holds, appended to the object text `other` is building (key already
// escaped as JSON, as it was written); keep_other_args closes the object and keeps it.
inline void EventReader::add_other_arg(std::string& other, std::string_view key,
                                       std::string_view value) {
  other += other.empty() ? "{" : ",";
  other += '"';
  other += key;
  other += "\":";
  other += value;
}

inline std::int32_t EventReader::keep_other_args(std::string& other) {
  other += "}";
  piece_->other_args.emplace_back(piece_->other_text.size(), other.size());
  piece_->other_text += other;
  return static_cast<std::int32_t>(piece_->other_args.size() - 1);
}

// One field of an args object: its key as it is written (escapes and all: the args are
// parsed in place, so the key's text runs from just after its opening quote to the last
// quote before the value) and its value's JSON text.
// The field is taken out of the iteration's result once and its key and value used in place:
// taking key() and value() from the result copies each through the stack, and the copy's
// wide load stalls on the narrow stores that built it (perf annotate; 2-4 % of a whole read
// of the 9.8 MB trace in runs alternated with the code before).
inline void EventReader::read_arg(simdjson::simdjson_result<od::field>& field,
                                  std::string_view& key, std::string_view& value_raw) {
  check(field.error(), "an args field");
  od::field&& f = std::move(field).value_unsafe();
  const simdjson::ondemand::raw_json_string raw_key = f.key();
  value_raw = raw_of(f.value(), "an args value");
  const char* key_end = value_raw.data();
  while (key_end > raw_key.raw() && *--key_end != '"') {
  }
  key = std::string_view(raw_key.raw(), static_cast<std::size_t>(key_end - raw_key.raw()));
}

inline std::int32_t EventReader::add_detail(const EventDetail& d) {
  piece_->details.push_back(d);
  return static_cast<std::int32_t>(piece_->details.size() - 1);
}

// A complete event; `e` holds what its args set (read_args), `d` the rest of them when
// `has_detail`.
inline void EventReader::add_complete(std::string_view cat, EventKind kind, RecordScope scope,
                                      std::string_view name, const Id& pid, const Id& tid,
                                      std::int64_t ts, std::int64_t dur, Event& e,
                                      const EventDetail& d, bool has_detail) {
  e.name = name;  // kept in the model's names when the piece joins it
  e.kind = kind;
  e.scope = scope;
  e.category = category_index(cat, kind, scope);
  e.start_ns = ts;
  e.end_ns = ts + dur;
  e.thread = thread_index(pid, tid);
  Piece::Thread& t = piece_->threads[static_cast<std::size_t>(e.thread)];
  if (has_detail) {
    if (is_gpu_kind(kind)) {
      t.gpu = true;
      if (d.gpu.device >= 0) t.device = d.gpu.device;
      if (d.gpu.stream >= 0) t.stream = d.gpu.stream;
    }
    e.detail = add_detail(d);
  } else if (is_gpu_kind(kind)) {
    t.gpu = true;
  }
  if (kind == EventKind::kRange) ++t.cpu_ranges;
  piece_->events.push_back(e);
}

inline void EventReader::add_instant(std::string_view cat, std::string_view name, const Id& pid,
                                     const Id& tid, std::int64_t ts, std::string_view args) {
  Event e;
  e.name = name;
  e.kind = EventKind::kInstant;
  e.start_ns = e.end_ns = ts;
  e.thread = thread_index(pid, tid);
  if (cat != "cpu_instant_event") e.category = category(cat);
  EventDetail d;
  if (name == "[memory]" && is(cat, "cpu_instant_event") && read_memory_args(args, e, d)) {
    e.kind = EventKind::kMemory;
    e.category = 0;
    piece_->memory_events = true;
    e.detail = add_detail(d);
  } else if (read_args(args, e, d, true)) {
    e.detail = add_detail(d);
  }
  piece_->events.push_back(e);
}

// An allocation report as Kineto writes it (and opscope: chrome_trace.cpp): "Device Type"
// (c10's: CPU 0, CUDA 1, MKLDNN 2, IDEEP 5, HIP 6), "Device Id", "Addr", "Bytes" (negative
// on free), "Total Allocated", "Total Reserved"; opscope's "opscope action": "version" marks
// an in-place write. Other args are kept. False (and `e`, `d` untouched) when "Bytes" is
// missing or the device is none of those: the event stays an instant with all its args.
inline bool EventReader::read_memory_args(std::string_view raw, Event& e, EventDetail& d) {
  if (raw.empty()) return false;
  od::document doc;
  check(iterate_within(args_parser_, raw).get(doc), "\"args\" of a [memory] event");
  od::object o;
  if (doc.get_object().get(o) != simdjson::SUCCESS) return false;
  MemoryUse m;
  bool has_bytes = false, device_known = true, version = false;
  std::string& other = other_args_;
  other.clear();
  for (auto f : o) {
    std::string_view key, value_raw;
    read_arg(f, key, value_raw);
    std::int64_t n = 0;
    const bool is_int = int_of(value_raw, n);
    if (is(key, kineto::kDeviceType) && is_int) {
      if (n == 0 || n == 2 || n == 5) {
        m.device.type = DeviceType::kCPU;
      } else if (n == 1 || n == 6) {
        m.device.type = DeviceType::kCUDA;
      } else {
        device_known = false;
      }
    } else if (is(key, kineto::kDeviceId) && is_int && n >= -1 && n <= 127) {
      m.device.index = static_cast<std::int8_t>(n);
    } else if (is(key, kineto::kAddr) && is_int) {
      m.address = static_cast<std::uint64_t>(n);
    } else if (is(key, kineto::kMemoryBytes) && is_int) {
      m.bytes = n;
      has_bytes = true;
    } else if (is(key, kineto::kTotalAllocated) && is_int) {
      m.total_allocated = n;
    } else if (is(key, kineto::kTotalReserved) && is_int) {
      m.total_reserved = n;
    } else if (is(key, kineto::kOpscopeAction) && value_raw == "\"version\"") {
      version = true;
    } else if (options_.other_args) {
      add_other_arg(other, key, value_raw);
    }
  }
  if (!has_bytes || !device_known) return false;
  m.action = version ? MemoryAction::kVersion
                     : (m.bytes < 0 ? MemoryAction::kFree : MemoryAction::kAllocate);
  d.memory = m;
  if (!other.empty()) e.other_args = keep_other_args(other);
  return true;
}

inline void EventReader::read_metadata_event(std::string_view what, const Id& pid, const Id& tid,
                                             std::string_view args) {
  if (args.empty()) return;
  od::document doc;
  check(iterate_within(args_parser_, args).get(doc), "\"args\" of a metadata event");
  od::object o;
  if (doc.get_object().get(o) != simdjson::SUCCESS) return;
  using What = Piece::Meta::What;
  for (auto f : o) {
    std::string_view k;
    check(f.unescaped_key().get(k), "an args key");
    od::value v;
    check(f.value().get(v), "an args value");
    std::string_view s;
    if (what == kineto::kProcessName && k == kineto::kNameArg) {
      if (v.get_string().get(s) == simdjson::SUCCESS) {
        add_meta(What::kProcessName, pid, -1, s, 0);
      }
    } else if (what == kineto::kProcessLabels && k == kineto::kLabelsArg) {
      if (v.get_string().get(s) == simdjson::SUCCESS) {
        add_meta(What::kProcessLabels, pid, -1, s, 0);
      }
    } else if (what == kineto::kProcessSortIndex && k == kineto::kSortIndexArg) {
      add_meta(What::kProcessSortIndex, pid, -1, {}, read_id(v).number);
    } else if (what == kineto::kThreadName && k == kineto::kNameArg) {
      if (v.get_string().get(s) == simdjson::SUCCESS) {
        add_meta(What::kThreadName, {}, thread_index(pid, tid), s, 0);
      }
    } else if (what == kineto::kThreadSortIndex && k == kineto::kSortIndexArg) {
      const std::int64_t n = read_id(v).number;
      add_meta(What::kThreadSortIndex, {}, thread_index(pid, tid), {}, n);
    }
  }
}

inline void EventReader::add_meta(Piece::Meta::What what, const Id& pid, std::int32_t thread,
                                  std::string_view text, std::int64_t number) {
  Piece::Meta& m = piece_->metadata.emplace_back();
  m.what = what;
  m.pid = pid;
  m.thread = thread;
  m.text = std::string(text);
  m.number = number;
}

inline void EventReader::add_flow_end(char ph, std::string_view cat, const Id& id,
                                      std::int32_t thread, std::int64_t ts) {
  const std::int64_t key =
      id.text.empty() ? id.number : static_cast<std::int64_t>(std::hash<std::string>{}(id.text));
  // The category as an index into the piece's (a trace has a handful: "ac2g", "fwdbwd").
  const auto category = static_cast<std::uint32_t>(piece_->flow_categories.index(cat));
  piece_->flow_ends.push_back({key, ts, category, thread, ph});
}

// Whether the args of an event of `kind` are read (TraceReadOptions::cpu_range_args).
inline bool EventReader::reads_args_of(EventKind kind) const {
  return kind != EventKind::kRange || options_.cpu_range_args;
}

inline bool EventReader::is_flow_phase(std::string_view ph) {
  return ph.size() == 1 && (ph[0] == 's' || ph[0] == 'f' || ph[0] == 't');
}

}  // namespace opscope::import
