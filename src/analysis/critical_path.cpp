// critical_path_graph() (opscope/trace_analysis.h): HTA's critical path analysis
// (hta/analyzers/critical_path_analysis.py, CPGraph and CriticalPathAnalysis), rule for rule, in
// linear or n log n time. Each step names the HTA function it follows; where HTA's answer depends
// on its DataFrame's row numbers (the event's position in the file, which a read trace does not
// keep), opscope's event index stands in for it (ties only).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "analysis/gpu_work.h"
#include "analysis/hta_events.h"
#include "json/json_reader.h"
#include "opscope/error.h"
#include "opscope/trace_analysis.h"

namespace opscope {
namespace {

using internal::correlation_of;
using internal::in_hta_frame;
using internal::is_launch_call;
using internal::LaunchCalls;
using internal::stream_of;

constexpr std::int32_t kNone = -1;
// HTA's index_correlation is 0 for an event with a correlation id whose peer is missing (the
// fallback min(correlation, 0)), which is ">= 0" to its tests but names no event.
constexpr std::int32_t kUnmatched = -2;
constexpr std::int64_t kKernelKernelDelayThresholdNs = 1500 * 1000;  // HTA: 1500 us

bool contains(std::string_view s, std::string_view p) {
  return s.find(p) != std::string_view::npos;
}

// CPGraph.BLOCKING_SYNC_CALLS, in any spelling of the call (canonical_call_name:
// "cudaStreamSynchronize_ptsz" blocks as cudaStreamSynchronize does).
bool is_blocking_call(std::string_view name) {
  const std::string_view n = internal::canonical_call_name(name);
  return n == "cudaDeviceSynchronize" || n == "cudaStreamSynchronize" || n == "cudaEventQuery" ||
         n == "cudaEventSynchronize" || n == "cudaMemcpy" || n == "cudaMemcpyAsync";
}

// CUDA_RUNTIME_EVENTS: the calls that take the CUDA runtime's lock; every kernel launch of
// the runtime among them (nvcc 13's __cudaLaunchKernel is cudaLaunchKernel's entry point).
bool takes_runtime_lock(std::string_view name) {
  const std::string_view n = internal::canonical_call_name(name);
  return n == "cudaHostAlloc" || n == "cudaLaunchKernel" || n == "cudaMemcpyAsync";
}

// A number arg of a cuda_sync event ("wait_on_stream", ...), which the model keeps as JSON
// text; `fallback` when absent.
std::int64_t other_int(const ProfilerResult& r, const Event& e, std::string_view key,
                       std::int64_t fallback, bool& present) {
  present = false;
  const std::string_view text = r.other_args(e);
  if (text.empty() || !contains(text, key)) return fallback;
  try {
    const internal::JsonValue v = internal::parse_json(text);
    const internal::JsonValue* f = v.find(key);
    if (f == nullptr || f->type() != internal::JsonValue::Type::kNumber) return fallback;
    present = true;
    return f->as_int();
  } catch (const Error&) {
    return fallback;
  }
}

// Python's slice [start:stop] over n items, as positions [lo, hi).
std::pair<std::int64_t, std::int64_t> python_slice(std::int64_t start, std::int64_t stop,
                                                   std::int64_t n) {
  const auto norm = [n](std::int64_t i) {
    if (i < 0) i += n;
    return std::clamp<std::int64_t>(i, 0, n);
  };
  return {norm(start), norm(stop)};
}

class Builder {
 public:
  Builder(const ProfilerResult& r, const ReportOptions& o, CriticalPathGraph& g)
      : r_(r), ev_(r.events()), o_(o), g_(g) {}

  void run();

 private:
  struct NodeOf {
    std::int32_t start = kNone, end = kNone;
  };

  std::int64_t ts(std::int32_t node) const { return g_.node_ts_ns[static_cast<std::size_t>(node)]; }
  std::int32_t ev_of(std::int32_t node) const {
    return g_.node_event[static_cast<std::size_t>(node)];
  }
  bool is_start(std::int32_t node) const {
    return g_.node_is_start[static_cast<std::size_t>(node)] != 0;
  }
  const Event& event(std::int32_t i) const { return ev_[static_cast<std::size_t>(i)]; }

  void prepare();
  void clip();
  void create_nodes();
  void runtime_lock_edges();
  void call_stack_edges();
  void kernel_edges();
  void longest_path();

  std::int32_t add_edge(std::int32_t u, std::int32_t v, CriticalPathEdgeType type,
                        bool zero_weight = false);
  void attribute(std::int32_t edge, std::int64_t src_parent);
  bool lock_shared(std::int32_t a, std::int32_t b) const {
    return takes_runtime_lock(event(ev_of(a)).name) && takes_runtime_lock(event(ev_of(b)).name) &&
           (is_start(a) || !is_start(b));
  }

  const ProfilerResult& r_;
  const std::vector<Event>& ev_;
  const ReportOptions& o_;
  CriticalPathGraph& g_;

