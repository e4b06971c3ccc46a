// The Chrome trace exporter: Kineto's JSON layout (DESIGN.md, "Chrome trace").
//
// Speed comes from three choices, each because export time is time the user waits after
// stop(): the text of an event up to its timestamp (form, escaped name, pid, tid) is made
// once per name and thread and then copied; numbers are written by hand-rolled integer code,
// never printf; and output is gathered in blocks of 256 KiB before it reaches the sink.
#include "export/chrome_trace.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "analysis/flops.h"
#include "analysis/inputs_text.h"
#include "analysis/stacks.h"
#include "json/json_writer.h"
#include "model/kineto_schema.h"
#include "opscope/error.h"
#include "opscope/export.h"
#include "util/mix.h"
#include "util/program_name.h"

namespace opscope::internal {
namespace {

constexpr std::string_view kVersion = "0.1.0";  // the project version (CMakeLists.txt)
// Output reaches the sink in blocks of this size: small enough to stay in a 512 KiB L2
// cache while it is written, large enough that a file costs a few syscalls per MiB.
constexpr std::size_t kFlushBytes = 256 << 10;

// Top-level keys the exporter writes itself; a metadata entry may not replace them.
constexpr std::array<std::string_view, 8> kReservedKeys = {
    kineto::kSchemaVersion,      kineto::kDeviceProperties, kineto::kOpscope,
    kineto::kOpscopeNotRecorded, kineto::kDisplayTimeUnit,  kineto::kBaseTimeNanoseconds,
    kineto::kTraceEvents,        kineto::kTraceName};

constexpr std::size_t padded(std::size_t n) { return (n + 15) & ~std::size_t{15}; }

// Copies `n` bytes in 16-byte chunks: fixed-size copies compile to a few vector moves where
// a memcpy of variable length is a call. Source and destination must have room for
// padded(n) bytes; the bytes past `n` at the destination are overwritten by what follows.
inline char* copy_padded(char* p, std::string_view s) {
  for (std::size_t i = 0; i < s.size(); i += 16) std::memcpy(p + i, s.data() + i, 16);
  return p + s.size();
}

// The text of an event up to its timestamp ({"ph":"X","cat":"cpu_op","name":"aten::mm",
// "pid":1,"tid":2,"ts":), made once per name and form on a thread and then copied whole.
// Keyed by the address and length of the name's characters: the events of one call site
// share them. Events come grouped by thread, so the cache starts over at each thread and
// holds only that thread's names: the table and its text stay in L1.
class PrefixCache {
 public:
  PrefixCache() : slots_(512) {}

  // Forgets everything; the next get()s build prefixes for `thread_text` (,"pid":..,"ts":).
  void start_thread(std::string_view thread_text) {
    thread_text_ = thread_text;
    ++generation_;  // invalidates every slot without touching them
    count_ = 0;
    text_.clear();
  }

  // The prefix of `name` in the form that `open` begins. The returned text is followed by
  // padding up to a multiple of 16 bytes, so copy_padded() may copy it in whole chunks.
  std::string_view get(std::string_view name, std::string_view open) {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = hash(name, open) & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.generation != generation_) return insert(name, open, i);
      if (s.data == name.data() && s.size == name.size() && s.open == open.data()) {
        return {text_.data() + s.offset, s.length};
      }
    }
  }

 private:
  struct Slot {
    const char* data = nullptr;
    const char* open = nullptr;  // which form: the forms are distinct constants
    std::size_t size = 0;
    std::size_t offset = 0;
    std::size_t length = 0;
    std::uint64_t generation = 0;
  };
  [[gnu::noinline]] std::string_view insert(std::string_view name, std::string_view open,
                                            std::size_t i) {
    if (2 * (count_ + 1) > slots_.size()) {
      rehash();
      return get(name, open);
    }
    const std::size_t offset = text_.size();
    text_.resize(offset + open.size() + escaped_bound(name.size()) + thread_text_.size());
    char* p = put(text_.data() + offset, open);
    p = put_escaped(p, name);
    p = put(p, thread_text_);
    const auto length = static_cast<std::size_t>(p - (text_.data() + offset));
    text_.resize(offset + padded(length));
    slots_[i] = Slot{name.data(), open.data(), name.size(), offset, length, generation_};
    ++count_;
    return {text_.data() + offset, length};
  }

