// Kernel-level reports of opscope/trace_analysis.h: how kernels were launched (HTA's
// get_cuda_kernel_launch_stats), how the top kernels' durations spread on each rank (the charts
// of get_gpu_kernel_breakdown), and which kernel sequences operators launch over and over
// (get_frequent_cuda_kernel_sequences). Each follows HTA's sources (../shared/peers/hta,
// hta/analyzers/cuda_kernel_analysis.py, breakdown_analysis.py, hta/common/trace_call_*.py);
// tests/unit/analyze_kernel_reports_test.cpp runs both side by side on real traces.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "analysis/gpu_work.h"
#include "opscope/trace_analysis.h"

namespace opscope {
namespace {

using internal::analyzed_events;
using internal::analyzed_gpu_events;
using internal::correlation_of;
using internal::describe;
using internal::Describe;
using internal::stream_of;
using internal::us;

using Ranks = std::span<const std::shared_ptr<const ProfilerResult>>;

std::vector<bool> as_mask(const std::vector<std::int32_t>& indices, std::size_t n) {
  std::vector<bool> mask(n, false);
  for (const std::int32_t i : indices) mask[static_cast<std::size_t>(i)] = true;
  return mask;
}

// pandas' Series.quantile: linear interpolation at position q * (n - 1) of the sorted values.
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// ---------------------------------------------------------------------------------------------
// launch

// The runtime calls whose correlation ids HTA pairs with GPU work. cuLaunchKernel (triton) and
// the hip* calls are not among them in HTA, so they are not here either.
bool is_launch_call(std::string_view name, bool include_memory_events) {
  if (name == "cudaLaunchKernel" || name == "cudaLaunchKernelExC" ||
      name == "runFunction - job_prep_and_submit_for_execution") {
    return true;
  }
  return include_memory_events && (name == "cudaMemcpyAsync" || name == "cudaMemsetAsync");
}

}  // namespace

std::vector<Report> cuda_kernel_launch_stats(Ranks ranks, const ReportOptions& options) {
  Report launch;
  launch.name = "launch";
  launch.columns = {"rank", "correlation", "cpu_duration", "gpu_duration", "launch_delay"};
  Report summary;
  summary.name = "launch_summary";
  summary.columns = {"rank",
                     "launches",
                     "short_kernels",
                     "runtime_outliers",
                     "launch_delay_outliers",
                     "launch_delay_median",
                     "launch_delay_p95"};
  const bool drop_last = internal::drop_last_step(ranks, options);
  // Rows of all ranks, put in rank order at the end (the traces may come in any order).
  std::vector<std::pair<std::int64_t, std::vector<ReportCell>>> rows, summaries;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const ProfilerResult& r = *ranks[i];
    const std::vector<Event>& events = r.events();
    const std::int64_t rank = rank_of(r, options.first_position + static_cast<std::int64_t>(i));
    // HTA takes what its trace filter kept (the last profiler step left out, by default).
    const std::vector<std::int32_t> kept = analyzed_events(r, drop_last);
    std::vector<std::int64_t> launched;  // correlation ids of the launch calls, sorted
    for (const std::int32_t k : kept) {
      const Event& e = events[static_cast<std::size_t>(k)];
      const std::int64_t c = correlation_of(r, e);
      if (c >= 0 && is_launch_call(e.name, options.include_memory_events)) launched.push_back(c);
    }
    std::sort(launched.begin(), launched.end());
    const auto is_launched = [&](std::int64_t c) {
      return std::binary_search(launched.begin(), launched.end(), c);
    };
    // CPU and GPU sides with such an id (HTA: stream -1 and not), each in time order; the
    // rows pair them as pandas' inner merge does, in the CPU side's order.
    std::vector<std::pair<std::int64_t, std::int32_t>> gpu;  // (correlation, event)
    std::vector<std::int32_t> cpu;
    for (const std::int32_t k : kept) {
      const Event& e = events[static_cast<std::size_t>(k)];
      const std::int64_t c = correlation_of(r, e);
      if (c < 0 || !is_launched(c)) continue;
      if (stream_of(r, e) < 0) {
        cpu.push_back(k);
      } else {
        gpu.emplace_back(c, k);
      }
    }
    const auto by_start = [&](std::int32_t a, std::int32_t b) {
      const Event& x = events[static_cast<std::size_t>(a)];
      const Event& y = events[static_cast<std::size_t>(b)];
      return std::tie(x.start_ns, a) < std::tie(y.start_ns, b);
    };
    std::stable_sort(cpu.begin(), cpu.end(), by_start);
    std::stable_sort(gpu.begin(), gpu.end(), [&](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : by_start(a.second, b.second);
    });
    std::int64_t short_kernels = 0, runtime_outliers = 0, delay_outliers = 0;
    std::vector<double> delays;
    for (const std::int32_t k : cpu) {
      const Event& call = events[static_cast<std::size_t>(k)];
      const std::int64_t c = correlation_of(r, call);
      auto it = std::lower_bound(gpu.begin(), gpu.end(), std::make_pair(c, std::int32_t{-1}));
      for (; it != gpu.end() && it->first == c; ++it) {
        const Event& work = events[static_cast<std::size_t>(it->second)];
        const double cpu_us = us(call.duration_ns());
        const double gpu_us = us(work.duration_ns());
        // A kernel can start before its launch call returns: HTA clips the delay at 0.
        const double delay = std::max(0.0, us(work.start_ns - call.end_ns));
        rows.push_back({rank, {rank, c, cpu_us, gpu_us, delay}});
        // The cutoffs pick what HTA's three histograms plot.
        if (cpu_us <= options.runtime_cutoff_us && gpu_us < cpu_us) ++short_kernels;
        if (cpu_us > options.runtime_cutoff_us) ++runtime_outliers;
        if (delay > options.launch_delay_cutoff_us) ++delay_outliers;
        delays.push_back(delay);
      }
    }
    summaries.push_back(
        {rank,
         {rank, static_cast<std::int64_t>(delays.size()), short_kernels, runtime_outliers,
          delay_outliers, quantile(delays, 0.5), quantile(delays, 0.95)}});
  }
  internal::sort_by_rank(rows);
  internal::sort_by_rank(summaries);
  for (auto& [rank, row] : rows) launch.rows.push_back(std::move(row));
  for (auto& [rank, row] : summaries) summary.rows.push_back(std::move(row));
  return {std::move(summary), std::move(launch)};  // the summary reads first in text
}