  std::vector<std::uint8_t> frame_;
  std::vector<std::int64_t> stream_, corr_;
  std::vector<std::int32_t> ic_;  // HTA's index_correlation
  std::vector<std::uint8_t> clipped_;
  std::vector<NodeOf> nodes_of_;
  std::unordered_map<std::uint64_t, std::int32_t> edge_at_;  // (u << 32 | v) -> edge
  std::int64_t window_start_ = 0, window_end_ = 0;
};

void Builder::prepare() {
  const std::size_t n = ev_.size();
  frame_.assign(n, 0);
  stream_.assign(n, -1);
  corr_.assign(n, -1);
  ic_.assign(n, kNone);
  // hta/common/trace.py's add_index_correlation: CPU side (not GPU work nor a device-wide
  // sync) and GPU side (GPU work with a correlation, or "Event Sync" / "Context Sync"), paired
  // on the correlation id; the last pairing wins, as pandas' assignment does.
  std::unordered_map<std::int64_t, std::int32_t> cpu_of, gpu_of;
  // HTA analyzes what its trace filter kept: without the last profiler step and the GPU work
  // it launched, when the trace holds two or more steps (ReportOptions::drop_last_step).
  std::vector<std::uint8_t> kept(n, 0);
  for (const std::int32_t k : internal::analyzed_events(r_, internal::drop_last_step(r_, o_)))
    kept[static_cast<std::size_t>(k)] = 1;
  for (std::size_t i = 0; i < n; ++i) {
    const Event& e = ev_[i];
    if (!kept[i] || !in_hta_frame(r_, e)) continue;
    frame_[i] = 1;
    stream_[i] = stream_of(r_, e);
    corr_[i] = correlation_of(r_, e);
    if (corr_[i] == -1) continue;
    ic_[i] = corr_[i] < 0 ? static_cast<std::int32_t>(corr_[i]) : kUnmatched;
    const bool gpu_side =
        (stream_[i] >= 0 && corr_[i] >= 0) || e.name == "Event Sync" || e.name == "Context Sync";
    (gpu_side ? gpu_of : cpu_of)[corr_[i]] = static_cast<std::int32_t>(i);
  }
  for (const auto& [c, cpu] : cpu_of) {
    const auto it = gpu_of.find(c);
    if (it == gpu_of.end()) continue;
    ic_[static_cast<std::size_t>(cpu)] = it->second;
    ic_[static_cast<std::size_t>(it->second)] = cpu;
  }
}

// CriticalPathAnalysis.critical_path_analysis: the window of the annotation's instances, then
// the CPU events starting in it (with a duration) and the GPU work their calls launched.
void Builder::clip() {
  const std::size_t n = ev_.size();
  std::vector<std::int32_t> annotations;
  std::int64_t lo = std::numeric_limits<std::int64_t>::max(),
               hi = std::numeric_limits<std::int64_t>::min();
  for (std::size_t i = 0; i < n; ++i) {
    if (!frame_[i]) continue;
    lo = std::min(lo, ev_[i].start_ns);
    hi = std::max(hi, ev_[i].end_ns);
    if (!o_.annotation.empty() && contains(ev_[i].name, o_.annotation)) {
      annotations.push_back(static_cast<std::int32_t>(i));
    }
  }
  if (o_.annotation.empty()) {
    g_.found = lo <= hi;
    window_start_ = lo;
    window_end_ = hi;
  } else {
    g_.found = !annotations.empty();
    // HTA takes the instances in its frame's row order (the file's): CPU events, then the GPU
    // annotations Kineto writes after them; each in time order.
    std::stable_sort(annotations.begin(), annotations.end(), [&](std::int32_t a, std::int32_t b) {
      const bool ga =
          stream_[static_cast<std::size_t>(a)] >= 0 || event(a).kind == EventKind::kGpuAnnotation;
      const bool gb =
          stream_[static_cast<std::size_t>(b)] >= 0 || event(b).kind == EventKind::kGpuAnnotation;
      return std::tie(ga, event(a).start_ns, a) < std::tie(gb, event(b).start_ns, b);
    });
    const auto [first, last] = python_slice(o_.instance_start, o_.instance_end + 1,
                                            static_cast<std::int64_t>(annotations.size()));
    window_start_ = std::numeric_limits<std::int64_t>::max();
    window_end_ = std::numeric_limits<std::int64_t>::min();
    for (std::int64_t k = first; k < last; ++k) {
      const Event& a = event(annotations[static_cast<std::size_t>(k)]);
      window_start_ = std::min(window_start_, a.start_ns);
      window_end_ = std::max(window_end_, a.end_ns);
    }
  }
  g_.window_start_ns = window_start_;
  g_.window_end_ns = window_end_;
  clipped_.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    if (!frame_[i] || stream_[i] != -1) continue;
    const Event& e = ev_[i];
    if (e.start_ns >= window_start_ && e.start_ns <= window_end_ && e.duration_ns() > 0) {
      clipped_[i] = 1;
      const std::int32_t gpu = ic_[i];
      if (gpu >= 0 && stream_[static_cast<std::size_t>(gpu)] != -1) {
        clipped_[static_cast<std::size_t>(gpu)] = 1;
      }
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (frame_[i] && stream_[i] != -1 && ev_[i].name == "Stream Wait Event") clipped_[i] = 1;
  }
}

// CPGraph._create_event_nodes: a start and an end node per CPU operator, runtime or driver
// call, data-loading event and GPU work item, sorted by (time, event).
void Builder::create_nodes() {
  struct Point {
    std::int64_t ts;
    std::int32_t ev;
    bool start;
  };
  std::vector<Point> points;
  for (std::size_t i = 0; i < ev_.size(); ++i) {
    if (!clipped_[i]) continue;
    const Event& e = ev_[i];
    const std::string_view cat = r_.category(e);
    bool keep = cat == "cpu_op" || cat == "cuda_runtime" || cat == "cuda_driver" ||
                (stream_[i] != -1 && (ic_[i] >= 0 || ic_[i] == kUnmatched));
    for (const std::string& p : o_.data_load_events) {
      if (!keep && contains(e.name, p)) keep = true;
    }
    if (!keep) continue;
    points.push_back({e.start_ns, static_cast<std::int32_t>(i), true});
    points.push_back({e.end_ns, static_cast<std::int32_t>(i), false});
  }
  std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
    return std::tie(a.ts, a.ev, b.start) < std::tie(b.ts, b.ev, a.start);
  });
  nodes_of_.assign(ev_.size(), {});
  const std::size_t m = points.size();
  g_.node_event.resize(m);
  g_.node_ts_ns.resize(m);
  g_.node_is_start.resize(m);
  g_.node_is_blocking.resize(m);
  for (std::size_t k = 0; k < m; ++k) {
    const Point& p = points[k];
    g_.node_event[k] = p.ev;
    g_.node_ts_ns[k] = p.ts;
    g_.node_is_start[k] = p.start ? 1 : 0;
    g_.node_is_blocking[k] = is_blocking_call(event(p.ev).name) ? 1 : 0;
    NodeOf& no = nodes_of_[static_cast<std::size_t>(p.ev)];
    (p.start ? no.start : no.end) = static_cast<std::int32_t>(k);
  }
}