  static std::size_t hash(std::string_view name, std::string_view open) {
    const std::uint64_t x = reinterpret_cast<std::uintptr_t>(name.data()) ^
                            (static_cast<std::uint64_t>(name.size()) << 40) ^
                            (reinterpret_cast<std::uintptr_t>(open.data()) << 17);
    return static_cast<std::size_t>((x * 0x9E3779B97F4A7C15ull) >> 24);
  }
  void rehash() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    const std::size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.generation != generation_) continue;
      std::size_t i = hash({s.data, s.size}, {s.open, 0}) & mask;
      while (slots_[i].generation == generation_) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  std::size_t count_ = 0;
  std::uint64_t generation_ = 1;  // slots start at 0: empty
  std::string text_;
  std::string_view thread_text_;
};

std::string program_name(std::int64_t pid) {
  // /proc/self/comm names this process; a result from elsewhere (an import) keeps a neutral
  // name rather than borrowing ours.
  if (pid != ::getpid()) return "opscope";
  const std::string name = util::program_name();
  return name.empty() ? "opscope" : name;
}

bool is_reserved(std::string_view key) {
  return std::find(kReservedKeys.begin(), kReservedKeys.end(), key) != kReservedKeys.end();
}

// Top-level keys one per line, so a person can read the head of the file.
void key_on_new_line(JsonWriter& w, std::string_view key) {
  w.append(",\n");
  w.set_need_comma(false);
  w.key(key);
}

// Kineto's "trace_id" (torch 2.x): 32 upper-case hex digits naming the trace. Kineto draws
// them at random; here they come from the window itself (process, start, end, events), so that
// one result exported twice is the same file while two windows get different names.
std::string trace_id_of(const ProfilerResult& r) {
  using util::mix64;
  const std::uint64_t seed = mix64(static_cast<std::uint64_t>(r.pid())) ^
                             mix64(static_cast<std::uint64_t>(r.start_time_ns()) + 1) ^
                             mix64(static_cast<std::uint64_t>(r.end_time_ns()) + 2) ^
                             mix64(r.events().size() + 3);
  char id[33];
  std::snprintf(id, sizeof id, "%016llX%016llX", static_cast<unsigned long long>(mix64(seed)),
                static_cast<unsigned long long>(mix64(seed + 0x9E3779B97F4A7C15ull)));
  return id;
}

void write_header(JsonWriter& w, const ProfilerResult& r) {
  w.begin_object();
  w.key(kineto::kSchemaVersion);
  w.integer(1);
  w.key(kineto::kDeviceProperties);
  std::string error;
  if (!r.device_properties().empty() && is_valid_json(r.device_properties(), &error)) {
    w.raw(r.device_properties());
  } else {
    w.begin_array();
    w.end_array();
  }
  // An imported trace keeps its own id (among its metadata, below).
  if (std::none_of(r.metadata().begin(), r.metadata().end(),
                   [](const auto& kv) { return kv.first == kineto::kTraceId; })) {
    key_on_new_line(w, kineto::kTraceId);
    w.string(trace_id_of(r));
  }
  for (const auto& [key, value] : r.metadata()) {
    if (is_reserved(key)) {
      warn("trace metadata '" + key + "' is ignored: the exporter writes that key itself");
      continue;
    }
    key_on_new_line(w, key);
    if (is_valid_json(value, &error)) {
      w.raw(value);
    } else {
      // A broken value must not break the whole file: keep it, as a string.
      warn("trace metadata '" + key + "' is not JSON (" + error + "); written as a string");
      w.string(value);
    }
  }
  const SessionStats& s = r.stats();
  key_on_new_line(w, kineto::kOpscope);
  w.begin_object();
  w.key("version");
  w.string(kVersion);
  w.key("events_recorded");
  w.uinteger(s.events_recorded);
  w.key("events_dropped");
  w.uinteger(s.events_dropped);
  w.key("ranges_open_at_stop");
  w.uinteger(s.ranges_open_at_stop);
  w.key("gpu_records_discarded");
  w.uinteger(s.gpu_records_discarded);
  w.key("buffer_bytes");
  w.uinteger(s.buffer_bytes);
  w.key("buffer_limit_bytes");
  w.uinteger(s.buffer_limit_bytes);
  w.key("not_recorded");
  w.begin_array();
  for (const std::string& option : s.not_recorded) w.string(option);
  w.end_array();
  // What the window recorded besides times, by the names ProfilerConfig gives them.
  w.key("lenses");
  w.begin_array();
  for (const LensField& lens : kLensFields) {
    if (r.lenses().*lens.member) w.string(lens.name);
  }
  w.end_array();
  w.end_object();
  if (!s.not_recorded.empty()) {
    // Also at the top level, where a person opening the file sees it first.
    key_on_new_line(w, kineto::kOpscopeNotRecorded);
    w.begin_array();
    for (const std::string& option : s.not_recorded) w.string(option);
    w.end_array();
  }
  key_on_new_line(w, kineto::kDisplayTimeUnit);
  w.string("ms");
  w.key(kineto::kBaseTimeNanoseconds);
  w.integer(r.start_time_ns());
}

