// LegacyEvent's portable form and its bytes, the legacy JSON trace, and legacy lists as a
// ProfilerResult.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <ostream>
#include <unordered_map>

#include "backend/gpu_activity.h"
#include "json/json_writer.h"
#include "opscope/error.h"
#include "opscope/legacy.h"
#include "util/program_name.h"

namespace opscope {
namespace {

// The twelve fields of the portable form, in PyTorch's order (EventIValueIdx).
enum Field : std::size_t {
  kKind = 0,
  kName,
  kThreadId,
  kHandle,
  kNodeId,
  kCpuMemoryUsage,
  kCpuNs,
  kCudaRecorded,
  kCudaMemoryUsage,
  kCudaDevice,
  kCudaUs,
  kShapes,
  kNumFields,
};

constexpr const char* kFieldNames[kNumFields] = {
    "kind",   "name",          "thread_id",         "handle",      "node_id", "cpu_memory_usage",
    "cpu_ns", "cuda_recorded", "cuda_memory_usage", "cuda_device", "cuda_us", "shapes"};

std::string field_label(std::size_t i) {
  return "field " + std::to_string(i) + " (" + (i < kNumFields ? kFieldNames[i] : "extra") + ")";
}

const char* kind_text(ValueKind k) {
  switch (k) {
    case ValueKind::kNone:
      return "none";
    case ValueKind::kTensor:
      return "a tensor";
    case ValueKind::kInt:
      return "an int";
    case ValueKind::kDouble:
      return "a double";
    case ValueKind::kBool:
      return "a bool";
    case ValueKind::kString:
      return "a string";
    case ValueKind::kList:
      return "a list";
  }
  return "an unknown kind";
}

RecordedValue int_value(std::int64_t v) {
  RecordedValue r;
  r.kind = ValueKind::kInt;
  r.i = v;
  return r;
}

const RecordedValue& expect(const RecordedValue& v, ValueKind kind, std::size_t field) {
  if (v.kind != kind) {
    throw Error("LegacyEvent::from_value: " + field_label(field) + " must be " + kind_text(kind) +
                ", got " + kind_text(v.kind));
  }
  return v;
}

// --- bytes -------------------------------------------------------------------------------------
// "OPSCLEV" and a version byte, a varint count of events, then each event's portable value:
// a tag byte (ValueKind) and its payload: zigzag varint (int), 8 bytes little-endian (double),
// one byte (bool), varint length and bytes (string), varint count and values (list).

constexpr std::string_view kMagic = "OPSCLEV";
constexpr std::uint8_t kVersion = 1;
constexpr int kMaxDepth = 8;  // events nest two lists deep; deeper input is malformed

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_value(std::string& out, const RecordedValue& v) {
  out.push_back(static_cast<char>(v.kind));
  switch (v.kind) {
    case ValueKind::kNone:
      break;
    case ValueKind::kInt:
      put_varint(out,
                 (static_cast<std::uint64_t>(v.i) << 1) ^ static_cast<std::uint64_t>(v.i >> 63));
      break;
    case ValueKind::kDouble: {
      char bytes[8];
      std::memcpy(bytes, &v.d, 8);
      out.append(bytes, 8);
      break;
    }
    case ValueKind::kBool:
      out.push_back(v.b ? 1 : 0);
      break;
    case ValueKind::kString:
      put_varint(out, v.text.size());
      out += v.text;
      break;
    case ValueKind::kList:
      put_varint(out, v.items.size());
      for (const RecordedValue& item : v.items) put_value(out, item);
      break;
    case ValueKind::kTensor:
      throw Error("serialize_legacy_events: tensors are not part of an event's portable form");
  }
}

class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}