// CPGraph._add_edge_helper, with networkx's add_edge: adding (u, v) again replaces its data in
// place.
std::int32_t Builder::add_edge(std::int32_t u, std::int32_t v, CriticalPathEdgeType type,
                               bool zero_weight) {
  const std::int64_t weight = (type == CriticalPathEdgeType::kDependency ||
                               type == CriticalPathEdgeType::kSyncDependency || zero_weight)
                                  ? 0
                                  : ts(v) - ts(u);
  const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(u)) << 32) |
                            static_cast<std::uint32_t>(v);
  const auto [it, added] =
      edge_at_.try_emplace(key, static_cast<std::int32_t>(g_.edge_begin.size()));
  const auto at = static_cast<std::size_t>(it->second);
  if (added) {
    g_.edge_begin.push_back(u);
    g_.edge_end.push_back(v);
    g_.edge_type.push_back(type);
    g_.edge_weight_ns.push_back(weight);
    g_.edge_event.push_back(CriticalPathGraph::kNoEvent);
  } else {
    g_.edge_type[at] = type;
    g_.edge_weight_ns[at] = weight;
  }
  return it->second;
}

// CPGraph._attribute_edge.
void Builder::attribute(std::int32_t edge, std::int64_t src_parent) {
  const auto at = static_cast<std::size_t>(edge);
  const CriticalPathEdgeType type = g_.edge_type[at];
  if (type != CriticalPathEdgeType::kOperatorKernel &&
      type != CriticalPathEdgeType::kKernelKernelDelay) {
    return;
  }
  const std::int32_t src = g_.edge_begin[at], dest = g_.edge_end[at];
  std::int64_t ev = 0;
  if (type == CriticalPathEdgeType::kKernelKernelDelay || is_start(src)) {
    ev = ev_of(src);
  } else if (!is_start(dest)) {
    ev = ev_of(dest);
  } else {
    ev = src_parent;
  }
  g_.edge_event[at] = ev;
}

// CPGraph._construct_graph_from_cuda_runtime_events: the runtime's lock orders the calls that
// take it by their ends, across threads.
void Builder::runtime_lock_edges() {
  std::vector<std::int32_t> starts;
  std::int32_t last = kNone;
  const auto m = static_cast<std::int32_t>(g_.node_event.size());
  for (std::int32_t node = 0; node < m; ++node) {
    if (!takes_runtime_lock(event(ev_of(node)).name)) continue;
    if (is_start(node)) {
      starts.push_back(node);
    } else {
      while (!starts.empty()) {
        const std::int32_t prev = starts.back();
        starts.pop_back();
        if (ev_of(prev) == ev_of(node)) {
          attribute(add_edge(prev, node, CriticalPathEdgeType::kOperatorKernel), ev_of(node));
        } else {
          add_edge(prev, node, CriticalPathEdgeType::kDependency);
        }
      }
      if (last != kNone && !is_start(last)) add_edge(last, node, CriticalPathEdgeType::kDependency);
    }
    last = node;
  }
}