// A thread's id as the trace writes it: signed, as Kineto writes its ids, so that its thread -1
// (syncs on no stream, which the model holds as all ones) comes out as -1 and reads back as
// the same id; an OS thread id is far below the sign bit and unchanged.
std::int64_t trace_tid(std::uint64_t tid) { return static_cast<std::int64_t>(tid); }

// One "ph":"M" event naming or ordering a process or thread: {"name":"thread_name",...,
// "args":{"name":"main"}}. `first` is the first element of traceEvents.
template <typename Value>
void write_metadata_event(JsonWriter& w, bool first, std::string_view what, std::int64_t pid,
                          std::uint64_t tid, std::string_view arg_key, const Value& value) {
  w.append(first ? "\n" : ",\n");
  w.set_need_comma(false);
  w.begin_object();
  w.key("name");
  w.string(what);
  w.key("ph");
  w.string("M");
  w.key("ts");
  w.micros(0);
  w.key("pid");
  w.integer(pid);
  w.key("tid");
  w.integer(trace_tid(tid));
  w.key("args");
  w.begin_object();
  w.key(arg_key);
  if constexpr (std::is_integral_v<Value>) {
    w.integer(static_cast<std::int64_t>(value));
  } else {
    w.string(value);
  }
  w.end_object();
  w.end_object();
}

// The text before an event's name, by form.
constexpr std::string_view kOpenRange = R"({"ph":"X","cat":"cpu_op","name":)";
constexpr std::string_view kOpenUserRange = R"({"ph":"X","cat":"user_annotation","name":)";
constexpr std::string_view kOpenAsync = R"({"ph":"b","cat":"cpu_op","name":)";
constexpr std::string_view kOpenUserAsync = R"({"ph":"b","cat":"user_annotation","name":)";
constexpr std::string_view kCloseAsync = R"({"ph":"e","cat":"cpu_op","name":)";
constexpr std::string_view kCloseUserAsync = R"({"ph":"e","cat":"user_annotation","name":)";
static_assert(kOpenAsync.size() == kCloseAsync.size() &&
              kOpenUserAsync.size() == kCloseUserAsync.size());
constexpr std::string_view kOpenInstant = R"({"ph":"i","s":"t","cat":"cpu_instant_event","name":)";
// The opening of a complete event of category `cat`: {"ph":"X","cat":"kernel","name":
std::string complete_open(std::string_view cat) {
  JsonWriter w(64);
  w.string(cat);
  return R"({"ph":"X","cat":)" + std::string(w.view()) + R"(,"name":)";
}

// Bytes an event may need besides its prefixes: separators, numbers of at most 25 bytes,
// keys and braces. Checked generously.
constexpr std::size_t kEventSlack = 512;