  // `where` names what is being read, for errors ("event 3, field 6 (cpu_ns)").
  RecordedValue value(const std::string& where, int depth = 0) {
    if (depth > kMaxDepth) fail(where, "values nest deeper than " + std::to_string(kMaxDepth));
    const std::uint8_t tag = byte(where);
    RecordedValue v;
    switch (tag) {
      case static_cast<std::uint8_t>(ValueKind::kNone):
        break;
      case static_cast<std::uint8_t>(ValueKind::kInt): {
        const std::uint64_t z = varint(where);
        v.i = static_cast<std::int64_t>((z >> 1) ^ (~(z & 1) + 1));
        break;
      }
      case static_cast<std::uint8_t>(ValueKind::kDouble): {
        need(where, 8);
        std::memcpy(&v.d, bytes_.data() + pos_, 8);
        pos_ += 8;
        break;
      }
      case static_cast<std::uint8_t>(ValueKind::kBool): {
        const std::uint8_t b = byte(where);
        if (b > 1) fail(where, "a bool byte is " + std::to_string(b) + "; allowed: 0, 1");
        v.b = b == 1;
        break;
      }
      case static_cast<std::uint8_t>(ValueKind::kString): {
        const std::uint64_t n = varint(where);
        need(where, n);
        v.text.assign(bytes_.data() + pos_, n);
        pos_ += n;
        break;
      }
      case static_cast<std::uint8_t>(ValueKind::kList): {
        const std::uint64_t n = varint(where);
        need(where, n);                                   // every item takes at least its tag byte
        v.items.reserve(std::min<std::uint64_t>(n, 64));  // n is untrusted: grow as read
        for (std::uint64_t i = 0; i < n; ++i) {
          v.items.push_back(value(where + ", item " + std::to_string(i), depth + 1));
        }
        break;
      }
      default:
        fail(where, "unknown value tag " + std::to_string(tag) +
                        "; allowed: 0 (none), 2 (int), 3 (double), 4 (bool), 5 (string), "
                        "6 (list)");
    }
    v.kind = static_cast<ValueKind>(tag);
    return v;
  }

  std::uint64_t varint(const std::string& where) {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const std::uint8_t b = byte(where);
      v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
    fail(where, "a varint runs past 64 bits");
  }

  std::uint8_t byte(const std::string& where) {
    need(where, 1);
    return static_cast<std::uint8_t>(bytes_[pos_++]);
  }

  void need(const std::string& where, std::uint64_t n) {
    if (n > bytes_.size() - pos_) {
      fail(where, "truncated: needs " + std::to_string(n) + " more bytes at byte " +
                      std::to_string(pos_) + " of " + std::to_string(bytes_.size()));
    }
  }

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw Error("deserialize_legacy_events: " + where + ": " + what);
  }

  std::size_t pos() const { return pos_; }
  bool done() const { return pos_ == bytes_.size(); }

 private:
  std::string_view bytes_;
  std::size_t pos_ = 0;
};

}  // namespace

std::string_view LegacyEvent::kind_str() const {
  switch (kind_) {
    case LegacyEventKind::kMark:
      return "mark";
    case LegacyEventKind::kPushRange:
      return "push";
    case LegacyEventKind::kPopRange:
      return "pop";
    case LegacyEventKind::kMemoryAlloc:
      return "memory_alloc";
  }
  return "unknown";
}

void LegacyEvent::set_memory_usage(std::int64_t bytes, Device device) {
  if (device.type == DeviceType::kCUDA) {
    cuda_memory_usage_ = bytes;
    device_ = device.index;
  } else {
    cpu_memory_usage_ = bytes;
  }
}

double LegacyEvent::cuda_elapsed_us(const LegacyEvent& end) const {
  if (!has_cuda() || !end.has_cuda()) throw Error("Events were not recorded for CUDA");
  if (device_ != end.device_) {
    throw Error("Events are not on the same device: " + std::to_string(device_) + " vs " +
                std::to_string(end.device_));
  }
  return static_cast<double>(end.cuda_ns_ - cuda_ns_) / 1000.0;
}

RecordedValue LegacyEvent::to_value() const {
  RecordedValue v;
  v.kind = ValueKind::kList;
  v.items.reserve(kNumFields);
  v.items.push_back(int_value(static_cast<std::int64_t>(kind_)));
  RecordedValue name;
  name.kind = ValueKind::kString;
  name.text = name_;
  v.items.push_back(std::move(name));
  v.items.push_back(int_value(static_cast<std::int64_t>(thread_id_)));
  RecordedValue handle;  // a double, as in PyTorch (handles stay below 2^53)
  handle.kind = ValueKind::kDouble;
  handle.d = static_cast<double>(handle_);
  v.items.push_back(handle);
  v.items.push_back(int_value(node_id_));
  v.items.push_back(int_value(cpu_memory_usage_));
  v.items.push_back(int_value(cpu_ns_));
  RecordedValue cuda;
  cuda.kind = ValueKind::kBool;
  cuda.b = cuda_recorded_;
  v.items.push_back(cuda);
  v.items.push_back(int_value(cuda_memory_usage_));
  v.items.push_back(int_value(device_));
  v.items.push_back(int_value(cuda_us()));
  RecordedValue shapes;
  shapes.kind = ValueKind::kList;
  for (const auto& s : shapes_) {
    RecordedValue dims;
    dims.kind = ValueKind::kList;
    for (std::int64_t d : s) dims.items.push_back(int_value(d));
    shapes.items.push_back(std::move(dims));
  }
  v.items.push_back(std::move(shapes));
  return v;
}

