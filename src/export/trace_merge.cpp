// merge_traces(): the ranks of a job in one Chrome trace (trace_merge.h).
//
// Each input is walked twice with simdjson On-Demand. The first walk learns its rank and its
// processes (their names and sort indices), because the new pids and sort indices must be
// known before the first event is written, and the ranks are written in rank order. The
// second walk copies every event field by field as the file wrote it (numbers keep their
// digits), rewriting only "pid", "id"/"bind_id" and the args of the process_name and
// process_sort_index metadata.
#include "export/trace_merge.h"

#include <simdjson.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "import/importer.h"
#include "import/json_check.h"
#include "import/trace_text.h"
#include "import/trace_times.h"
#include "json/json_writer.h"
#include "opscope/error.h"
#include "opscope/export.h"

namespace opscope::internal {
namespace {

namespace od = simdjson::ondemand;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error("cannot read trace " + path + ": " + what);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// One process of a rank, keyed by its pid as the file wrote it.
struct Process {
  std::string key;      // the pid's JSON text ("4037", "\"Spans\""); "" for events without one
  std::string display;  // for names: 4037, Spans
  std::size_t first_seen = 0;
  bool named = false;
  bool has_sort = false;
  double sort = 0;  // its process_sort_index
  std::int64_t new_pid = 0;
  std::int64_t new_sort = 0;
};

// What the first walk learns of one input.
struct Input {
  std::string path;
  std::size_t position = 0;
  std::int64_t rank = -1;
  bool rank_from_position = false;
  std::uint64_t events = 0;
  std::vector<Process> processes;
  std::unordered_map<std::string, std::size_t> process_of;  // key -> processes[]
  std::vector<std::pair<std::string, std::string>> top;     // other top-level keys, raw JSON

  Process& process(std::string_view key) {
    auto [it, added] = process_of.try_emplace(std::string(key), processes.size());
    if (added) {
      Process p;
      p.key = std::string(key);
      p.display = key.empty() ? "(none)" : std::string(key);
      if (p.display.size() >= 2 && p.display.front() == '"') {
        p.display = p.display.substr(1, p.display.size() - 2);
      }
      p.first_seen = processes.size();
      processes.push_back(std::move(p));
    }
    return processes[it->second];
  }
};

// An event's fields in file order: the key (unescaped) and the value's JSON text, which
// points into the file's text.
struct Field {
  std::string key;
  std::string_view raw;
};

class Walker {
 public:
  Walker(std::string path, simdjson::padded_string json)
      : path_(std::move(path)), json_(std::move(json)) {}

  // Calls on_top(key, raw) for every top-level key but "traceEvents", and on_event(fields)
  // for every event, in file order.
  template <typename OnTop, typename OnEvent>
  void walk(OnTop&& on_top, OnEvent&& on_event) {
    od::document doc;
    const std::string_view text(json_.data(), json_.size());
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
      fail(path_, std::string(text.empty() ? import::kEmptyText : import::kBlankText));
    }
    // A text that does not open an object is no trace: said before its JSON (as the reader).
    if (text[text.find_first_not_of(" \t\r\n")] != '{') {
      fail(path_, std::string(import::kNotAnObject));
    }
    check(parser_.iterate(json_).get(doc), "the start of the document");
    // The whole text checked before a byte of it is copied: merge writes what it reads, and
    // must not write what is not JSON (the reader's verdict, json_check.h).
    import::check_iterated_json(path_, parser_, text);
    od::object top;
    if (doc.get_object().get(top) != simdjson::SUCCESS) {
      fail(path_, std::string(import::kNotAnObject));
    }
    bool saw_events = false;
    std::vector<Field> fields;
    for (auto field : top) {
      std::string_view key;
      check(field.unescaped_key().get(key), "an object key");
      const std::string k(key);
      od::value v;
      check(field.value().get(v), "a value");
      if (k != "traceEvents") {
        on_top(k, raw_of(v, "a value"));
        continue;
      }
      saw_events = true;
      od::array events;
      check(v.get_array().get(events), "an array of events");
      for (auto item : events) {
        od::value ev;
        check(item.get(ev), "an event");
        const char* at = nullptr;
        if (ev.current_location().get(at) == simdjson::SUCCESS) event_at_ = at;
        od::object e;
        check(ev.get_object().get(e), "an event object");
        fields.clear();
        for (auto f : e) {
          std::string_view fk;
          check(f.unescaped_key().get(fk), "an event field name");
          Field out{std::string(fk), {}};
          od::value fv;
          check(f.value().get(fv), "an event field value");
          out.raw = raw_of(fv, "an event field value");
          fields.push_back(std::move(out));
        }
        on_event(fields);
      }
      event_at_ = nullptr;
    }
    const char* after = nullptr;
    if (doc.current_location().get(after) == simdjson::SUCCESS && after != nullptr) {
      fail(path_, "unexpected text after the trace object at byte " +
                      std::to_string(after - json_.data()));
    }
    if (!saw_events) fail(path_, "no \"traceEvents\" array in the top-level object");
  }