// ---------------------------------------------------------------------------------------------
// kernel-dist

Report kernel_duration_distribution(Ranks ranks, const ReportOptions& options) {
  Report report;
  report.name = "kernel_dist";
  report.columns = {"kernel_type", "name",     "rank", "count", "sum (us)", "mean (us)",
                    "stddev",      "min (us)", "25%",  "50%",   "75%",      "max (us)"};
  // The kernels HTA charts are the named rows of its "kernels" table: the top kernels of each
  // type on each rank. Taking them from gpu_kernel_breakdown keeps the choice one definition.
  std::vector<std::pair<std::string, std::string>> shown;  // (kernel_type, name), sorted
  const std::vector<Report> breakdown = gpu_kernel_breakdown(ranks, options);
  for (const Report& table : breakdown) {
    if (table.name != "kernels") continue;
    const auto column = [&](std::string_view name) {
      return static_cast<std::size_t>(std::find(table.columns.begin(), table.columns.end(), name) -
                                      table.columns.begin());
    };
    const std::size_t name_at = column("name"), type_at = column("kernel_type");
    for (const std::vector<ReportCell>& row : table.rows) {
      const std::string& name = std::get<std::string>(row[name_at]);
      if (name != "others") shown.emplace_back(std::get<std::string>(row[type_at]), name);
    }
  }
  std::sort(shown.begin(), shown.end());
  shown.erase(std::unique(shown.begin(), shown.end()), shown.end());

  std::map<std::string, std::size_t, std::less<>> index_of;
  for (std::size_t s = 0; s < shown.size(); ++s) index_of.emplace(shown[s].second, s);

  const bool drop_last = internal::drop_last_step(ranks, options);
  // Per rank, each shown kernel's durations (us), in the order of `shown`.
  std::vector<std::pair<std::int64_t, std::vector<std::vector<double>>>> per_rank;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const ProfilerResult& r = *ranks[i];
    std::vector<std::vector<double>> durations(shown.size());
    for (const std::int32_t k : analyzed_gpu_events(r, drop_last)) {
      const Event& e = r.events()[static_cast<std::size_t>(k)];
      // The name decides the type, so the name alone finds the kernel.
      const auto it = index_of.find(e.name);
      if (it != index_of.end()) durations[it->second].push_back(us(e.duration_ns()));
    }
    per_rank.emplace_back(rank_of(r, options.first_position + static_cast<std::int64_t>(i)),
                          std::move(durations));
  }
  internal::sort_by_rank(per_rank);
  // Kernel by kernel, the ranks side by side: what HTA's per-kernel bar chart compares.
  for (std::size_t s = 0; s < shown.size(); ++s) {
    for (const auto& [rank, durations] : per_rank) {
      const std::vector<double>& v = durations[s];
      if (v.empty()) continue;  // it did not run there
      double sum = 0;
      for (double x : v) sum += x;
      const Describe d = describe(v);
      report.rows.push_back({shown[s].first, shown[s].second, rank,
                             static_cast<std::int64_t>(v.size()), sum, d.mean,
                             v.size() > 1 ? d.std : 0.0, d.min, d.p25, d.p50, d.p75, d.max});
    }
  }
  return report;
}