LegacyEvent LegacyEvent::from_value(const RecordedValue& value) {
  if (value.kind != ValueKind::kList) {
    throw Error(std::string("LegacyEvent::from_value: expected a list of ") +
                std::to_string(kNumFields) + " fields, got " + kind_text(value.kind));
  }
  if (value.items.size() < kNumFields) {
    throw Error("LegacyEvent::from_value: expected at least " + std::to_string(kNumFields) +
                " fields, got " + std::to_string(value.items.size()) + " (missing " +
                field_label(value.items.size()) + ")");
  }
  const auto& f = value.items;
  const std::int64_t kind = expect(f[kKind], ValueKind::kInt, kKind).i;
  if (kind < 0 || kind > static_cast<std::int64_t>(LegacyEventKind::kMemoryAlloc)) {
    throw Error("LegacyEvent::from_value: " + field_label(kKind) + " is " + std::to_string(kind) +
                "; allowed: 0 (mark), 1 (push), 2 (pop), 3 (memory_alloc)");
  }
  const double handle = expect(f[kHandle], ValueKind::kDouble, kHandle).d;
  if (!(handle >= 0 && handle < 0x1p64)) {
    throw Error("LegacyEvent::from_value: " + field_label(kHandle) + " is " +
                std::to_string(handle) + "; allowed: 0 to 2^64");
  }
  std::vector<std::vector<std::int64_t>> shapes;
  for (std::size_t i = 0; i < expect(f[kShapes], ValueKind::kList, kShapes).items.size(); ++i) {
    const RecordedValue& dims = f[kShapes].items[i];
    if (dims.kind != ValueKind::kList) {
      throw Error("LegacyEvent::from_value: " + field_label(kShapes) + ", shape " +
                  std::to_string(i) + " must be a list, got " + kind_text(dims.kind));
    }
    std::vector<std::int64_t>& s = shapes.emplace_back();
    for (const RecordedValue& d : dims.items) {
      if (d.kind != ValueKind::kInt) {
        throw Error("LegacyEvent::from_value: " + field_label(kShapes) + ", shape " +
                    std::to_string(i) + " holds " + kind_text(d.kind) + "; allowed: ints");
      }
      s.push_back(d.i);
    }
  }
  LegacyEvent e(static_cast<LegacyEventKind>(kind),
                expect(f[kName], ValueKind::kString, kName).text,
                static_cast<std::uint64_t>(expect(f[kThreadId], ValueKind::kInt, kThreadId).i),
                expect(f[kCpuNs], ValueKind::kInt, kCpuNs).i, static_cast<std::uint64_t>(handle),
                std::move(shapes), expect(f[kNodeId], ValueKind::kInt, kNodeId).i);
  e.cpu_memory_usage_ = expect(f[kCpuMemoryUsage], ValueKind::kInt, kCpuMemoryUsage).i;
  e.cuda_recorded_ = expect(f[kCudaRecorded], ValueKind::kBool, kCudaRecorded).b;
  e.cuda_memory_usage_ = expect(f[kCudaMemoryUsage], ValueKind::kInt, kCudaMemoryUsage).i;
  const std::int64_t device = expect(f[kCudaDevice], ValueKind::kInt, kCudaDevice).i;
  if (device < -1 || device > std::numeric_limits<std::int8_t>::max()) {
    throw Error("LegacyEvent::from_value: " + field_label(kCudaDevice) + " is " +
                std::to_string(device) + "; allowed: -1 to 127");
  }
  e.device_ = static_cast<std::int32_t>(device);
  const std::int64_t cuda_us = expect(f[kCudaUs], ValueKind::kInt, kCudaUs).i;
  if (cuda_us > std::numeric_limits<std::int64_t>::max() / 1000) {
    throw Error("LegacyEvent::from_value: " + field_label(kCudaUs) + " is " +
                std::to_string(cuda_us) + "; allowed: at most " +
                std::to_string(std::numeric_limits<std::int64_t>::max() / 1000));
  }
  e.cuda_ns_ = cuda_us < 0 ? -1 : cuda_us * 1000;
  e.is_remote_ = true;
  return e;
}