  const std::string& path() const { return path_; }

  // The event's "ts" and "dur" by the reader's rule for times (import/trace_times.h), refused
  // in the words `opscope analyze` uses: a merge copies times as written, and must not write
  // a trace that no command reads back.
  void check_times(const std::vector<Field>& fields) const {
    std::string_view ts_raw, dur_raw, name;
    for (const Field& f : fields) {
      if (f.key == "ts") ts_raw = f.raw;
      if (f.key == "dur") dur_raw = f.raw;
      if (f.key == "name") name = f.raw;
    }
    if (name.size() >= 2 && name.front() == '"') name = name.substr(1, name.size() - 2);
    std::int64_t ts = 0, dur = 0;
    if (!ts_raw.empty()) ts = checked_time(ts_raw, "ts", name);
    if (!dur_raw.empty()) {
      dur = checked_time(dur_raw, "dur", name);
      if (!import::end_in_range(ts, dur)) {
        fail(path_, import::end_refusal(ts_raw, dur_raw, ts, dur, time_place(dur_raw, name)));
      }
    }
  }

  // " (in the event that starts at byte N)" while an event is walked.
  std::string at_event() const {
    if (event_at_ == nullptr) return "";
    return " (in the event that starts at byte " + std::to_string(event_at_ - json_.data()) + ")";
  }

 private:
  std::string_view raw_of(od::value& v, const char* what) {
    std::string_view raw;
    check(import::raw_json_text(v, raw), what);
    return raw;
  }

  std::int64_t checked_time(std::string_view raw, const char* field, std::string_view name) const {
    std::int64_t ns = 0;
    const import::TimeVerdict verdict = import::read_time(raw, ns);
    if (verdict == import::TimeVerdict::kNotANumber) {
      fail(path_, std::string("expected a number of microseconds for \"") + field +
                      "\", found " + std::string(raw) + at_event());
    }
    if (verdict == import::TimeVerdict::kOutOfRange) {
      fail(path_, import::time_refusal(field, raw, time_place(raw, name)));
    }
    return ns;
  }

  import::TimePlace time_place(std::string_view raw, std::string_view name) const {
    return {raw.data() - json_.data(), event_at_ == nullptr ? -1 : event_at_ - json_.data(), name};
  }

  void check(simdjson::error_code code, const char* expected) {
    if (code == simdjson::SUCCESS) return;
    import::fail_malformed(path_, std::string_view(json_.data(), json_.size()), code, at_event(),
                           expected);
  }