// CPGraph._construct_graph_from_call_stacks over hta/common/call_stack.py's CallGraph: one call
// stack per CPU thread of the clipped events, walked depth first.
void Builder::call_stack_edges() {
  const std::size_t n = ev_.size();
  const auto thread_pid = [&](const Event& e) {
    const ThreadInfo& t = r_.threads()[static_cast<std::size_t>(e.thread)];
    return t.pid >= 0 ? t.pid : r_.pid();
  };
  const auto thread_tid = [&](const Event& e) {
    return static_cast<std::int64_t>(r_.threads()[static_cast<std::size_t>(e.thread)].tid);
  };
  // _get_fwd_tid / _get_bwd_tid: the one thread with cpu_op or user_annotation events whose
  // name holds "forward" ("autograd"); the backward one is then merged into the forward one.
  const auto only_tid = [&](std::string_view word) -> std::int64_t {
    std::int64_t found = -1;
    bool several = false;
    for (std::size_t i = 0; i < n; ++i) {
      if (!clipped_[i] || !contains(ev_[i].name, word)) continue;
      const std::string_view cat = r_.category(ev_[i]);
      if (cat != "cpu_op" && cat != "user_annotation") continue;
      const std::int64_t tid = thread_tid(ev_[i]);
      if (found != -1 && found != tid) several = true;
      found = tid;
    }
    return several ? -1 : found;
  };
  const std::int64_t fwd = only_tid("forward"), bwd = only_tid("autograd");
  const bool remap = fwd != -1 && bwd != -1 && fwd != bwd && fwd != 0 && bwd != 0;

  // Groups by (pid, tid); a group with any event on a stream is GPU work (no call stack).
  std::unordered_map<std::uint64_t, std::int32_t> group_of_key;
  std::vector<std::vector<std::int32_t>> groups;
  std::vector<std::uint8_t> cpu_group;
  for (std::size_t i = 0; i < n; ++i) {
    if (!clipped_[i]) continue;
    std::int64_t tid = thread_tid(ev_[i]);
    if (remap && tid == bwd) tid = fwd;
    const std::uint64_t key =
        (static_cast<std::uint64_t>(thread_pid(ev_[i])) * 0x9E3779B97F4A7C15ULL) ^
        static_cast<std::uint64_t>(tid);
    const auto [it, added] =
        group_of_key.try_emplace(key, static_cast<std::int32_t>(groups.size()));
    if (added) {
      groups.emplace_back();
      cpu_group.push_back(1);
    }
    groups[static_cast<std::size_t>(it->second)].push_back(static_cast<std::int32_t>(i));
    if (stream_[i] >= 0) cpu_group[static_cast<std::size_t>(it->second)] = 0;
  }

  struct Point {
    std::int64_t time;
    std::int64_t dur;
    std::int32_t ev;
    bool start;
  };
  std::vector<Point> points;
  std::vector<std::int32_t> first_child, next_sibling, last_child;
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    if (!cpu_group[gi]) continue;
    const std::vector<std::int32_t>& members = groups[gi];
    points.clear();
    for (const std::int32_t i : members) {
      const Event& e = event(i);
      const std::int64_t dur = std::max<std::int64_t>(e.duration_ns(), 0);
      points.push_back({e.start_ns, dur, i, true});
      points.push_back({e.start_ns + dur, dur, i, false});
    }
    // compare_events, for events that all last (the clipped CPU events have dur > 0): by time;
    // at one time ends before starts; starts longest first, then by index; ends shortest first,
    // then by index descending.
    std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
      if (a.time != b.time) return a.time < b.time;
      if (a.start != b.start) return !a.start;
      if (a.start) return a.dur != b.dur ? a.dur > b.dur : a.ev < b.ev;
      return a.dur != b.dur ? a.dur < b.dur : a.ev > b.ev;
    });
    // The call stack: a start's parent is the top of the stack; an end pops the top, whatever
    // it is (HTA's _construct_call_stack_graph).
    std::unordered_map<std::int32_t, std::int32_t> slot;  // event -> local slot
    slot.reserve(members.size());
    for (std::size_t k = 0; k < members.size(); ++k)
      slot[members[k]] = static_cast<std::int32_t>(k);
    const std::size_t cnt = members.size();
    first_child.assign(cnt + 1, kNone);  // [cnt] is the root
    last_child.assign(cnt + 1, kNone);
    next_sibling.assign(cnt + 1, kNone);
    std::vector<std::int32_t> par(cnt, static_cast<std::int32_t>(cnt));
    std::vector<std::int32_t> stack;
    for (const Point& p : points) {
      const std::int32_t s = slot[p.ev];
      if (p.start) {
        const std::int32_t up = stack.empty() ? static_cast<std::int32_t>(cnt) : stack.back();
        par[static_cast<std::size_t>(s)] = up;
        if (last_child[static_cast<std::size_t>(up)] == kNone) {
          first_child[static_cast<std::size_t>(up)] = s;
        } else {
          next_sibling[static_cast<std::size_t>(last_child[static_cast<std::size_t>(up)])] = s;
        }
        last_child[static_cast<std::size_t>(up)] = s;
        stack.push_back(s);
      } else if (!stack.empty()) {
        stack.pop_back();
      }
    }
    // _construct_graph_from_call_stack's enter_func and exit_func over a depth-first walk.
    std::int32_t last_node = kNone;
    int depth = 0;
    std::int64_t last_parent = kNone;
    const auto parent_event = [&](std::int32_t s) -> std::int64_t {
      const std::int32_t up = par[static_cast<std::size_t>(s)];
      return up == static_cast<std::int32_t>(cnt) ? -1 : members[static_cast<std::size_t>(up)];
    };
    const auto enter = [&](std::int32_t s) {
      const std::int32_t e = members[static_cast<std::size_t>(s)];
      const NodeOf no = nodes_of_[static_cast<std::size_t>(e)];
      if (no.start == kNone || no.end == kNone) return;
      if (last_node != kNone && !lock_shared(last_node, no.start)) {
        const auto type =
            depth == 0 ? CriticalPathEdgeType::kDependency : CriticalPathEdgeType::kOperatorKernel;
        attribute(add_edge(last_node, no.start, type), last_parent);
      }
      last_node = no.start;
      last_parent = parent_event(s);
      ++depth;
    };
    const auto exit = [&](std::int32_t s) {
      const std::int32_t e = members[static_cast<std::size_t>(s)];
      const NodeOf no = nodes_of_[static_cast<std::size_t>(e)];
      if (no.start == kNone || no.end == kNone) return;
      if (last_node != kNone && !lock_shared(last_node, no.end)) {
        const bool zero = g_.node_is_blocking[static_cast<std::size_t>(no.start)] != 0;
        attribute(add_edge(last_node, no.end, CriticalPathEdgeType::kOperatorKernel, zero),
                  last_parent);
      }
      last_node = no.end;
      last_parent = parent_event(s);
      --depth;
    };
    // Iterative depth-first walk: (slot, entered).
    std::vector<std::pair<std::int32_t, std::int32_t>> walk;  // (slot, next child to visit)
    for (std::int32_t c = first_child[cnt]; c != kNone;
         c = next_sibling[static_cast<std::size_t>(c)]) {
      walk.push_back({c, -2});
      while (!walk.empty()) {
        auto& [s, next] = walk.back();
        if (next == -2) {
          enter(s);
          next = first_child[static_cast<std::size_t>(s)];
        }
        if (next != kNone) {
          const std::int32_t child = next;
          next = next_sibling[static_cast<std::size_t>(child)];
          walk.push_back({child, -2});
          continue;
        }
        exit(s);
        walk.pop_back();
      }
    }
  }
}