std::string serialize_legacy_events(std::span<const LegacyEvent> events) {
  std::string out(kMagic);
  out.push_back(static_cast<char>(kVersion));
  put_varint(out, events.size());
  for (const LegacyEvent& e : events) put_value(out, e.to_value());
  return out;
}

std::vector<LegacyEvent> deserialize_legacy_events(std::string_view bytes) {
  Reader r(bytes);
  if (bytes.size() < kMagic.size() + 1 || bytes.substr(0, kMagic.size()) != kMagic) {
    throw Error(
        "deserialize_legacy_events: not serialized legacy events (they start with \"OPSCLEV\" "
        "and a version byte)");
  }
  const auto version = static_cast<std::uint8_t>(bytes[kMagic.size()]);
  if (version != kVersion) {
    throw Error("deserialize_legacy_events: format version " + std::to_string(version) +
                "; this build reads version " + std::to_string(kVersion));
  }
  for (std::size_t i = 0; i <= kMagic.size(); ++i) r.byte("header");
  const std::uint64_t count = r.varint("the event count");
  r.need("the event count", count);  // an event takes at least one byte
  std::vector<LegacyEvent> events;
  events.reserve(std::min<std::uint64_t>(count, 4096));  // untrusted: grow as read
  for (std::uint64_t n = 0; n < count; ++n) {
    const std::string where = "event " + std::to_string(n);
    if (r.byte(where) != static_cast<std::uint8_t>(ValueKind::kList)) {
      r.fail(where, "is not a list of fields");
    }
    const std::uint64_t fields = r.varint(where);
    if (fields < kNumFields) {
      r.fail(where, "has " + std::to_string(fields) + " fields; an event has at least " +
                        std::to_string(kNumFields));
    }
    RecordedValue v;
    v.kind = ValueKind::kList;
    for (std::uint64_t f = 0; f < fields; ++f) {
      v.items.push_back(r.value(where + ", " + field_label(f), 1));
    }
    try {
      events.push_back(LegacyEvent::from_value(v));
    } catch (const Error& e) {
      r.fail(where, e.what());
    }
  }
  if (!r.done()) {
    r.fail("after event " + std::to_string(count),
           std::to_string(bytes.size() - r.pos()) + " bytes follow the last event");
  }
  return events;
}

// ---------------------------------------------------------------------------------------------

void write_legacy_trace(std::ostream& out, const ThreadEventLists& lists) {
  if (!out)
    throw Error("write_legacy_trace: Could not open file (the stream is in a failed state)");
  const LegacyEvent* start = nullptr;
  for (const auto& list : lists) {
    for (const LegacyEvent& e : list) {
      if (e.kind() == LegacyEventKind::kMark && e.name() == "__start_profile") {
        start = &e;
        break;
      }
    }
    if (start != nullptr) break;
  }
  if (start == nullptr) {
    throw Error(
        "write_legacy_trace: Could not find __start_profile mark (these events were not "
        "recorded by enable_profiler_legacy/disable_profiler_legacy)");
  }
  // Pushes by (handle, node id), as PyTorch matches them; every pop is checked before a byte
  // is written.
  std::map<std::pair<std::uint64_t, std::int64_t>, const LegacyEvent*> open;
  std::vector<std::pair<const LegacyEvent*, const LegacyEvent*>> ranges;
  for (const auto& list : lists) {
    for (const LegacyEvent& e : list) {
      if (e.kind() == LegacyEventKind::kPushRange) {
        open[{e.handle(), e.node_id()}] = &e;
      } else if (e.kind() == LegacyEventKind::kPopRange) {
        auto it = open.find({e.handle(), e.node_id()});
        if (it == open.end()) {
          throw Error("write_legacy_trace: Unmatched pop event: the pop of handle " +
                      std::to_string(e.handle()) + " on node " + std::to_string(e.node_id()) +
                      " (thread " + std::to_string(e.thread_id()) + ") has no push before it");
        }
        ranges.emplace_back(it->second, &e);
        open.erase(it);
      }
    }
  }
  internal::JsonWriter w;
  w.begin_array();
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const auto [push, pop] = ranges[i];
    w.append(i == 0 ? "\n" : ",\n");
    w.set_need_comma(false);
    w.begin_object();
    w.key("name");
    w.string(push->name());
    w.key("ph");
    w.string("X");
    w.key("ts");
    w.micros(push->cpu_ns() - start->cpu_ns());
    w.key("dur");
    w.micros(pop->cpu_ns() - push->cpu_ns());
    w.key("tid");
    w.uinteger(push->thread_id());
    w.key("pid");
    w.string("CPU Functions");
    w.key("args");
    w.begin_object();
    w.end_object();
    w.end_object();
  }
  w.append("\n");
  w.end_array();
  out << w.view() << '\n';
  out.flush();
  if (!out) throw Error("write_legacy_trace: writing to the stream failed");
}