// The keys put_args() copies, each with its quotes, its colon and what comes before it.
constexpr auto kArgsExternalIdText = kineto::spliced(",\"args\":{\"", kineto::kExternalId, "\":");
constexpr auto kRecordFunctionIdText = kineto::spliced(",\"", kineto::kRecordFunctionId, "\":");
constexpr auto kSequenceNumberText = kineto::spliced(",\"", kineto::kSequenceNumber, "\":");
constexpr auto kFwdThreadIdText = kineto::spliced(",\"", kineto::kFwdThreadId, "\":");
constexpr std::string_view kArgsExternalId = kineto::text_of(kArgsExternalIdText);
constexpr std::string_view kRecordFunctionIdKey = kineto::text_of(kRecordFunctionIdText);
constexpr std::string_view kSequenceNumberKey = kineto::text_of(kSequenceNumberText);
constexpr std::string_view kFwdThreadIdKey = kineto::text_of(kFwdThreadIdText);
static_assert(kArgsExternalId == R"(,"args":{"External id":)");

char* put_args(char* p, const Event& e) {
  // The handle is written twice: format it once, copy it as a fixed 24-byte block.
  char digits[24];
  const auto n = static_cast<std::size_t>(put_uint(digits, e.handle) - digits);
  p = put(p, kArgsExternalId);
  std::memcpy(p, digits, sizeof digits);
  p = put(p + n, kRecordFunctionIdKey);
  std::memcpy(p, digits, sizeof digits);
  p += n;
  if (e.sequence_nr >= 0) {
    p = put(p, kSequenceNumberKey);
    p = put_int(p, e.sequence_nr);
  }
  if (e.forward_thread_id != 0) {
    p = put(p, kFwdThreadIdKey);
    p = put_uint(p, e.forward_thread_id);
  }
  return p;
}

// The args lenses add to a range (record_shapes, with_stack, with_modules, with_flops), after
// the fixed ones; the writer is positioned inside "args".
void write_detail_args(JsonWriter& w, const ProfilerResult& r, const Event& e,
                       std::optional<analysis::Symbolizer>& symbolizer) {
  const EventDetail& d = *r.detail(e);
  w.set_need_comma(true);
  if (d.has_inputs && r.lenses().record_shapes) {
    w.key(kineto::kInputDims);
    w.begin_array();
    for (const RecordedValue& v : d.inputs) w.raw(analysis::shape_text(v));
    w.end_array();
    w.key(kineto::kInputType);
    w.begin_array();
    for (const RecordedValue& v : d.inputs) w.string(analysis::type_text(v));
    w.end_array();
    bool any_strides = false, any_scalar = false;
    for (const RecordedValue& v : d.inputs) {
      any_strides |= !v.strides.empty();
      any_scalar |= !analysis::concrete_text(v).empty();
    }
    if (any_strides) {
      w.key(kineto::kInputStrides);
      w.begin_array();
      for (const RecordedValue& v : d.inputs) {
        w.begin_array();
        for (std::int64_t x : v.strides) w.integer(x);
        w.end_array();
      }
      w.end_array();
    }
    if (any_scalar) {
      w.key(kineto::kConcreteInputs);
      w.begin_array();
      for (const RecordedValue& v : d.inputs) w.string(analysis::concrete_text(v));
      w.end_array();
    }
  }
  if (r.lenses().with_flops) {
    const std::int64_t flops = analysis::flops_of(r, e);
    if (flops > 0) {
      w.key(kineto::kFlops);
      w.integer(flops);
    }
  }
  if (!d.module_path.empty()) {
    w.key(kineto::kModuleHierarchy);
    w.string(d.module_path);
  }
  if (d.stack >= 0 && r.trace_call_stacks()) {
    if (!symbolizer) symbolizer.emplace();
    std::string text;
    for (const std::string& frame : analysis::stack_text(r, e, *symbolizer)) {
      if (!text.empty()) text += ';';
      text += frame;
    }
    w.key(kineto::kCallStack);
    w.string(text);
  }
}

