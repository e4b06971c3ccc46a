// The execution trace observer: every observed range becomes a node of the Chakra ET graph,
// written to a FileSink as the range ends (opscope/execution_trace.h says what is written).
#include "opscope/execution_trace.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "export/sink.h"
#include "json/json_reader.h"
#include "json/json_writer.h"
#include "opscope/error.h"
#include "opscope/profiler.h"
#include "opscope/observer.h"
#include "opscope/record_function.h"
#include "opscope/value.h"

namespace opscope {
namespace {

constexpr std::uint64_t kRootId = 1;
constexpr std::string_view kRootName = "[pytorch|profiler|execution_trace|process]";
constexpr std::string_view kThreadName = "[pytorch|profiler|execution_trace|thread]";
constexpr std::string_view kProcessGroupRange = "## process_group:init ##";
constexpr auto kUserScope = static_cast<std::uint64_t>(RecordScope::kUserScope);
// Nodes are handed to the file sink in blocks of about this size (the sink writes them on a
// thread of its own): few sink calls under the observer's mutex, bounded memory.
constexpr std::size_t kFlushBytes = 1 << 20;

std::int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string local_time_text() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char text[32];
  const std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
  return std::string(text, n);
}

// Bytes per element of PyTorch's dtype names (c10's ScalarType names as dtype().name()
// prints them); 0 for a name not listed.
std::uint64_t itemsize_of(std::string_view dtype) {
  struct Size {
    std::string_view name;
    std::uint64_t bytes;
  };
  static constexpr Size kSizes[] = {
      {"float", 4},
      {"double", 8},
      {"long int", 8},
      {"int", 4},
      {"short int", 2},
      {"signed char", 1},
      {"unsigned char", 1},
      {"bool", 1},
      {"c10::Half", 2},
      {"c10::BFloat16", 2},
      {"c10::complex<float>", 8},
      {"c10::complex<double>", 16},
      {"c10::complex<c10::Half>", 4},
      {"c10::Float8_e5m2", 1},
      {"c10::Float8_e4m3fn", 1},
      {"unsigned short", 2},
      {"unsigned int", 4},
      {"unsigned long", 8},
  };
  for (const Size& s : kSizes) {
    if (s.name == dtype) return s.bytes;
  }
  return 0;
}

// The four parallel arrays a node keeps for its inputs (or outputs), as PyTorch's
// convertIValue produces them.
struct ValueArrays {
  internal::JsonWriter values;
  internal::JsonWriter shapes;
  internal::JsonWriter types;
  internal::JsonWriter strides;

  ValueArrays() {
    values.begin_array();
    shapes.begin_array();
    types.begin_array();
    strides.begin_array();
  }