std::shared_ptr<const ProfilerResult> legacy_result(const ThreadEventLists& lists) {
  ProfilerResult::Builder b;
  b.set_pid(::getpid());
  std::int64_t first_ns = std::numeric_limits<std::int64_t>::max();
  std::int64_t last_ns = std::numeric_limits<std::int64_t>::min();
  std::uint64_t unmatched = 0;
  LensSet lenses;
  struct Open {
    const LegacyEvent* push;
    std::int32_t thread;
  };
  std::map<std::pair<std::uint64_t, std::int64_t>, Open> open;
  std::vector<backend::TimedRange> spans;  // kCUDA: the ranges' CUDA-event times
  for (const auto& list : lists) {
    if (list.empty()) continue;
    const LegacyEvent& head = list.front();
    ThreadInfo info{head.thread_id(), ""};
    if (head.is_remote()) {
      info.name =
          "node " + std::to_string(head.node_id()) + " thread " + std::to_string(head.thread_id());
    }
    const std::int32_t thread = b.add_thread(std::move(info));
    for (const LegacyEvent& e : list) {
      first_ns = std::min(first_ns, e.cpu_ns());
      last_ns = std::max(last_ns, e.cpu_ns());
      Event ev;
      ev.thread = thread;
      ev.start_ns = ev.end_ns = e.cpu_ns();
      switch (e.kind()) {
        case LegacyEventKind::kPushRange:
          open[{e.handle(), e.node_id()}] = {&e, thread};
          continue;
        case LegacyEventKind::kPopRange: {
          auto it = open.find({e.handle(), e.node_id()});
          if (it == open.end()) {
            ++unmatched;
            continue;
          }
          const LegacyEvent& push = *it->second.push;
          ev.thread = it->second.thread;
          open.erase(it);
          ev.name = b.keep(push.name());
          ev.start_ns = push.cpu_ns();
          ev.handle = push.handle();
          ev.sequence_nr = push.sequence_nr();
          ev.forward_thread_id = push.fwd_thread_id();
          ev.scope = push.scope();
          if (push.thread_id() != e.thread_id() || push.is_async()) {
            ev.kind = EventKind::kAsyncRange;
            ev.end_thread = thread;
          } else if (push.has_cuda() && e.has_cuda() && push.device() == e.device()) {
            spans.push_back(
                {push.handle(), push.name(), push.device(), push.cuda_ns(), e.cuda_ns()});
          }
          if (!push.shapes().empty() || push.flops() >= 0) {
            EventDetail d;
            for (const auto& s : push.shapes()) {
              RecordedValue v;
              v.kind = ValueKind::kTensor;
              v.sizes = s;
              d.inputs.push_back(std::move(v));
            }
            d.has_inputs = !push.shapes().empty();
            d.flops = push.flops();
            lenses.record_shapes = lenses.record_shapes || d.has_inputs;
            lenses.with_flops = lenses.with_flops || d.flops >= 0;
            ev.detail = b.add_detail(std::move(d));
          }
          break;
        }
        case LegacyEventKind::kMark:
          ev.name = b.keep(e.name());
          ev.kind = EventKind::kInstant;
          ev.scope = RecordScope::kUserScope;
          break;
        case LegacyEventKind::kMemoryAlloc: {
          ev.name = "[memory]";
          ev.kind = EventKind::kMemory;
          EventDetail d;
          const bool cuda = e.cuda_memory_usage() != 0;
          d.memory.bytes = cuda ? e.cuda_memory_usage() : e.cpu_memory_usage();
          d.memory.device =
              cuda ? Device{DeviceType::kCUDA, static_cast<std::int8_t>(e.device())} : Device{};
          d.memory.action = d.memory.bytes < 0 ? MemoryAction::kFree : MemoryAction::kAllocate;
          lenses.profile_memory = true;
          ev.detail = b.add_detail(std::move(d));
          break;
        }
      }
      b.add_event(ev);
    }
  }
  backend::add_timed_ranges(b, std::move(spans), util::program_name());
  if (first_ns <= last_ns) b.set_window(first_ns, last_ns);
  b.set_lenses(lenses);
  b.stats().events_dropped = unmatched + open.size();
  return b.finish();
}

}  // namespace opscope