// The members of an event's other args (ProfilerResult::other_args: {"a":1,...}, JSON
// already), spliced into the args object being written after what it holds so far.
void splice_other_args(JsonWriter& w, const ProfilerResult& r, const Event& e) {
  const std::string_view other = r.other_args(e);
  if (other.size() <= 2 || other.front() != '{' || other.back() != '}') return;
  if (w.view().back() != '{') w.append(",");
  w.append(other.substr(1, other.size() - 2));
  w.set_need_comma(true);
}

// The args of GPU work and of runtime and driver calls, with Kineto's keys, then whatever
// else the trace they were read from carried (ProfilerResult::other_args).
void write_gpu_args(JsonWriter& w, const ProfilerResult& r, const Event& e) {
  w.set_need_comma(true);
  w.key("args");
  w.begin_object();
  if (const EventDetail* d = r.detail(e)) {
    const GpuInfo& g = d->gpu;
    const auto field = [&](std::string_view key, std::int64_t v) {
      if (v < 0) return;
      w.key(key);
      w.integer(v);
    };
    const auto triple = [&](std::string_view key, const std::int32_t(&v)[3]) {
      if (v[0] == 0 && v[1] == 0 && v[2] == 0) return;
      w.key(key);
      w.begin_array();
      for (std::int32_t x : v) w.integer(x);
      w.end_array();
    };
    field(kineto::kDevice, g.device);
    field(kineto::kStream, g.stream);
    field(kineto::kCorrelation, g.correlation);
    field(kineto::kExternalId, g.external_id);
    triple(kineto::kGrid, g.grid);
    triple(kineto::kBlock, g.block);
    field(kineto::kRegistersPerThread, g.registers_per_thread);
    field(kineto::kSharedMemory, g.shared_memory);
    field(kineto::kBytes, g.bytes);
  }
  splice_other_args(w, r, e);
  w.end_object();
}

// The flows whose ends were both found, as Kineto writes them: a "s" at the start of the event
// it leaves (a runtime call, for "ac2g") and a "f" at the start of the one it reaches, binding
// to that enclosing slice ("bp":"e"). `thread_text`: each thread's ,"pid":P,"tid":T,"ts":.
void write_flows(JsonWriter& w, const ProfilerResult& r,
                 const std::vector<std::string>& thread_text) {
  const std::vector<Event>& events = r.events();
  const std::int64_t base = r.start_time_ns();
  for (const Flow& f : r.flows()) {
    if (f.from < 0 || f.to < 0) continue;
    for (const bool start : {true, false}) {
      const Event& e = events[static_cast<std::size_t>(start ? f.from : f.to)];
      w.append(start ? ",\n{\"ph\":\"s\",\"id\":" : ",\n{\"ph\":\"f\",\"id\":");
      w.set_need_comma(false);
      w.integer(f.id);
      w.append(thread_text[static_cast<std::size_t>(e.thread)]);
      w.set_need_comma(false);
      w.micros(e.start_ns - base);
      w.append(",\"cat\":");
      w.set_need_comma(false);
      w.string(f.category);
      w.append(",\"name\":");
      w.set_need_comma(false);
      w.string(f.category);
      w.append(start ? "}" : ",\"bp\":\"e\"}");
    }
  }
}

// A "[memory]" instant's args, as Kineto writes them, then the other args it was read with;
// closes the event.
void write_memory_args(JsonWriter& w, const ProfilerResult& r, const Event& e, const MemoryUse& m) {
  w.set_need_comma(true);
  w.key("args");
  w.begin_object();
  w.key(kineto::kDeviceType);
  w.integer(static_cast<std::int64_t>(m.device.type));
  w.key(kineto::kDeviceId);
  w.integer(m.device.index);
  w.key(kineto::kAddr);
  w.uinteger(m.address);
  w.key(kineto::kMemoryBytes);
  w.integer(m.bytes);
  w.key(kineto::kTotalAllocated);
  w.integer(m.total_allocated);
  w.key(kineto::kTotalReserved);
  w.integer(m.total_reserved);
  if (m.action == MemoryAction::kVersion) {  // opscope's: an in-place write, not an allocation
    w.key(kineto::kOpscopeAction);
    w.string("version");
  }
  splice_other_args(w, r, e);
  w.end_object();
  w.end_object();
}

}  // namespace