  // {"values": [...], "shapes": [...], "types": [...], "strides": [...]}
  std::string finish() {
    values.end_array();
    shapes.end_array();
    types.end_array();
    strides.end_array();
    internal::JsonWriter w(values.size() + shapes.size() + types.size() + strides.size() + 64);
    w.begin_object();
    w.key("values");
    w.raw(values.view());
    w.key("shapes");
    w.raw(shapes.view());
    w.key("types");
    w.raw(types.view());
    w.key("strides");
    w.raw(strides.view());
    w.end_object();
    return w.str();
  }
};

void write_ints(internal::JsonWriter& w, std::span<const std::int64_t> ints) {
  w.begin_array();
  for (std::int64_t i : ints) w.integer(i);
  w.end_array();
}

// What converting values needs from the trace: ids for tensors, and one warning per trace
// about cut lists.
struct ConvertContext {
  std::atomic<std::uint64_t>& next_id;
  std::atomic<bool>& warned_cut;
};

// Writes one value's entry into each of the four arrays and appends its type name to `type`
// (a list's type names its elements': "GenericList[Tensor(float),Int]").
void convert(const Value& v, ConvertContext& cx, ValueArrays& out, std::string& type) {
  switch (v.kind()) {
    case ValueKind::kTensor: {
      const auto sizes = v.sizes();
      std::uint64_t numel = 1;
      for (std::int64_t s : sizes) numel *= static_cast<std::uint64_t>(s < 0 ? 0 : s);
      type += "Tensor(";
      type += v.dtype();
      type += ')';
      write_ints(out.shapes, sizes);
      write_ints(out.strides, v.strides());
      out.values.begin_array();
      out.values.uinteger(cx.next_id.fetch_add(1, std::memory_order_relaxed));  // tensor id
      out.values.uinteger(0);                                                   // storage id
      out.values.uinteger(0);                                                   // offset
      out.values.uinteger(numel);
      out.values.uinteger(itemsize_of(v.dtype()));
      out.values.string(v.device());
      out.values.end_array();
      return;
    }
    case ValueKind::kList: {
      const auto items = v.items();
      std::size_t n = items.size();
      if (n > kMaxRecordedListItems) {
        n = kMaxRecordedListItems;
        if (!cx.warned_cut.exchange(true)) {
          warn("execution trace: a list of " + std::to_string(items.size()) +
               " elements was cut to its first " + std::to_string(kMaxRecordedListItems) +
               " (said once per trace)");
        }
      }
      type += "GenericList[";
      out.values.begin_array();
      out.shapes.begin_array();
      out.strides.begin_array();
      for (std::size_t i = 0; i < n; ++i) {
        if (i > 0) type += ',';
        convert(items[i], cx, out, type);
      }
      out.values.end_array();
      out.shapes.end_array();
      out.strides.end_array();
      type += ']';
      return;
    }
    case ValueKind::kInt:
      type += "Int";
      out.values.integer(v.to_int());
      break;
    case ValueKind::kDouble: {
      type += "Double";
      const double d = v.to_double();
      if (std::isnan(d)) {
        out.values.string("nan");
      } else if (std::isinf(d)) {
        out.values.string(d > 0 ? "inf" : "-inf");
      } else {
        out.values.number(d);
      }
      break;
    }
    case ValueKind::kBool:
      type += "Bool";
      out.values.boolean(v.to_bool());
      break;
    case ValueKind::kString:
      type += "String";
      out.values.string(v.to_string());
      break;
    case ValueKind::kNone:
      type += "None";
      out.values.string("<None>");
      break;
  }
  // Scalars have no shape or strides.
  out.shapes.begin_array();
  out.shapes.end_array();
  out.strides.begin_array();
  out.strides.end_array();
}

std::string convert_all(std::span<const Value> values, ConvertContext& cx) {
  ValueArrays out;
  std::string type;
  for (const Value& v : values) {
    type.clear();
    convert(v, cx, out, type);
    out.types.string(type);
  }
  return out.finish();
}

const std::string& no_values() {
  static const std::string empty = ValueArrays().finish();
  return empty;
}

// One JSON value written back as text (the reader keeps a DOM, not the text).
void write_json(internal::JsonWriter& w, const internal::JsonValue& v) {
  using Type = internal::JsonValue::Type;
  switch (v.type()) {
    case Type::kNull:
      w.null();
      break;
    case Type::kBool:
      w.boolean(v.as_bool());
      break;
    case Type::kNumber:
      if (v.is_integer()) {
        w.integer(v.as_int());
      } else {
        w.number(v.as_double());
      }
      break;
    case Type::kString:
      w.string(v.as_string());
      break;
    case Type::kArray:
      w.begin_array();
      for (const auto& item : v.as_array()) write_json(w, item);
      w.end_array();
      break;
    case Type::kObject:
      w.begin_object();
      for (const auto& [key, item] : v.as_object()) {
        w.key(key);
        write_json(w, item);
      }
      w.end_object();
      break;
  }
}

// The input of the "## process_group:init ##" range: the "pg_config" member of the
// distributed info when it has one (what PyTorch records), else the whole of it.
std::string process_group_config(const std::string& distributed_info) {
  const internal::JsonValue info = internal::parse_json(distributed_info);
  const internal::JsonValue* pg = info.find("pg_config");
  if (pg == nullptr) return distributed_info;
  internal::JsonWriter w;
  write_json(w, *pg);
  return w.str();
}

struct NodeFields {
  std::string_view name;
  std::uint64_t id;
  std::uint64_t rf_id = 0;
  std::uint64_t parent = kRootId;
  std::uint64_t fw_parent = 0;
  std::int64_t seq_id = -1;
  std::uint64_t scope = kUserScope;
  std::uint64_t tid = 0;
  std::uint64_t fw_tid = 0;
  const std::string* inputs = &no_values();
  const std::string* outputs = &no_values();
};

// Text that is already JSON and needs no escaping (the constant keys and attribute objects
// of a node), followed by a value: escaping these constants was a sixth of a node's cost.
void put_before_value(internal::JsonWriter& w, std::string_view json) {
  w.append(json);
  w.set_need_comma(false);
}

void write_node(internal::JsonWriter& w, const NodeFields& n) {
  w.begin_object();
  put_before_value(w, R"("id":)");
  w.uinteger(n.id);
  put_before_value(w, R"(,"name":)");
  w.string(n.name);
  put_before_value(w, R"(,"ctrl_deps":)");
  w.uinteger(n.parent);
  put_before_value(w, R"(,"inputs":)");
  w.raw(*n.inputs);
  put_before_value(w, R"(,"outputs":)");
  w.raw(*n.outputs);
  put_before_value(w, R"(,"attrs":[{"name":"rf_id","type":"uint64","value":)");
  w.uinteger(n.rf_id);
  put_before_value(w, R"(},{"name":"fw_parent","type":"uint64","value":)");
  w.uinteger(n.fw_parent);
  put_before_value(w, R"(},{"name":"seq_id","type":"int64","value":)");
  w.integer(n.seq_id);
  put_before_value(w, R"(},{"name":"scope","type":"uint64","value":)");
  w.uinteger(n.scope);
  put_before_value(w, R"(},{"name":"tid","type":"uint64","value":)");
  w.uinteger(n.tid);
  put_before_value(w, R"(},{"name":"fw_tid","type":"uint64","value":)");
  w.uinteger(n.fw_tid);
  // PyTorch's string attributes; opscope knows no operator schema or kernel file.
  w.append(R"(},{"name":"op_schema","type":"string","value":""})"
           R"(,{"name":"kernel_backend","type":"string","value":""})"
           R"(,{"name":"kernel_file","type":"string","value":""}])");
  w.end_object();
}

// What a range's start callback hands its end callback.
struct OpContext final : ObserverContext {
  std::string name;
  std::string inputs;
  std::uint64_t id = 0;
  std::uint64_t parent = 0;
  std::uint64_t fw_parent = 0;
  std::uint64_t tid = 0;
};

// One trace file and the graph state behind it. Shared by the observer and its callbacks: a
// range that began while running may end after unregister_callback(), and then finds the
// file closed.
class Trace {
 public:
  explicit Trace(const std::string& path)
      : sink_(std::make_unique<internal::FileSink>(
            path, internal::FileSinkOptions{.what = "execution trace"})) {
    out_.begin_object();
    out_.key("schema");
    out_.string("1.1.1-chakra.0.0.4");
    out_.key("pid");
    out_.integer(::getpid());
    out_.key("time");
    out_.string(local_time_text());
    out_.key("start_ts");
    out_.integer(steady_ms());
    out_.key("nodes");
    out_.begin_array();
  }