  std::string path_;
  simdjson::padded_string json_;
  od::parser parser_;
  const char* event_at_ = nullptr;
};

const Field* find(const std::vector<Field>& fields, std::string_view key) {
  for (const Field& f : fields) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

// One key of a small object (an event's args, distributedInfo): strings unescaped, other
// values as their JSON text.
struct Arg {
  std::string key;
  std::string value;
  bool is_string = false;
};

std::vector<Arg> object_args(std::string_view raw) {
  std::vector<Arg> out;
  od::parser p;
  const simdjson::padded_string copy(raw);
  od::document d;
  od::object o;
  if (p.iterate(copy).get(d) != simdjson::SUCCESS || d.get_object().get(o) != simdjson::SUCCESS) {
    return out;
  }
  for (auto f : o) {
    std::string_view k;
    od::value v;
    od::json_type type = od::json_type::null;
    if (f.unescaped_key().get(k) != simdjson::SUCCESS || f.value().get(v) != simdjson::SUCCESS ||
        v.type().get(type) != simdjson::SUCCESS) {
      return out;
    }
    Arg arg{std::string(k), {}, type == od::json_type::string};
    std::string_view value;
    if (arg.is_string) {
      if (v.get_string().get(value) != simdjson::SUCCESS) return out;
    } else if (type == od::json_type::object) {
      od::object inner;
      if (v.get_object().get(inner) != simdjson::SUCCESS ||
          inner.raw_json().get(value) != simdjson::SUCCESS) {
        return out;
      }
    } else if (type == od::json_type::array) {
      od::array inner;
      if (v.get_array().get(inner) != simdjson::SUCCESS ||
          inner.raw_json().get(value) != simdjson::SUCCESS) {
        return out;
      }
    } else {
      value = v.raw_json_token();
    }
    arg.value = std::string(trim(value));
    out.push_back(std::move(arg));
  }
  return out;
}

// `read()` of the input at `path`, its allocation failures (a text too large for the memory
// the process may take) told as the error of that file.
template <typename Read>
void read_guarded(const std::string& path, Read&& read) {
  try {
    read();
  } catch (const std::bad_alloc&) {
    import::fail_out_of_memory(path);
  } catch (const std::length_error&) {
    import::fail_out_of_memory(path);
  }
}

bool is_metadata(const std::vector<Field>& fields, std::string_view name) {
  const Field* ph = find(fields, "ph");
  const Field* n = find(fields, "name");
  return ph != nullptr && ph->raw == "\"M\"" && n != nullptr &&
         n->raw == "\"" + std::string(name) + "\"";
}

// The first walk: rank, processes, top-level keys.
void scan(Walker& walker, Input& in) {
  walker.walk(
      [&](const std::string& key, std::string_view raw) {
        in.top.emplace_back(key, std::string(raw));
        if (key != "distributedInfo") return;
        for (const Arg& a : object_args(raw)) {
          char* end = nullptr;
          const long long rank = std::strtoll(a.value.c_str(), &end, 10);
          if (a.key == "rank" && !a.value.empty() && *end == '\0' && rank >= 0) in.rank = rank;
        }
      },
      [&](const std::vector<Field>& fields) {
        ++in.events;
        walker.check_times(fields);
        const Field* pid = find(fields, "pid");
        Process& p = in.process(pid != nullptr ? pid->raw : std::string_view());
        const Field* args = find(fields, "args");
        if (is_metadata(fields, "process_name")) p.named = true;
        if (is_metadata(fields, "process_sort_index") && args != nullptr) {
          for (const Arg& a : object_args(args->raw)) {
            if (a.key != "sort_index" || a.is_string) continue;
            char* end = nullptr;
            const double s = std::strtod(a.value.c_str(), &end);
            if (!a.value.empty() && *end == '\0') {
              p.has_sort = true;
              p.sort = s;
            }
          }
        }
      });
}

// The second walk: every event copied into `w`, flushed to `sink` in large blocks.
class Copier {
 public:
  Copier(Sink& sink, JsonWriter& w, std::int64_t& next_id)
      : sink_(sink), w_(w), next_id_(next_id) {}

  void copy(Walker& walker, Input& in) {
    std::unordered_map<std::string, std::int64_t> ids;  // this rank's id text -> new id
    const std::string prefix = "rank " + std::to_string(in.rank) + ": ";
    walker.walk([](const std::string&, std::string_view) {},
                [&](const std::vector<Field>& fields) {
                  const Field* pid = find(fields, "pid");
                  const Process& p = in.process(pid != nullptr ? pid->raw : std::string_view());
                  const bool name_event = is_metadata(fields, "process_name");
                  const bool sort_event = is_metadata(fields, "process_sort_index");
                  w_.begin_object();
                  for (const Field& f : fields) {
                    w_.key(f.key);
                    if (f.key == "pid") {
                      w_.integer(p.new_pid);
                    } else if (f.key == "id" || f.key == "bind_id") {
                      // Flow, async and counter ids are the trace's own: two ranks number
                      // theirs alike, and Perfetto would join one rank's arrow to another's.
                      auto [it, added] = ids.try_emplace(std::string(f.raw), next_id_);
                      if (added) ++next_id_;
                      w_.integer(it->second);
                    } else if (f.key == "args" && (name_event || sort_event)) {
                      rewrite_args(f.raw, name_event ? "name" : "sort_index", prefix, p);
                    } else {
                      w_.raw(f.raw);
                    }
                  }
                  if (pid == nullptr) {
                    w_.key("pid");
                    w_.integer(p.new_pid);
                  }
                  w_.end_object();
                  flush_if_full();
                });
    // Every process gets a name that says its rank, and a sort index that puts it there.
    for (const Process& p : in.processes) {
      if (!p.named) {
        metadata(p, "process_name", "name");
        w_.string(prefix + "pid " + p.display);
        w_.end_object();
        w_.end_object();
      }
      if (!p.has_sort) {
        metadata(p, "process_sort_index", "sort_index");
        w_.integer(p.new_sort);
        w_.end_object();
        w_.end_object();
      }
    }
    flush_if_full();
  }

  void flush() {
    sink_.write(w_.view());
    w_.clear();
  }

 private:
  // An added metadata event, open at its args' `key`.
  void metadata(const Process& p, const char* name, const char* key) {
    w_.begin_object();
    w_.key("ph");
    w_.string("M");
    w_.key("name");
    w_.string(name);
    w_.key("pid");
    w_.integer(p.new_pid);
    w_.key("tid");
    w_.integer(0);
    w_.key("args");
    w_.begin_object();
    w_.key(key);
  }

  // The args of process_name (the name prefixed with the rank) or process_sort_index (the
  // new index); their other keys as they were.
  void rewrite_args(std::string_view raw, std::string_view key, const std::string& prefix,
                    const Process& p) {
    bool found = false;
    w_.begin_object();
    for (const Arg& a : object_args(raw)) {
      w_.key(a.key);
      if (a.key == key && !found) {
        found = true;
        if (key == "name") {
          w_.string(prefix + a.value);
        } else {
          w_.integer(p.new_sort);
        }
      } else if (a.is_string) {
        w_.string(a.value);
      } else {
        w_.raw(a.value);
      }
    }
    if (!found) {
      w_.key(key);
      if (key == "name") {
        w_.string(prefix + "pid " + p.display);
      } else {
        w_.integer(p.new_sort);
      }
    }
    w_.end_object();
  }

  void flush_if_full() {
    if (w_.size() >= (std::size_t{1} << 20)) flush();
  }

  Sink& sink_;
  JsonWriter& w_;
  std::int64_t& next_id_;
};

}  // namespace

std::vector<MergedRank> merge_traces(const std::vector<std::string>& paths, Sink& sink,
                                     const TraceLimits& limits) {
  if (paths.empty()) throw Error("no traces to merge");
  // First walk over every input: ranks and processes.
  std::vector<Input> inputs;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    Input in;
    in.path = paths[i];
    in.position = i;
    read_guarded(paths[i], [&] {
      Walker walker(paths[i], import::load_trace_text(paths[i], limits));
      scan(walker, in);
    });
    if (in.rank < 0) {
      in.rank = static_cast<std::int64_t>(i);
      in.rank_from_position = true;
    }
    inputs.push_back(std::move(in));
  }
  std::stable_sort(inputs.begin(), inputs.end(),
                   [](const Input& a, const Input& b) { return a.rank < b.rank; });

