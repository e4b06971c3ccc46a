// The "patterns" report: HTA's get_frequent_cuda_kernel_sequences
// (hta/analyzers/cuda_kernel_analysis.py) over HTA's call graph (hta/common/trace_call_*.py),
// declared in opscope/trace_analysis.h; tests/unit/analyze_kernel_reports_test.cpp runs HTA
// beside it on real traces.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "analysis/gpu_work.h"
#include "analysis/hta_events.h"
#include "analysis/report_catalog.h"
#include "opscope/trace_analysis.h"

namespace opscope {
namespace {

using internal::analyzed_events;
using internal::correlation_of;
using internal::in_hta_frame;
using internal::stream_of;
using internal::us;

using Ranks = std::span<const std::shared_ptr<const ProfilerResult>>;

std::vector<bool> as_mask(const std::vector<std::int32_t>& indices, std::size_t n) {
  std::vector<bool> mask(n, false);
  for (const std::int32_t i : indices) mask[static_cast<std::size_t>(i)] = true;
  return mask;
}

// HTA's CallGraph for one rank (hta/common/trace_call_graph.py, trace_call_stack.py): the CPU
// events of each thread nested by interval containment, each GPU kernel a child of the runtime
// call that launched it, and the backward thread's operators put under the main thread's
// steps. Indexed by event (r.events()).
struct CallGraph {
  static constexpr std::int32_t kTop = -1;  // parent of a top-level event
  std::vector<bool> in_graph;
  std::vector<bool> gpu;
  std::vector<std::int32_t> parent;
  std::vector<std::vector<std::int32_t>> children;
  std::vector<std::int32_t> depth;        // 0 at the top; -1 outside the graph, as in HTA
  std::vector<std::int64_t> num_kernels;  // GPU kernels in the subtree
  // and their summed duration: wide (util/wide_sums.h), as the many kernels under one event
  // can pass INT64_MAX; printed as a double of microseconds
  std::vector<internal::WideSum> kernel_ns;
};

// Nests the CPU events of one thread as HTA's CallStackGraph does: a sweep over their starts
// and ends in HTA's order (_less_than), where each start becomes a child of the innermost open
// event. At equal times: ends of events with a length close before starts open (touching
// events are siblings); a longer event opens first and a shorter one closes first; an event of
// no length goes inside an event starting at that time if there is one, else inside one ending
// then (HTA's comparison has no single answer when both exist); among equal events, the first
// encloses the later ones.
void nest_thread(const std::vector<Event>& events, const std::vector<std::int32_t>& cpu,
                 CallGraph& g) {
  struct End {
    std::int64_t time;
    // Order at one time: 0 close, 1 open, then 2 open and 3 close of events of no length;
    // those are -2 and -1 (before the closes) when nothing with a length opens then.
    int group;
    std::int64_t key;
    std::int32_t event;
  };
  std::vector<std::int64_t> open_times;  // starts of events with a length, sorted
  for (const std::int32_t k : cpu) {
    const Event& e = events[static_cast<std::size_t>(k)];
    if (e.duration_ns() > 0) open_times.push_back(e.start_ns);
  }
  std::sort(open_times.begin(), open_times.end());
  std::vector<End> ends;
  for (const std::int32_t k : cpu) {
    const Event& e = events[static_cast<std::size_t>(k)];
    const std::int64_t dur = e.duration_ns();
    if (dur > 0) {
      ends.push_back({e.start_ns, 1, -dur, k});  // longer first, then earlier event
      ends.push_back({e.end_ns, 0, dur, -k});    // shorter first, then later event
    } else {
      const bool opening_there =
          std::binary_search(open_times.begin(), open_times.end(), e.start_ns);
      ends.push_back({e.start_ns, opening_there ? 2 : -2, k, k});
      ends.push_back({e.start_ns, opening_there ? 3 : -1, -k, k});
    }
  }
  std::sort(ends.begin(), ends.end(), [](const End& a, const End& b) {
    return std::tie(a.time, a.group, a.key, a.event) < std::tie(b.time, b.group, b.key, b.event);
  });
  std::vector<std::int32_t> open;
  for (const End& x : ends) {
    const bool opens = x.group == 1 || x.group == 2 || x.group == -2;
    if (!opens) {
      if (!open.empty()) open.pop_back();  // HTA pops whatever is on top
      continue;
    }
    const std::int32_t k = x.event;
    const std::int32_t p = open.empty() ? CallGraph::kTop : open.back();
    g.parent[static_cast<std::size_t>(k)] = p;
    if (p >= 0) g.children[static_cast<std::size_t>(p)].push_back(k);
    open.push_back(k);
  }
}

CallGraph call_graph(const ProfilerResult& r, const std::vector<bool>& kept) {
  const std::vector<Event>& events = r.events();
  const std::size_t n = events.size();
  CallGraph g;
  g.in_graph.assign(n, false);
  g.gpu.assign(n, false);
  g.parent.assign(n, CallGraph::kTop);
  g.children.assign(n, {});
  g.depth.assign(n, -1);
  g.num_kernels.assign(n, 0);
  g.kernel_ns.assign(n, 0);

  // The events of each thread (events are ordered by thread).
  struct Thread {
    std::int64_t pid = 0;
    std::uint64_t tid = 0;
    std::vector<std::int32_t> rows;  // what HTA keeps of it, any stream
    std::string_view label;          // "main", "bwd" or empty
  };
  std::vector<Thread> threads(r.threads().size());
  for (std::size_t t = 0; t < threads.size(); ++t) {
    threads[t].pid = r.pid_of(r.threads()[t]);
    threads[t].tid = r.threads()[t].tid;
  }
  for (std::size_t k = 0; k < n; ++k) {
    if (kept[k] && in_hta_frame(r, events[k])) {
      threads[static_cast<std::size_t>(events[k].thread)].rows.push_back(
          static_cast<std::int32_t>(k));
    }
  }
  std::vector<std::int32_t> graphed;  // threads with a call stack, in (pid, tid) order
  for (std::size_t t = 0; t < threads.size(); ++t) {
    Thread& th = threads[t];
    if (th.rows.empty()) continue;
    // HTA's infer_device_type: a GPU stream has only work on streams above 0, or sits in
    // process 0 or thread 0 (Kineto's GPU 0); everything else gets a call stack.
    bool all_on_streams = true;
    for (const std::int32_t k : th.rows) {
      all_on_streams = all_on_streams && stream_of(r, events[static_cast<std::size_t>(k)]) > 0;
    }
    if (all_on_streams || th.pid == 0 || th.tid == 0) continue;
    std::vector<std::int32_t> cpu;
    for (const std::int32_t k : th.rows) {
      const Event& e = events[static_cast<std::size_t>(k)];
      // A ProfilerStep# anywhere makes the thread "main", even after an autograd:: name.
      if (stream_of(r, e) < 0) {
        cpu.push_back(k);
        g.in_graph[static_cast<std::size_t>(k)] = true;
      }
      if (e.name.starts_with("ProfilerStep#")) {
        th.label = "main";
      } else if (th.label.empty() && e.name.find("autograd::") != std::string_view::npos) {
        th.label = "bwd";
      }
    }
    nest_thread(events, cpu, g);
    graphed.push_back(static_cast<std::int32_t>(t));
  }

  // GPU work becomes a child of the call that launched it (same correlation id), for work on
  // streams above 0 (HTA's get_cpu_gpu_correlation: AMD's stream 0 is not linked).
  std::vector<std::pair<std::int64_t, std::int32_t>> launcher;  // (correlation, CPU event)
  for (std::size_t k = 0; k < n; ++k) {
    if (!g.in_graph[k]) continue;
    const std::int64_t c = correlation_of(r, events[k]);
    if (c >= 0) launcher.emplace_back(c, static_cast<std::int32_t>(k));
  }
  std::stable_sort(launcher.begin(), launcher.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t k = 0; k < n; ++k) {
    if (!kept[k] || !in_hta_frame(r, events[k]) || stream_of(r, events[k]) <= 0) continue;
    const std::int64_t c = correlation_of(r, events[k]);
    if (c < 0) continue;
    auto it = std::upper_bound(launcher.begin(), launcher.end(), c,
                               [](std::int64_t v, const auto& p) { return v < p.first; });
    if (it == launcher.begin() || std::prev(it)->first != c) continue;
    const std::int32_t p = std::prev(it)->second;  // on duplicates the last, as in HTA
    g.in_graph[k] = g.gpu[k] = true;
    g.parent[k] = p;
    g.children[static_cast<std::size_t>(p)].push_back(static_cast<std::int32_t>(k));
  }

  // The backward pass runs on a thread of its own; HTA moves its top-level operators under the
  // main thread's "## backward ##" annotations (else its ProfilerStep#N ranges) that contain
  // them, when exactly one main thread (it has a ProfilerStep#) and one backward thread (it has
  // an autograd:: op) exist.
  std::vector<std::int32_t> labelled;
  for (const std::int32_t t : graphed) {
    if (!threads[static_cast<std::size_t>(t)].label.empty()) labelled.push_back(t);
  }
  std::stable_sort(labelled.begin(), labelled.end(), [&](std::int32_t a, std::int32_t b) {
    return threads[static_cast<std::size_t>(a)].label < threads[static_cast<std::size_t>(b)].label;
  });
  if (labelled.size() == 2) {
    const Thread& bwd = threads[static_cast<std::size_t>(labelled[0])];
    const Thread& main = threads[static_cast<std::size_t>(labelled[1])];
    std::vector<std::int32_t> new_parents;
    for (const std::string_view prefix :
         {std::string_view("## backward ##"), std::string_view("ProfilerStep#")}) {
      for (const std::int32_t k : main.rows) {
        const std::string_view name = events[static_cast<std::size_t>(k)].name;
        if (name.substr(0, prefix.size()) == prefix && g.in_graph[static_cast<std::size_t>(k)])
          new_parents.push_back(k);
      }
      if (!new_parents.empty()) break;
    }
    for (const std::int32_t p : new_parents) {
      const Event& range = events[static_cast<std::size_t>(p)];
      for (const std::int32_t k : bwd.rows) {
        const Event& e = events[static_cast<std::size_t>(k)];
        if (!g.in_graph[static_cast<std::size_t>(k)] ||
            g.parent[static_cast<std::size_t>(k)] != CallGraph::kTop ||
            g.gpu[static_cast<std::size_t>(k)] || e.start_ns < range.start_ns ||
            e.end_ns > range.end_ns) {
          continue;
        }
        g.parent[static_cast<std::size_t>(k)] = p;
        g.children[static_cast<std::size_t>(p)].push_back(k);
      }
    }
  }

  // Depths from the top, and the kernels under each event (children before parents: a
  // post-order walk from every top-level event).
  for (std::size_t root = 0; root < n; ++root) {
    if (!g.in_graph[root] || g.parent[root] != CallGraph::kTop) continue;
    std::vector<std::pair<std::int32_t, bool>> todo = {{static_cast<std::int32_t>(root), false}};
    g.depth[root] = 0;
    while (!todo.empty()) {
      auto [k, done] = todo.back();
      todo.pop_back();
      const auto ku = static_cast<std::size_t>(k);
      if (done) {
        if (g.gpu[ku]) {
          g.num_kernels[ku] = 1;
          g.kernel_ns[ku] = events[ku].duration_ns();
        }
        for (const std::int32_t c : g.children[ku]) {
          g.num_kernels[ku] += g.num_kernels[static_cast<std::size_t>(c)];
          g.kernel_ns[ku] += g.kernel_ns[static_cast<std::size_t>(c)];
        }
        continue;
      }
      todo.push_back({k, true});
      for (const std::int32_t c : g.children[ku]) {
        g.depth[static_cast<std::size_t>(c)] = g.depth[ku] + 1;
        todo.push_back({c, false});
      }
    }
  }
  return g;
}

}  // namespace

Report frequent_cuda_kernel_sequences(Ranks ranks, const ReportOptions& options) {
  Report report;
  report.name = "patterns";
  report.columns = {"rank", "pattern", "count", "GPU kernel duration (us)", "CPU op duration (us)"};
  std::vector<std::pair<std::int64_t, std::vector<ReportCell>>> rows;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const ProfilerResult& r = *ranks[i];
    const std::vector<Event>& events = r.events();
    const std::int64_t rank = rank_of(r, options.first_position + static_cast<std::int64_t>(i));
    const std::vector<bool> kept =
        as_mask(analyzed_events(r, internal::drop_last_step(r, options)), events.size());
    const CallGraph g = call_graph(r, kept);

    // The roots: operators named like operator_name at the shallowest depth any of them has
    // (so that a match inside a match is not counted twice), with enough kernels. An event HTA
    // keeps outside the call graph (GPU work no call launched) has depth -1 and can be that
    // shallowest, as in HTA. Without a name: every top-level CPU operator.
    std::vector<std::int32_t> candidates;
    std::int32_t min_depth = std::numeric_limits<std::int32_t>::max();
    for (std::size_t k = 0; k < events.size(); ++k) {
      const Event& e = events[k];
      if (!kept[k] || !in_hta_frame(r, e)) continue;
      if (options.operator_name.empty()) {
        if (!g.in_graph[k] || g.gpu[k] || g.depth[k] != 0) continue;
      } else if (e.name.find(options.operator_name) == std::string_view::npos) {
        continue;
      }
      candidates.push_back(static_cast<std::int32_t>(k));
      min_depth = std::min(min_depth, g.depth[k]);
    }
    struct Pattern {
      std::int64_t count = 0;
      internal::WideSum kernel_ns = 0;
      internal::WideSum cpu_ns = 0;
    };
    std::map<std::string, Pattern> patterns;
    for (const std::int32_t root : candidates) {
      const auto ru = static_cast<std::size_t>(root);
      if (g.depth[ru] != min_depth || g.gpu[ru] ||
          g.num_kernels[ru] < static_cast<std::int64_t>(options.min_pattern_len)) {
        continue;
      }
      // The kernels under the root in start order.
      std::vector<std::int32_t> kernels;
      std::vector<std::int32_t> todo = {root};
      while (!todo.empty()) {
        const std::int32_t k = todo.back();
        todo.pop_back();
        if (g.gpu[static_cast<std::size_t>(k)]) kernels.push_back(k);
        for (const std::int32_t c : g.children[static_cast<std::size_t>(k)]) todo.push_back(c);
      }
      std::sort(kernels.begin(), kernels.end(), [&](std::int32_t a, std::int32_t b) {
        return std::tie(events[static_cast<std::size_t>(a)].start_ns, a) <
               std::tie(events[static_cast<std::size_t>(b)].start_ns, b);
      });
      std::string pattern(events[ru].name);
      for (const std::int32_t k : kernels) {
        pattern += '|';
        pattern += events[static_cast<std::size_t>(k)].name;
      }
      Pattern& p = patterns[pattern];
      ++p.count;
      p.kernel_ns += g.kernel_ns[ru];  // wide, as the sums under each event (CallGraph)
      p.cpu_ns += events[ru].duration_ns();
    }
    // Most frequent first, then by pattern (std::map keeps them in that order already).
    std::vector<std::pair<std::string, Pattern>> sorted(patterns.begin(), patterns.end());
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& a, const auto& b) { return a.second.count > b.second.count; });
    for (auto& [pattern, p] : sorted) {
      rows.push_back({rank,
                      {rank, std::move(pattern), p.count, internal::wide_us(p.kernel_ns),
                       internal::wide_us(p.cpu_ns)}});
    }
  }
  internal::sort_by_rank(rows);
  for (auto& [rank, row] : rows) report.rows.push_back(std::move(row));
  return report;
}

}  // namespace opscope

namespace opscope::internal {
namespace {

constexpr std::string_view kOptions[] = {"operator_name", "min_pattern_len"};
constexpr ReportMethod kMethods[] = {
    {.name = "get_frequent_cuda_kernel_sequences", .table = "patterns"}};

}  // namespace

const ReportEntry& patterns_report_row() {
  static const ReportEntry row{
      .kind = {.name = "patterns",
               .hta = "get_frequent_cuda_kernel_sequences",
               .summary = "per rank: the kernel sequences the operators named by --operator "
                          "launched, with how often and how long",
               .reads_cpu_range_args = false,
               .reads_flows = false,
               .reads_cpu_ranges = true,
               .options = kOptions,
               .methods = kMethods},
      .order = 70,
      .run = one_table<frequent_cuda_kernel_sequences>};
  return row;
}

}  // namespace opscope::internal