  std::atomic<bool> running{false};

  std::unique_ptr<ObserverContext> on_start(const RecordFunction& rf) {
    if (!running.load(std::memory_order_acquire)) return nullptr;
    auto op = std::make_unique<OpContext>();
    op->name = rf.name();
    op->tid = rf.thread_id();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!sink_) return nullptr;
      std::vector<std::uint64_t>& stack = stacks_[op->tid];
      if (stack.empty()) {
        // The thread's first range: its thread node opens the stack.
        const std::uint64_t thread_node = new_id();
        stack.push_back(thread_node);
        write_node(out_, {.name = kThreadName, .id = thread_node, .tid = op->tid});
      }
      op->parent = stack.back();
      if (const std::uint64_t fw_tid = rf.forward_thread_id(); fw_tid != 0) {
        op->fw_parent = top_of(fw_tid);
      }
      // Taken under the lock, after the parent's: a child's id is larger than its parent's,
      // and the inputs' tensor ids are larger than the op's.
      op->id = new_id();
      stack.push_back(op->id);
    }
    // Inputs are only valid during this callback: formatted (copied) now.
    ConvertContext cx{next_id_, warned_cut_};
    op->inputs = convert_all(rf.inputs(), cx);
    return op;
  }

  void on_end(const RecordFunction& rf, ObserverContext* context) {
    auto* op = static_cast<OpContext*>(context);
    if (op == nullptr) return;
    ConvertContext cx{next_id_, warned_cut_};
    const std::string outputs = convert_all(rf.outputs(), cx);
    const std::uint64_t fw_tid = rf.forward_thread_id();
    std::lock_guard<std::mutex> lock(mu_);
    if (!sink_) return;
    // Popped by id from the stack of the thread that began the range: an async range ends on
    // another thread, and maybe under ranges its own thread began after it.
    std::vector<std::uint64_t>& stack = stacks_[op->tid];
    for (auto it = stack.end(); it != stack.begin();) {
      if (*--it == op->id) {
        stack.erase(it);
        break;
      }
    }
    std::uint64_t fw_parent = op->fw_parent;
    if (fw_parent == 0 && fw_tid != 0) fw_parent = top_of(fw_tid);  // set after begin
    write_node(out_, {.name = op->name,
                      .id = op->id,
                      .rf_id = rf.handle(),
                      .parent = op->parent,
                      .fw_parent = fw_parent,
                      .seq_id = rf.sequence_nr(),
                      .scope = static_cast<std::uint64_t>(rf.scope()),
                      .tid = op->tid,
                      .fw_tid = fw_tid,
                      .inputs = &op->inputs,
                      .outputs = &outputs});
    if (out_.size() >= kFlushBytes) flush();
  }

  // Writes the process node and the trailer and renames the file onto its path. Throws
  // opscope::Error when the file cannot be completed (the temporary is then removed).
  void finish() {
    std::unique_ptr<internal::FileSink> sink;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!sink_) return;
      write_node(out_, {.name = kRootName, .id = kRootId});
      out_.end_array();
      out_.key("finish_ts");
      out_.integer(steady_ms());
      out_.end_object();
      out_.append("\n");
      flush();
      stacks_.clear();
      sink = std::move(sink_);  // closed for late ranges whatever happens next
    }
    sink->commit();
  }

 private:
  std::uint64_t new_id() { return next_id_.fetch_add(1, std::memory_order_relaxed); }

  std::uint64_t top_of(std::uint64_t tid) const {
    const auto it = stacks_.find(tid);
    return it == stacks_.end() || it->second.empty() ? 0 : it->second.back();
  }

  // Hands the buffered bytes to the sink. A write error is kept by the sink and thrown by a
  // later write or by commit(); on the hot path it is swallowed and surfaces at finish().
  void flush() {
    try {
      sink_->write(out_.view());
    } catch (...) {
    }
    out_.clear();
  }

  std::mutex mu_;
  std::unique_ptr<internal::FileSink> sink_;  // null once finished
  internal::JsonWriter out_;                  // nodes not handed to the sink yet
  // Open ranges per OS thread id, the thread node at the bottom.
  std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> stacks_;
  // 0 is "no node", 1 the process node.
  std::atomic<std::uint64_t> next_id_{2};
  std::atomic<bool> warned_cut_{false};
};