// CPGraph._construct_graph_from_kernels.
void Builder::kernel_edges() {
  const std::size_t n = ev_.size();
  constexpr std::int64_t kNoQueue = std::numeric_limits<std::int64_t>::min();
  // TraceCounters._get_queue_length_time_series_for_rank over the whole trace: per stream,
  // +1 at each launch call with GPU work, -1 at that work, cumulated in time order.
  std::vector<std::int64_t> queue(n, kNoQueue);
  {
    std::unordered_map<std::int64_t, std::int32_t> gpu_by_corr;
    for (std::size_t i = 0; i < n; ++i) {
      if (frame_[i] && stream_[i] != -1 && corr_[i] != -1)
        gpu_by_corr[corr_[i]] = static_cast<std::int32_t>(i);
    }
    std::unordered_set<std::int64_t> launch_corr;
    struct Step {
      std::int64_t stream, ts;
      int phase;  // runtime calls before GPU work at one time (the concat's order)
      std::int32_t ev;
      int delta;
    };
    std::vector<Step> steps;
    for (std::size_t i = 0; i < n; ++i) {
      if (!frame_[i] || !is_launch_call(ev_[i].name, LaunchCalls::kEnqueue)) continue;
      launch_corr.insert(corr_[i]);
      const auto it = gpu_by_corr.find(corr_[i]);
      if (it == gpu_by_corr.end()) continue;
      steps.push_back({stream_[static_cast<std::size_t>(it->second)], ev_[i].start_ns, 0,
                       static_cast<std::int32_t>(i), 1});
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (frame_[i] && stream_[i] != -1 && launch_corr.count(corr_[i]) != 0) {
        steps.push_back({stream_[i], ev_[i].start_ns, 1, static_cast<std::int32_t>(i), -1});
      }
    }
    std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) {
      return std::tie(a.stream, a.ts, a.phase, a.ev) < std::tie(b.stream, b.ts, b.phase, b.ev);
    });
    std::int64_t cur_stream = std::numeric_limits<std::int64_t>::min(), len = 0;
    for (const Step& s : steps) {
      if (s.stream != cur_stream) {
        cur_stream = s.stream;
        len = 0;
      }
      len += s.delta;
      queue[static_cast<std::size_t>(s.ev)] = len;
    }
  }

  // _get_cuda_runtime_calls_df: the launch calls with their GPU work, in time order.
  struct Launch {
    std::int64_t ts;
    std::int32_t ev;
    std::int64_t stream, gpu, pid, tid;
  };
  std::vector<Launch> launches;
  const auto pid_of = [&](const Event& e) {
    const ThreadInfo& t = r_.threads()[static_cast<std::size_t>(e.thread)];
    return t.pid >= 0 ? t.pid : r_.pid();
  };
  const auto tid_of = [&](const Event& e) {
    return static_cast<std::int64_t>(r_.threads()[static_cast<std::size_t>(e.thread)].tid);
  };
  for (std::size_t i = 0; i < n; ++i) {
    if (!frame_[i] || !is_launch_call(ev_[i].name, LaunchCalls::kEnqueue)) continue;
    const std::int32_t k = ic_[i];
    if (k < 0 || stream_[static_cast<std::size_t>(k)] == -1) continue;
    launches.push_back({ev_[i].start_ns, static_cast<std::int32_t>(i),
                        stream_[static_cast<std::size_t>(k)], pid_of(event(k)), pid_of(ev_[i]),
                        tid_of(ev_[i])});
  }
  std::stable_sort(launches.begin(), launches.end(), [](const Launch& a, const Launch& b) {
    return std::tie(a.ts, a.ev) < std::tie(b.ts, b.ev);
  });

  // _get_cuda_event_to_stream_df and _get_cuda_event_record_df: each cudaEventRecord's
  // previous launch on the stream (and GPU) the event was recorded on.
  std::unordered_map<std::int64_t, std::pair<std::int64_t, std::int64_t>> record_stream;
  std::vector<std::int64_t> wait_record(n, -1);
  std::vector<std::uint8_t> has_wait_record(n, 0);
  bool any_wait_column = false;
  for (std::size_t i = 0; i < n; ++i) {
    if (!frame_[i] || r_.category(ev_[i]) != "cuda_sync") continue;
    bool present = false;
    const std::int64_t ws = other_int(r_, ev_[i], "wait_on_stream", -1, present);
    bool has_corr = false;
    const std::int64_t wc =
        other_int(r_, ev_[i], "wait_on_cuda_event_record_corr_id", -1, has_corr);
    if (has_corr) {
      wait_record[i] = wc;
      has_wait_record[i] = 1;
      if (clipped_[i]) any_wait_column = true;
    }
    if (present && ws > -1) record_stream.try_emplace(wc, ws, pid_of(ev_[i]));
  }
  std::unordered_map<std::int64_t, std::int32_t> previous_launch;  // record corr -> launch event
  bool any_record = false;
  {
    struct Item {
      std::int64_t gpu, stream, ts;
      int phase;
      std::int32_t ev;
      std::int64_t corr;
    };
    std::vector<Item> items;
    for (const Launch& l : launches) items.push_back({l.gpu, l.stream, l.ts, 0, l.ev, -1});
    for (std::size_t i = 0; i < n; ++i) {
      if (!frame_[i] || internal::canonical_call_name(ev_[i].name) != "cudaEventRecord") continue;
      const auto it = record_stream.find(corr_[i]);
      if (it == record_stream.end()) continue;
      any_record = true;
      items.push_back({it->second.second, it->second.first, ev_[i].start_ns, 1,
                       static_cast<std::int32_t>(i), corr_[i]});
    }
    std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
      return std::tie(a.gpu, a.stream, a.ts, a.phase) < std::tie(b.gpu, b.stream, b.ts, b.phase);
    });
    std::int32_t prev = kNone;
    for (std::size_t k = 0; k < items.size(); ++k) {
      if (k == 0 || items[k].gpu != items[k - 1].gpu || items[k].stream != items[k - 1].stream)
        prev = kNone;
      if (items[k].phase == 0) {
        prev = items[k].ev;
      } else {
        previous_launch[items[k].corr] = prev;
        g_.event_records.push_back({items[k].ev, items[k].stream, items[k].gpu, prev});
      }
    }
    std::stable_sort(g_.event_records.begin(), g_.event_records.end(),
                     [&](const auto& a, const auto& b) {
                       return std::tie(event(a.event).start_ns, a.event) <
                              std::tie(event(b.event).start_ns, b.event);
                     });
  }
  // _get_cuda_stream_wait_event_df: each cudaStreamWaitEvent's next launch on its thread onto
  // the stream that waits.
  std::unordered_map<std::int32_t, std::int32_t> next_launch;  // wait call -> launch event
  {
    struct Item {
      std::int64_t pid, tid, stream, ts;
      int phase;
      std::int32_t ev;
    };
    std::vector<Item> items;
    for (const Launch& l : launches) items.push_back({l.pid, l.tid, l.stream, l.ts, 0, l.ev});
    for (std::size_t i = 0; i < n; ++i) {
      if (!frame_[i] || internal::canonical_call_name(ev_[i].name) != "cudaStreamWaitEvent") {
        continue;
      }
      const std::int32_t k = ic_[i];
      if (k < 0 || stream_[static_cast<std::size_t>(k)] == -1) continue;
      items.push_back({pid_of(ev_[i]), tid_of(ev_[i]), stream_[static_cast<std::size_t>(k)],
                       ev_[i].start_ns, 1, static_cast<std::int32_t>(i)});
    }
    std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
      return std::tie(a.pid, a.tid, a.stream, a.ts, a.phase) <
             std::tie(b.pid, b.tid, b.stream, b.ts, b.phase);
    });
    std::int32_t next = kNone;
    for (std::size_t k = items.size(); k-- > 0;) {
      if (k + 1 == items.size() || items[k].pid != items[k + 1].pid ||
          items[k].tid != items[k + 1].tid || items[k].stream != items[k + 1].stream) {
        next = kNone;
      }
      if (items[k].phase == 0) {
        next = items[k].ev;
      } else {
        next_launch[items[k].ev] = next;
        g_.stream_waits.push_back({items[k].ev, items[k].stream, next});
      }
    }
    std::stable_sort(g_.stream_waits.begin(), g_.stream_waits.end(),
                     [&](const auto& a, const auto& b) {
                       return std::tie(event(a.event).start_ns, a.event) <
                              std::tie(event(b.event).start_ns, b.event);
                     });
  }

  // The GPU work and syncs of the window, by start (syncs by their end).
  struct Row {
    std::int64_t sort_by;
    std::int32_t ev;
  };
  std::vector<Row> rows;
  for (std::size_t i = 0; i < n; ++i) {
    if (!clipped_[i] || ic_[i] < 0) continue;
    const Event& e = ev_[i];
    if (stream_[i] == -1 && e.name != "Event Sync" && e.name != "Context Sync") continue;
    const bool sync = r_.category(e) == "cuda_sync";
    rows.push_back({sync ? e.end_ns : e.start_ns, static_cast<std::int32_t>(i)});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return std::tie(a.sort_by, a.ev) < std::tie(b.sort_by, b.ev);
  });
  const bool event_sync_merge = any_wait_column && any_record;

  std::vector<std::pair<std::int64_t, std::int32_t>>
      last_node;  // (stream, end node), first-seen order
  std::unordered_map<std::int64_t, std::size_t> last_at;
  const auto last_of = [&](std::int64_t stream) -> std::int32_t {
    const auto it = last_at.find(stream);
    return it == last_at.end() ? kNone : last_node[it->second].second;
  };
  std::unordered_map<std::int32_t, std::int32_t> kernel_sync;  // dest kernel -> src kernel
  const auto sync_edge = [&](std::int32_t gpu_node, std::int32_t runtime) {
    if (runtime < 0) return;
    const std::int32_t end = nodes_of_[static_cast<std::size_t>(runtime)].end;
    if (end == kNone) return;
    add_edge(gpu_node, end, CriticalPathEdgeType::kSyncDependency);
  };
  for (const Row& row : rows) {
    const std::int32_t eid = row.ev;
    const Event& e = event(eid);
    const auto i = static_cast<std::size_t>(eid);
    if (r_.category(e) == "cuda_sync") {
      // handle_cuda_sync.
      if (e.name == "Stream Wait Event" || e.name == "Event Sync") {
        if (!event_sync_merge || !has_wait_record[i]) continue;
        const auto pl = previous_launch.find(wait_record[i]);
        if (pl == previous_launch.end() || pl->second == kNone) continue;
        const std::int32_t src_kernel = ic_[static_cast<std::size_t>(pl->second)];
        if (e.name == "Stream Wait Event") {
          const auto nl = next_launch.find(ic_[i]);
          if (nl == next_launch.end() || nl->second == kNone) continue;
          kernel_sync[ic_[static_cast<std::size_t>(nl->second)]] = src_kernel;
        } else if (src_kernel >= 0) {
          const std::int32_t gpu_end = nodes_of_[static_cast<std::size_t>(src_kernel)].end;
          if (gpu_end != kNone) sync_edge(gpu_end, ic_[i]);
        }
        continue;
      }
      if (e.name == "Context Sync") {
        for (const auto& [stream, node] : last_node) sync_edge(node, ic_[i]);
      } else if (e.name == "Stream Sync") {
        const std::int32_t node = last_of(stream_[i]);
        if (node != kNone) sync_edge(node, ic_[i]);
      }
      continue;
    }
    const std::int64_t stream = stream_[i];
    const NodeOf no = nodes_of_[i];
    if (no.start == kNone || no.end == kNone) continue;
    attribute(add_edge(no.start, no.end, CriticalPathEdgeType::kOperatorKernel), -1);
    const std::int32_t runtime = ic_[i];
    std::int32_t sync_index = kNone, sync_end = kNone;
    if (const auto ks = kernel_sync.find(eid); ks != kernel_sync.end() && ks->second != kNone) {
      sync_index = ks->second;
      sync_end = sync_index >= 0 ? nodes_of_[static_cast<std::size_t>(sync_index)].end : kNone;
      if (sync_end == kNone) {
        sync_index = kNone;
      } else {
        add_edge(sync_end, no.start, CriticalPathEdgeType::kSyncDependency);
      }
      ks->second = kNone;
    }
    const std::int64_t q_runtime =
        runtime >= 0 ? queue[static_cast<std::size_t>(runtime)] : kNoQueue;
    const std::int64_t q_kernel = queue[i];
    const std::int64_t runtime_ts = runtime >= 0 ? event(runtime).start_ns : 0;
    const std::int32_t last = last_of(stream);
    bool launch_added = false;
    if (q_runtime == 1 && q_kernel == 0 && (last == kNone || ts(last) < runtime_ts) &&
        (sync_index == kNone || ts(sync_end) < runtime_ts)) {
      const std::int32_t rs = nodes_of_[static_cast<std::size_t>(runtime)].start;
      if (rs != kNone) {
        add_edge(rs, no.start, CriticalPathEdgeType::kKernelLaunchDelay);
        launch_added = true;
      } else {
        g_.warnings.push_back("no node for the runtime call of kernel event " +
                              std::to_string(eid));
      }
    } else if (last != kNone && ts(no.start) - ts(last) < kKernelKernelDelayThresholdNs &&
               (sync_index == kNone || ts(sync_end) < ts(last))) {
      attribute(add_edge(last, no.start, CriticalPathEdgeType::kKernelKernelDelay), -1);
    }
    if (o_.add_zero_weight_launch_edges && !launch_added && runtime >= 0) {
      const std::int32_t rs = nodes_of_[static_cast<std::size_t>(runtime)].start;
      if (rs != kNone) add_edge(rs, no.start, CriticalPathEdgeType::kKernelLaunchDelay, true);
    }
    if (const auto it = last_at.find(stream); it != last_at.end()) {
      last_node[it->second].second = no.end;
    } else {
      last_at[stream] = last_node.size();
      last_node.emplace_back(stream, no.end);
    }
  }
}