void write_chrome_trace(const ProfilerResult& r, std::string_view trace_name, Sink& sink) {
  JsonWriter w(kFlushBytes + 64 * 1024);
  write_header(w, r);
  key_on_new_line(w, kineto::kTraceEvents);
  w.begin_array();

  // Process and thread names first, as Kineto writes them; there is always one, so every
  // later event can start with ",\n".
  const std::int64_t pid = r.pid();
  write_metadata_event(w, true, kineto::kProcessName, pid, 0, kineto::kNameArg, program_name(pid));
  write_metadata_event(w, false, kineto::kProcessLabels, pid, 0, kineto::kLabelsArg, "CPU");
  write_metadata_event(w, false, kineto::kProcessSortIndex, pid, 0, kineto::kSortIndexArg, pid);
  for (const ProcessInfo& p : r.processes()) {
    write_metadata_event(w, false, kineto::kProcessName, p.pid, 0, kineto::kNameArg, p.name);
    if (!p.labels.empty()) {
      write_metadata_event(w, false, kineto::kProcessLabels, p.pid, 0, kineto::kLabelsArg,
                           p.labels);
    }
    write_metadata_event(w, false, kineto::kProcessSortIndex, p.pid, 0, kineto::kSortIndexArg,
                         p.sort_index >= 0 ? p.sort_index : p.pid);
  }
  // The openings of the complete events other than ranges: per named category
  // (Event::category), and per kind for the category the kind implies (index: the kind).
  std::vector<std::string> category_open;
  for (const std::string& c : r.categories()) category_open.push_back(complete_open(c));
  std::vector<std::string> kind_open;
  for (int k = 0; k <= static_cast<int>(EventKind::kOther); ++k) {
    const std::string_view implied =
        implied_category(static_cast<EventKind>(k), RecordScope::kFunction);
    kind_open.push_back(complete_open(implied.empty() ? "other" : implied));
  }
  const std::vector<ThreadInfo>& threads = r.threads();
  std::vector<std::string> thread_text;  // ,"pid":P,"tid":T,"ts": per thread
  thread_text.reserve(threads.size());
  for (std::size_t i = 0; i < threads.size(); ++i) {
    const ThreadInfo& t = threads[i];
    const std::string name = t.name.empty() ? "thread " + std::to_string(trace_tid(t.tid)) : t.name;
    const std::int64_t thread_pid = r.pid_of(t);
    write_metadata_event(w, false, kineto::kThreadName, thread_pid, t.tid, kineto::kNameArg, name);
    // In the order threads first recorded, which puts the main thread first.
    write_metadata_event(w, false, kineto::kThreadSortIndex, thread_pid, t.tid,
                         kineto::kSortIndexArg, i);
    thread_text.push_back(",\"pid\":" + std::to_string(thread_pid) +
                          ",\"tid\":" + std::to_string(trace_tid(t.tid)) + ",\"ts\":");
  }

  PrefixCache prefixes;
  std::optional<analysis::Symbolizer> symbolizer;  // for "Call stack", created on first use
  std::int32_t current_thread = -1;
  const std::int64_t base = r.start_time_ns();
  for (const Event& e : r.events()) {
    if (e.thread != current_thread) [[unlikely]] {
      if (e.thread < 0 || static_cast<std::size_t>(e.thread) >= threads.size()) {
        throw Error("cannot export Chrome trace: an event names thread " +
                    std::to_string(e.thread) + " of " + std::to_string(threads.size()));
      }
      current_thread = e.thread;
      prefixes.start_thread(thread_text[static_cast<std::size_t>(e.thread)]);
    }
    const bool user = e.scope == RecordScope::kUserScope;
    std::string_view open;
    switch (e.kind) {
      case EventKind::kRange:
        open = user ? kOpenUserRange : kOpenRange;
        break;
      case EventKind::kAsyncRange:
        open = user ? kOpenUserAsync : kOpenAsync;
        break;
      case EventKind::kInstant:
      case EventKind::kMemory:
        open = kOpenInstant;
        break;
      case EventKind::kKernel:
      case EventKind::kMemcpy:
      case EventKind::kMemset:
      case EventKind::kRuntime:
      case EventKind::kDriver:
      case EventKind::kGpuAnnotation:
      case EventKind::kOther:
        open = e.category != 0 && e.category < category_open.size()
                   ? std::string_view(category_open[e.category])
                   : std::string_view(kind_open[static_cast<std::size_t>(e.kind)]);
        break;
    }
    const std::string_view prefix = prefixes.get(e.name, open);
    char* p = w.reserve(kEventSlack + 2 * padded(prefix.size()));
    p = put(p, ",\n");
    p = copy_padded(p, prefix);
    p = put_micros(p, e.start_ns - base);
    switch (e.kind) {
      case EventKind::kRange:
        p = put(p, R"(,"dur":)");
        p = put_micros(p, e.end_ns - e.start_ns);
        p = put_args(p, e);
        if (e.detail >= 0 || e.other_args >= 0) [[unlikely]] {
          w.commit(p);
          if (e.detail >= 0) write_detail_args(w, r, e, symbolizer);
          splice_other_args(w, r, e);
          p = w.reserve(8);
        }
        p = put(p, "}}");
        break;
      case EventKind::kAsyncRange: {
        p = put(p, R"(,"id":)");
        p = put_uint(p, e.handle);
        p = put_args(p, e);
        if (e.detail >= 0 || e.other_args >= 0) [[unlikely]] {
          w.commit(p);
          if (e.detail >= 0) write_detail_args(w, r, e, symbolizer);
          splice_other_args(w, r, e);
          p = w.reserve(kEventSlack + 2 * padded(prefix.size()));
        }
        p = put(p, "}},\n");
        // Room was reserved for two prefixes of the same length.
        p = copy_padded(p, prefixes.get(e.name, user ? kCloseUserAsync : kCloseAsync));
        p = put_micros(p, e.end_ns - base);
        p = put(p, R"(,"id":)");
        p = put_uint(p, e.handle);
        p = put(p, "}");
        break;
      }
      case EventKind::kInstant:
        if (e.other_args >= 0) [[unlikely]] {
          w.commit(p);
          w.append(R"(,"args":{)");
          splice_other_args(w, r, e);
          w.append("}");
          p = w.reserve(8);
        }
        p = put(p, "}");
        break;
      case EventKind::kMemory:
        w.commit(p);
        if (const EventDetail* d = r.detail(e)) {
          write_memory_args(w, r, e, d->memory);
        } else {
          w.append("}");
        }
        p = w.reserve(0);
        break;
      case EventKind::kKernel:
      case EventKind::kMemcpy:
      case EventKind::kMemset:
      case EventKind::kRuntime:
      case EventKind::kDriver:
      case EventKind::kGpuAnnotation:
      case EventKind::kOther:
        p = put(p, R"(,"dur":)");
        p = put_micros(p, e.end_ns - e.start_ns);
        w.commit(p);
        write_gpu_args(w, r, e);
        w.append("}");
        p = w.reserve(0);
        break;
    }
    w.commit(p);
    if (w.size() >= kFlushBytes) [[unlikely]] {
      sink.write(w.view());
      w.clear();
    }
  }
  write_flows(w, r, thread_text);

  w.append("\n");
  w.end_array();
  key_on_new_line(w, kineto::kTraceName);
  w.string(trace_name);
  w.end_object();
  w.append("\n");
  sink.write(w.view());
  sink.commit();
}

}  // namespace opscope::internal

namespace opscope {

std::string chrome_trace_json(const ProfilerResult& result, const std::string& trace_name) {
  internal::MemorySink sink;
  // An event takes 150 to 200 bytes: one allocation instead of a doubling series.
  sink.reserve(4096 + 200 * result.events().size());
  internal::write_chrome_trace(result, trace_name, sink);
  return sink.take();
}

}  // namespace opscope