// The one registered observer of the process, and its path (for the error a second one gets).
std::mutex g_registry_mutex;
const void* g_registered = nullptr;
std::string g_registered_path;

}  // namespace

struct ExecutionTraceObserver::Impl {
  std::shared_ptr<Trace> trace;  // set while registered
  std::string path;
  CallbackHandle handle = 0;  // set while running
  bool warned_repeat = false;
};

ExecutionTraceObserver::ExecutionTraceObserver() : impl_(std::make_unique<Impl>()) {}

ExecutionTraceObserver::~ExecutionTraceObserver() {
  try {
    unregister_callback();
  } catch (const std::exception& e) {
    warn(std::string("ExecutionTraceObserver destroyed; finalizing the trace failed: ") + e.what());
  }
}

ExecutionTraceObserver& ExecutionTraceObserver::register_callback(
    const std::string& output_file_path) {
  Impl& m = *impl_;
  if (m.trace) {
    if (!m.warned_repeat) {
      m.warned_repeat = true;
      warn("register_callback('" + output_file_path +
           "') of an ExecutionTraceObserver: already registered, writing '" + m.path +
           "'; no second observer is added (call unregister_callback() first to change the "
           "path)");
    }
    return *this;
  }
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  if (g_registered != nullptr) {
    throw Error("register_callback('" + output_file_path +
                "'): another ExecutionTraceObserver is already registered in this process, "
                "writing '" +
                g_registered_path +
                "'; at most one is allowed: call unregister_callback() on it first");
  }
  m.trace = std::make_shared<Trace>(output_file_path);  // throws when it cannot be written
  m.path = output_file_path;
  m.warned_repeat = false;
  g_registered = this;
  g_registered_path = output_file_path;
  return *this;
}