// CPGraph._validate_graph and critical_path(): networkx's dag_longest_path, with its order
// (nodes as the edges brought them in, successors and predecessors in the order their edges
// were added) so that ties pick the same path.
void Builder::longest_path() {
  const std::size_t edges = g_.edge_begin.size();
  g_.edge_graph_weight_ns = g_.edge_weight_ns;
  for (std::size_t k = 0; k < edges; ++k) {
    // A weight of -1 us or less is taken as 0 (HTA's default, without
    // CRITICAL_PATH_STRICT_NEGATIVE_WEIGHT_CHECKS): ns-precision parents that end before
    // their children.
    if (g_.edge_weight_ns[k] <= -1000) g_.edge_graph_weight_ns[k] = 0;
    if (g_.edge_type[k] == CriticalPathEdgeType::kSyncDependency) {
      const std::int64_t s = stream_[static_cast<std::size_t>(ev_of(g_.edge_begin[k]))];
      const std::int64_t d = stream_[static_cast<std::size_t>(ev_of(g_.edge_end[k]))];
      if (s != -1 && s == d) {
        g_.warnings.push_back("a synchronization edge between kernels on one stream");
        return;
      }
    }
  }
  // Graph nodes in networkx's insertion order.
  const std::size_t m = g_.node_event.size();
  std::vector<std::int32_t> order;
  std::vector<std::int32_t> pos(m, kNone);
  for (std::size_t k = 0; k < edges; ++k) {
    for (const std::int32_t v : {g_.edge_begin[k], g_.edge_end[k]}) {
      if (pos[static_cast<std::size_t>(v)] == kNone) {
        pos[static_cast<std::size_t>(v)] = static_cast<std::int32_t>(order.size());
        order.push_back(v);
      }
    }
  }
  g_.graph_nodes = order;
  if (order.empty()) return;
  // Successor and predecessor lists (CSR), each in edge-insertion order.
  const std::size_t gn = order.size();
  std::vector<std::int32_t> out_begin(gn + 1, 0), in_begin(gn + 1, 0);
  for (std::size_t k = 0; k < edges; ++k) {
    ++out_begin[static_cast<std::size_t>(pos[static_cast<std::size_t>(g_.edge_begin[k])]) + 1];
    ++in_begin[static_cast<std::size_t>(pos[static_cast<std::size_t>(g_.edge_end[k])]) + 1];
  }
  for (std::size_t k = 0; k < gn; ++k) {
    out_begin[k + 1] += out_begin[k];
    in_begin[k + 1] += in_begin[k];
  }
  std::vector<std::int32_t> out_edges(edges), in_edges(edges);
  {
    std::vector<std::int32_t> o = out_begin, in = in_begin;
    for (std::size_t k = 0; k < edges; ++k) {
      out_edges[static_cast<std::size_t>(
          o[static_cast<std::size_t>(pos[static_cast<std::size_t>(g_.edge_begin[k])])]++)] =
          static_cast<std::int32_t>(k);
      in_edges[static_cast<std::size_t>(
          in[static_cast<std::size_t>(pos[static_cast<std::size_t>(g_.edge_end[k])])]++)] =
          static_cast<std::int32_t>(k);
    }
  }
  // topological_generations.
  std::vector<std::int32_t> indegree(gn), topo;
  topo.reserve(gn);
  std::vector<std::int32_t> zero;
  for (std::size_t k = 0; k < gn; ++k) {
    indegree[k] = in_begin[k + 1] - in_begin[k];
    if (indegree[k] == 0) zero.push_back(static_cast<std::int32_t>(k));
  }
  while (!zero.empty()) {
    std::vector<std::int32_t> generation;
    generation.swap(zero);
    for (const std::int32_t u : generation) {
      topo.push_back(u);
      for (std::int32_t j = out_begin[static_cast<std::size_t>(u)];
           j < out_begin[static_cast<std::size_t>(u) + 1]; ++j) {
        const std::int32_t child = pos[static_cast<std::size_t>(
            g_.edge_end[static_cast<std::size_t>(out_edges[static_cast<std::size_t>(j)])])];
        if (--indegree[static_cast<std::size_t>(child)] == 0) zero.push_back(child);
      }
    }
  }
  if (topo.size() != gn) {
    g_.warnings.push_back("the graph has cycles");
    return;
  }
  std::vector<std::int64_t> dist(gn, 0);
  std::vector<std::int32_t> from(gn, kNone);
  for (const std::int32_t v : topo) {
    const auto vi = static_cast<std::size_t>(v);
    bool any = false;
    std::int64_t best = 0;
    std::int32_t best_u = v;
    for (std::int32_t j = in_begin[vi]; j < in_begin[vi + 1]; ++j) {
      const auto k = static_cast<std::size_t>(in_edges[static_cast<std::size_t>(j)]);
      const std::int32_t u = pos[static_cast<std::size_t>(g_.edge_begin[k])];
      const std::int64_t d = dist[static_cast<std::size_t>(u)] + g_.edge_graph_weight_ns[k];
      if (!any || d > best) {
        best = d;
        best_u = u;
        any = true;
      }
    }
    if (!any || best < 0) {
      dist[vi] = 0;
      from[vi] = v;
    } else {
      dist[vi] = best;
      from[vi] = best_u;
    }
  }
  std::int32_t v = topo.front();
  for (const std::int32_t t : topo) {
    if (dist[static_cast<std::size_t>(t)] > dist[static_cast<std::size_t>(v)]) v = t;
  }
  std::vector<std::int32_t> path;
  std::int32_t u = kNone;
  while (u != v) {
    path.push_back(v);
    u = v;
    v = from[static_cast<std::size_t>(v)];
  }
  std::reverse(path.begin(), path.end());
  if (path.size() < 2) {
    g_.warnings.push_back("the longest path has fewer than two nodes");
    return;
  }
  g_.path_length_ns = dist[static_cast<std::size_t>(path.back())];
  for (std::int32_t& p : path) p = order[static_cast<std::size_t>(p)];
  g_.path_nodes = path;
  for (std::size_t k = 0; k + 1 < path.size(); ++k) {
    const std::uint64_t key =
        (static_cast<std::uint64_t>(static_cast<std::uint32_t>(path[k])) << 32) |
        static_cast<std::uint32_t>(path[k + 1]);
    g_.path_edges.push_back(edge_at_.at(key));
  }
  g_.valid = true;
}

void Builder::run() {
  prepare();
  clip();
  if (!g_.found) return;
  create_nodes();
  runtime_lock_edges();
  call_stack_edges();
  kernel_edges();
  longest_path();
}

}  // namespace

CriticalPathGraph critical_path_graph(const ProfilerResult& r, const ReportOptions& options) {
  CriticalPathGraph g;
  Builder(r, options, g).run();
  return g;
}

}  // namespace opscope