// ---------------------------------------------------------------------------------------------
// patterns

namespace {

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
  std::vector<std::int64_t> kernel_ns;    // and their summed duration
};

// Events HTA's parser keeps: complete events with a category other than "Trace" (instants,
// allocation reports and flows have no duration there).
bool hta_keeps(const ProfilerResult& r, const Event& e) {
  return e.kind != EventKind::kInstant && e.kind != EventKind::kMemory &&
         e.kind != EventKind::kAsyncRange && r.category(e) != "Trace";
}

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
    if (kept[k] && hta_keeps(r, events[k])) {
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
    if (!kept[k] || !hta_keeps(r, events[k]) || stream_of(r, events[k]) <= 0) continue;
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
  const bool drop_last = internal::drop_last_step(ranks, options);
  std::vector<std::pair<std::int64_t, std::vector<ReportCell>>> rows;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const ProfilerResult& r = *ranks[i];
    const std::vector<Event>& events = r.events();
    const std::int64_t rank = rank_of(r, options.first_position + static_cast<std::int64_t>(i));
    const std::vector<bool> kept = as_mask(analyzed_events(r, drop_last), events.size());
    const CallGraph g = call_graph(r, kept);

    // The roots: operators named like operator_name at the shallowest depth any of them has
    // (so that a match inside a match is not counted twice), with enough kernels. An event HTA
    // keeps outside the call graph (GPU work no call launched) has depth -1 and can be that
    // shallowest, as in HTA. Without a name: every top-level CPU operator.
    std::vector<std::int32_t> candidates;
    std::int32_t min_depth = std::numeric_limits<std::int32_t>::max();
    for (std::size_t k = 0; k < events.size(); ++k) {
      const Event& e = events[k];
      if (!kept[k] || !hta_keeps(r, e)) continue;
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
      std::int64_t kernel_ns = 0;
      std::int64_t cpu_ns = 0;
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
      p.kernel_ns += g.kernel_ns[ru];
      p.cpu_ns += events[ru].duration_ns();
    }
    // Most frequent first, then by pattern (std::map keeps them in that order already).
    std::vector<std::pair<std::string, Pattern>> sorted(patterns.begin(), patterns.end());
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& a, const auto& b) { return a.second.count > b.second.count; });
    for (auto& [pattern, p] : sorted) {
      rows.push_back({rank, {rank, std::move(pattern), p.count, us(p.kernel_ns), us(p.cpu_ns)}});
    }
  }
  internal::sort_by_rank(rows);
  for (auto& [rank, row] : rows) report.rows.push_back(std::move(row));
  return report;
}

}  // namespace opscope