  // New pids and sort indices, rank by rank: within a rank, the processes with a sort index
  // in its order, then the others as they first appeared.
  std::int64_t next_pid = 1;
  std::int64_t next_sort = 0;
  for (Input& in : inputs) {
    std::vector<Process*> order;
    for (Process& p : in.processes) order.push_back(&p);
    std::stable_sort(order.begin(), order.end(), [](const Process* a, const Process* b) {
      if (a->has_sort != b->has_sort) return a->has_sort;
      if (a->has_sort && a->sort != b->sort) return a->sort < b->sort;
      return a->first_seen < b->first_seen;
    });
    for (Process* p : order) {
      p->new_pid = next_pid++;
      p->new_sort = next_sort++;
    }
  }

  // Second walk: copy.
  JsonWriter w(1 << 21);
  std::int64_t next_id = 1;
  Copier copier(sink, w, next_id);
  w.append("{\"traceEvents\":[");
  w.set_need_comma(false);
  for (Input& in : inputs) {
    read_guarded(in.path, [&] {
      Walker walker(in.path, import::load_trace_text(in.path, limits));
      copier.copy(walker, in);
    });
  }
  w.end_array();
  // What the ranks agree on stays at the top level, where viewers look for it.
  for (const char* key : {"displayTimeUnit", "baseTimeNanoseconds", "schemaVersion"}) {
    const std::string* value = nullptr;
    bool agree = true;
    for (const Input& in : inputs) {
      const std::string* v = nullptr;
      for (const auto& [k, raw] : in.top) {
        if (k == key) v = &raw;
      }
      if (v == nullptr || (value != nullptr && *v != *value)) agree = false;
      if (value == nullptr) value = v;
    }
    if (agree && value != nullptr) {
      w.key(key);
      w.raw(*value);
    }
  }
  // Each rank's own top-level keys, and which pids its processes became.
  w.key("opscopeMerged");
  w.begin_array();
  std::vector<MergedRank> out;
  for (const Input& in : inputs) {
    w.begin_object();
    w.key("rank");
    w.integer(in.rank);
    w.key("file");
    w.string(in.path);
    w.key("pids");
    w.begin_object();
    for (const Process& p : in.processes) {
      w.key(p.display);
      w.integer(p.new_pid);
    }
    w.end_object();
    w.key("metadata");
    w.begin_object();
    for (const auto& [k, raw] : in.top) {
      w.key(k);
      w.raw(raw);
    }
    w.end_object();
    w.end_object();
    MergedRank r;
    r.path = in.path;
    r.rank = in.rank;
    r.rank_from_position = in.rank_from_position;
    r.events = in.events;
    for (const Process& p : in.processes)
      r.added_events += (p.named ? 0 : 1) + (p.has_sort ? 0 : 1);
    r.processes = in.processes.size();
    // A rank's pids were given in one run: the smallest is the first.
    for (const Process& p : in.processes) {
      if (r.first_pid == 0 || p.new_pid < r.first_pid) r.first_pid = p.new_pid;
    }
    out.push_back(std::move(r));
  }
  w.end_array();
  w.end_object();
  w.append("\n");
  copier.flush();
  return out;
}

}  // namespace opscope::internal