void ExecutionTraceObserver::unregister_callback() {
  Impl& m = *impl_;
  if (!m.trace) return;
  stop();
  const std::shared_ptr<Trace> trace = std::move(m.trace);
  m.trace.reset();
  {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    g_registered = nullptr;
    g_registered_path.clear();
  }
  trace->finish();
}

void ExecutionTraceObserver::start() {
  Impl& m = *impl_;
  if (!m.trace) {
    warn(
        "start() of an ExecutionTraceObserver: not registered, so nothing is recorded; call "
        "register_callback(path) first");
    return;
  }
  if (m.handle != 0) return;
  const std::shared_ptr<Trace> trace = m.trace;
  trace->running.store(true, std::memory_order_release);
  m.handle = add_global_callback(
      RecordFunctionCallback(
          [trace](const RecordFunction& rf) { return trace->on_start(rf); },
          [trace](const RecordFunction& rf, ObserverContext* c) { trace->on_end(rf, c); })
          .needs_inputs(true)
          .needs_outputs(true)
          .needs_ids(true));
  if (const std::string info = distributed_info(); !info.empty()) {
    const std::string config = process_group_config(info);
    const Value input(config);
    RecordFunction rf(RecordScope::kUserScope);
    rf.before(kProcessGroupRange, std::span<const Value>(&input, 1));
    rf.end();
  }
}

void ExecutionTraceObserver::stop() {
  Impl& m = *impl_;
  if (m.handle == 0) return;
  m.trace->running.store(false, std::memory_order_release);
  remove_callback(m.handle);
  m.handle = 0;
}

void ExecutionTraceObserver::cleanup() { unregister_callback(); }

bool ExecutionTraceObserver::is_registered() const { return impl_->trace != nullptr; }

bool ExecutionTraceObserver::is_running() const { return impl_->handle != 0; }

std::string ExecutionTraceObserver::get_output_file_path() const {
  if (!impl_->trace) {
    throw Error(
        "A callback to the ET profiler needs to be registered first before getting the "
        "output file path");
  }
  return impl_->path;
}

}  // namespace opscope
