// Reader (kineto_join.h): a Kineto / Chrome trace's pieces and top-level keys joined into the
// model.
#include "import/kineto_join.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <string>

#include "import/importer.h"
#include "import/trace_times.h"
#include "model/kineto_schema.h"
#include "opscope/error.h"

namespace opscope::import {

Reader::Reader(std::string path, simdjson::padded_string json, std::int64_t text_size,
               const TraceReadOptions& options, ProfilerResult::Builder& builder)
    : TextWalker(std::move(path)),
      json_(std::move(json)),
      options_(options),
      events_(path_, options),
      builder_(builder) {
  // Room for the events up front, so that the growing vectors are not copied as they grow (a
  // copy of the details is briefly twice their memory). Kineto writes 250 to 500 bytes an
  // event; room that is never written takes address space, not memory.
  builder_.reserve_for_import(static_cast<std::size_t>(std::max<std::int64_t>(text_size, 0)) / 250);
}

void Reader::read() {
  read_top(/*events_read=*/false);
  build();
}

void Reader::merge(Piece& p) {
  for (const std::string& text : p.text_pids) text_pid(text);
  thread_map_.clear();
  for (const Piece::Thread& t : p.threads) {
    const std::int64_t pid = pid_of(t.pid);
    const std::int32_t index = thread_index(pid, t.tid);
    thread_map_.push_back(index);
    Thread& g = threads_[static_cast<std::size_t>(index)];
    g.gpu = g.gpu || t.gpu;
    if (t.device >= 0) g.device = t.device;
    if (t.stream >= 0) g.stream = t.stream;
    if (t.cpu_ranges > 0) cpu_events_by_pid_[pid] += t.cpu_ranges;
  }
  category_map_.clear();
  for (std::string_view c : p.categories) {
    try {
      // The builder's own lookup is a linear search (a recording has a handful of
      // categories); a trace may have thousands, each piece naming them again.
      const auto [it, added] = category_of_.try_emplace(std::string(c), 0);
      if (added) it->second = builder_.category(c);
      category_map_.push_back(it->second);
    } catch (const Error& e) {
      // The model's limit (16-bit category numbers), told as this file's error.
      fail(std::string(e.what()) + "; this trace has more (the 65536th: \"" + std::string(c.substr(0, 200)) +
           "\")");
    }
  }
  for (Event& e : p.events) {
    e.name = keep_name(e.name);
    e.thread = thread_map_[static_cast<std::size_t>(e.thread)];
    if (e.category != 0) e.category = category_map_[e.category - 1u];
    if (e.detail >= 0) e.detail = builder_.add_detail(std::move(p.details[e.detail]));
    if (e.other_args >= 0) {
      const auto [start, size] = p.other_args[static_cast<std::size_t>(e.other_args)];
      e.other_args = builder_.add_other_args(std::string_view(p.other_text).substr(start, size));
    }
    builder_.add_event(e);
  }
  flow_category_map_.clear();
  for (std::string_view c : p.flow_categories) {
    flow_category_map_.push_back(static_cast<std::uint32_t>(flow_categories_.index(c)));
  }
  for (const Piece::FlowEnd& f : p.flow_ends) {
    flow_ends_.push_back({f.id, f.ts, flow_category_map_[f.category],
                          thread_map_[static_cast<std::size_t>(f.thread)],
                          static_cast<std::uint32_t>(flow_ends_.size()), f.ph});
  }
  using What = Piece::Meta::What;
  for (Piece::Meta& m : p.metadata) {
    switch (m.what) {
      case What::kProcessName:
        processes_[pid_of(m.pid)].name = std::move(m.text);
        break;
      case What::kProcessLabels:
        processes_[pid_of(m.pid)].labels = std::move(m.text);
        break;
      case What::kProcessSortIndex:
        processes_[pid_of(m.pid)].sort_index = m.number;
        break;
      case What::kThreadName:
        threads_[static_cast<std::size_t>(thread_map_[static_cast<std::size_t>(m.thread)])].name =
            std::move(m.text);
        break;
      case What::kThreadSortIndex:
        threads_[static_cast<std::size_t>(thread_map_[static_cast<std::size_t>(m.thread)])]
            .sort_index = m.number;
        break;
    }
  }
  skipped_ += p.skipped;
  memory_events_ = memory_events_ || p.memory_events;
  ts_column_ |= p.ts_column;
  if (p.error) std::rethrow_exception(p.error);
}

// Walks the top-level object of json_. With `events_read`, its traceEvents is the emptied
// array of a streamed document, whose events were read already.
void Reader::read_top(bool events_read) {
  place_.doc = std::string_view(json_.data(), json_.size());
  od::parser parser;
  od::document doc;
  if (json_.size() == 0 || std::string_view(json_.data(), json_.size())
                                   .find_first_not_of(" \t\r\n") == std::string_view::npos) {
    fail(std::string(json_.size() == 0 ? kEmptyText : kBlankText));
  }
  // A text that does not open an object is no trace, whatever follows: said before its JSON.
  if (place_.doc[place_.doc.find_first_not_of(" \t\r\n")] != '{') fail(std::string(kNotAnObject));
  check(parser.iterate(json_).get(doc), "the start of the document");
  check_grammar(parser, place_.doc, /*root_is_events=*/false);
  od::object top;
  if (doc.get_object().get(top) != simdjson::SUCCESS) {
    fail(std::string(kNotAnObject));
  }
  bool saw_events = false;
  bool saw_nodes = false;
  for (auto field : top) {
    std::string_view key;
    check(field.unescaped_key().get(key), "an object key");
    od::value v;
    check(field.value().get(v), "a value");
    if (key == kineto::kTraceEvents) {
      saw_events = true;
      od::array events;
      check(v.get_array().get(events), "an array of events");
      // The events where they stand, joined to the model every kFlushEvery (the names
      // point into this walk's parser, which lives until the walk ends).
      constexpr std::size_t kFlushEvery = 4096;
      Piece piece;
      events_.set_place(place_);
      events_.read_events(events, piece, kFlushEvery, [&](Piece& p) {
        merge(p);
        p.clear();
      });
      merge(piece);
      place_.last_event_at = events_read ? nullptr : events_.place().last_event_at;
    } else if (key == kineto::kDeviceProperties) {
      device_properties_ = std::string(raw_of(v, "deviceProperties"));
      if (device_properties_ == "[]") device_properties_.clear();
    } else if (key == kineto::kSchemaVersion || key == kineto::kTraceName ||
               key == kineto::kDisplayTimeUnit || key == kineto::kBaseTimeNanoseconds ||
               key == kineto::kOpscope || key == kineto::kOpscopeNotRecorded) {
      raw_of(v, "a value");  // the exporter writes these itself
    } else if (key == "nodes") {
      saw_nodes = true;
      raw_of(v, "a value");
    } else if (key == kineto::kDistributedInfo) {
      const std::string_view raw = raw_of(v, "distributedInfo");
      read_distributed_info(raw);
      metadata_.emplace_back(std::string(key), std::string(raw));
    } else {
      metadata_.emplace_back(std::string(key), std::string(raw_of(v, "a value")));
    }
  }
  // Anything after the top-level object is an error (the document is one value).
  const char* after = nullptr;
  if (doc.current_location().get(after) == simdjson::SUCCESS && after != nullptr) {
    fail("unexpected text after the trace object at byte " +
         std::to_string(place_.offset_of(after)));
  }
  // An execution trace is told apart by its first bytes (refused_formats.cpp); this is for one
  // whose "nodes" come later than those.
  if (!saw_events && saw_nodes) fail(std::string(kExecutionTrace));
  if (!saw_events) fail("no \"traceEvents\" array in the top-level object");
}

inline std::int32_t Reader::thread_index(std::int64_t pid, const Id& tid) {
  auto [it, added] = thread_of_.try_emplace({pid, tid}, 0);
  if (added) {
    it->second = static_cast<std::int32_t>(threads_.size());
    threads_.push_back({pid, tid, {}, -1, false, -1, -1});
  }
  return it->second;
}

inline std::string_view Reader::keep_name(std::string_view name) {
  auto it = names_.find(name);
  if (it != names_.end()) return it->second;
  const std::string_view kept = builder_.keep(name);
  names_.emplace(kept, kept);
  return kept;
}

inline void Reader::read_distributed_info(std::string_view raw) {
  // A small object: parse it on its own.
  od::parser p;
  od::document d;
  if (iterate_within(p, raw).get(d) != simdjson::SUCCESS) return;
  od::object o;
  if (d.get_object().get(o) != simdjson::SUCCESS) return;
  for (auto f : o) {
    std::string_view k;
    if (f.unescaped_key().get(k) != simdjson::SUCCESS) return;
    od::value v;
    if (f.value().get(v) != simdjson::SUCCESS) return;
    if (k == kineto::kRank) {
      const Id id = read_id(v);
      if (id.text.empty()) rank_ = id.number;
    }
  }
}

// Kineto names some processes with text ("Spans", "Traces"): each gets a pid of its own
// above any real one (2^40 + n, n in the order the trace first names them), named with the
// text, so that it stays apart.
std::int64_t Reader::text_pid(const std::string& text) {
  auto [it, added] = text_pids_.try_emplace(
      text, (std::int64_t{1} << 40) + static_cast<std::int64_t>(text_pids_.size()));
  if (added) processes_[it->second].name = text;
  return it->second;
}

// The flows whose two ends were read, to the builder in the order of their category's name
// and id. The ends are sorted by (category, id, order read) and each id's ends taken in the
// order the trace gave them: its last "s" starts the flow, its last "f" (else its first
// other end) ends it. A sorted array, not a hash map of flows: a map node per flow cost a
// tenth of a read of a trace full of launch arrows, and more memory.
inline void Reader::hand_over_flows() {
  // Each category's place in the order of the names: sorted, not counted pair by pair, which
  // was quadratic in a trace with a category of its own per flow.
  std::vector<std::uint32_t> by_name(flow_categories_.size());
  for (std::uint32_t c = 0; c < by_name.size(); ++c) by_name[c] = c;
  std::sort(by_name.begin(), by_name.end(), [&](std::uint32_t a, std::uint32_t b) {
    return flow_categories_[a] < flow_categories_[b];
  });
  std::vector<std::uint32_t> rank(flow_categories_.size());  // of each category's name
  for (std::uint32_t r = 0; r < by_name.size(); ++r) rank[by_name[r]] = r;
  // `order` is the index in flow_ends_ (below 2^32 ends: 64 GiB of them), so the sort is
  // stable where it matters without std::stable_sort's buffer.
  std::sort(flow_ends_.begin(), flow_ends_.end(), [&](const FlowEnd& a, const FlowEnd& b) {
    if (a.category != b.category) return rank[a.category] < rank[b.category];
    if (a.id != b.id) return a.id < b.id;
    return a.order < b.order;
  });
  builder_.reserve_flows(flow_ends_.size() / 2);  // a flow has two ends at least
  for (std::size_t i = 0; i < flow_ends_.size();) {
    std::size_t j = i;
    const FlowEnd* start = nullptr;
    const FlowEnd* end = nullptr;
    for (; j < flow_ends_.size() && flow_ends_[j].id == flow_ends_[i].id &&
           flow_ends_[j].category == flow_ends_[i].category;
         ++j) {
      const FlowEnd& f = flow_ends_[j];
      if (f.ph == 's') {
        start = &f;
      } else if (f.ph == 'f' || end == nullptr) {
        end = &f;
      }
    }
    if (start != nullptr && end != nullptr) {
      builder_.add_flow(flow_categories_[start->category], start->id, {start->thread, start->ts},
                        {end->thread, end->ts});
    }
    i = j;
  }
  flow_ends_ = {};
}

// TraceReadOptions::times: the whole trace's times as HTA holds them, once its "ts" column is
// known to be float (trace_times.h), before the model nests the events by those times (as
// HTA's analyses see them).
void Reader::round_as_hta() {
  if (options_.times == TraceTimes::kNanoseconds ||
      ts_column_ != static_cast<std::uint8_t>(TsColumn::kFloat)) {
    return;
  }
  if (options_.times == TraceTimes::kHtaFloat) {
    builder_.apply_links([](Event& e) {
      const std::int64_t dur = e.end_ns - e.start_ns;
      e.start_ns = hta_float_ns(e.start_ns);
      e.end_ns = e.start_ns + dur;
    });
    for (FlowEnd& f : flow_ends_) f.ts = hta_float_ns(f.ts);
    return;
  }
  builder_.apply_links([](Event& e) {
    if (e.kind == EventKind::kInstant || e.kind == EventKind::kMemory) {
      // No dur: HTA's end and dur are NaN, its ts the ceiling.
      e.start_ns = e.end_ns = hta_ceil_ns(e.start_ns);
    } else {
      hta_round_event(e.start_ns, e.end_ns);
    }
  });
  for (FlowEnd& f : flow_ends_) f.ts = hta_ceil_ns(f.ts);
}

void Reader::build() {
  round_as_hta();
  // The recording process: the one with the most CPU ops (its threads get pid -1).
  std::int64_t own_pid = 0;
  std::int64_t most = -1;
  for (const auto& [pid, n] : cpu_events_by_pid_) {
    if (n > most) {
      most = n;
      own_pid = pid;
    }
  }
  builder_.set_pid(own_pid);
  builder_.set_rank(rank_);
  if (!device_properties_.empty()) builder_.set_device_properties(device_properties_);
  for (auto& [pid, p] : processes_) {
    if (pid == own_pid) continue;
    builder_.add_process({pid, p.name, p.labels, p.sort_index});
  }
  // Threads in the order they were first seen: Event::thread holds those indices.
  for (const Thread& t : threads_) {
    ThreadInfo info;
    info.tid = t.tid.text.empty() ? static_cast<std::uint64_t>(t.tid.number)
                                  : std::hash<std::string>{}(t.tid.text);
    info.name = !t.name.empty() ? t.name : t.tid.text;
    info.pid = t.pid == own_pid ? -1 : t.pid;
    if (t.gpu) {
      info.device = t.device >= 0 ? t.device : static_cast<std::int32_t>(t.pid);
      info.stream = t.stream >= 0 ? t.stream : t.tid.number;
    }
    builder_.add_thread(std::move(info));
  }
  hand_over_flows();
  std::int64_t first = std::numeric_limits<std::int64_t>::max();
  std::int64_t last = std::numeric_limits<std::int64_t>::min();
  builder_.apply_links([&](Event& e) {
    first = std::min(first, e.start_ns);
    last = std::max(last, e.end_ns);
  });
  if (first > last) first = last = 0;
  builder_.set_window(first, last);
  if (memory_events_) builder_.set_lenses({.profile_memory = true});
  for (auto& [k, v] : metadata_) builder_.add_metadata(std::move(k), std::move(v));
  if (skipped_ > 0) {
    warn("read_trace " + path_ + ": left out " + std::to_string(skipped_) +
         " events of a phase opscope does not hold yet (counters \"C\", async \"b\"/\"e\", "
         "or no \"ph\")");
  }
}

}  // namespace opscope::import
