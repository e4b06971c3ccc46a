// trace_diff(): Holistic Trace Analysis's TraceDiff (hta/trace_diff.py) over results
// (opscope/trace_analysis.h): which operators and kernels two traces ran in the iterations
// compared, how often and for how long.
//
// HTA's steps, and where opscope departs from them (each said at its place below):
//   1. Load each side without aligning or filtering (LabeledTrace only parses): the events of
//      HTA's DataFrame (in_hta_frame, analysis/hta_events.h).
//   2. Give each event an iteration: the ProfilerStep#N whose span holds its start (events
//      without a stream), or its launcher's (GPU work, found by correlation id); else none.
//   3. Keep the events of the chosen ranks and iterations, and of the chosen device.
//   4. Count and sum durations by name (or short name), and join the two sides.
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/gpu_work.h"
#include "analysis/hta_events.h"
#include "opscope/error.h"
#include "opscope/trace_analysis.h"

namespace opscope {
namespace {

using Ranks = std::span<const std::shared_ptr<const ProfilerResult>>;
using internal::correlation_of;
using internal::in_hta_frame;
using internal::stream_of;

// HTA's regex ProfilerStep\s*#\s*(\d+) (re.match: at the start of the name): N, or -1.
std::int64_t step_number(std::string_view name) {
  constexpr std::string_view kPrefix = "ProfilerStep";
  if (!name.starts_with(kPrefix)) return -1;
  std::size_t i = kPrefix.size();
  const auto space = [&] {
    while (i < name.size() && (name[i] == ' ' || name[i] == '\t' || name[i] == '\n' ||
                               name[i] == '\r' || name[i] == '\f' || name[i] == '\v')) {
      ++i;
    }
  };
  space();
  if (i >= name.size() || name[i] != '#') return -1;
  ++i;
  space();
  if (i >= name.size() || name[i] < '0' || name[i] > '9') return -1;
  std::int64_t n = 0;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) {
    if (n > (INT64_MAX - 9) / 10) return -1;  // HTA's int() has no bound; no trace gets here
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

// The iteration of each event of `r` (-1: none; also for the events HTA does not keep).
std::vector<std::int64_t> iterations_of(const ProfilerResult& r) {
  const std::vector<Event>& events = r.events();
  // The spans of the profiler steps on the CPU side. HTA takes every event named
  // ProfilerStep#N, also the GPU's copy of the annotation (a "gpu_user_annotation" on the
  // GPU's timeline, as in ROCm traces), and the one later in the file wins where spans
  // overlap: CPU events late in a step then fall into the previous step whose GPU copy still
  // runs. opscope takes the CPU-side steps only: the steps the host ran.
  struct Step {
    std::int64_t start, end, n;
  };
  std::vector<Step> steps;
  for (const Event& e : events) {
    if (stream_of(r, e) >= 0 || e.kind == EventKind::kGpuAnnotation || !in_hta_frame(r, e))
      continue;
    const std::int64_t n = step_number(e.name);
    if (n >= 0) steps.push_back({e.start_ns, e.end_ns, n});
  }
  // HTA: the last step in file order that holds the start; steps of one thread do not
  // overlap, so by start is the same in practice.
  std::sort(steps.begin(), steps.end(),
            [](const Step& a, const Step& b) { return a.start < b.start; });
  const auto step_at = [&](std::int64_t t) {
    std::int64_t n = -1;
    for (const Step& s : steps) {
      if (s.start > t) break;
      if (t < s.end) n = s.n;
    }
    return n;
  };

  // HTA's GPUKernelFilter: GPU work with a correlation, and the device-wide waits (which have
  // no stream); everything else with a correlation is a launcher (CPUOperatorFilter).
  const auto gpu_side = [&](const Event& e) {
    return (stream_of(r, e) >= 0 && correlation_of(r, e) >= 0) || e.name == "Event Sync" ||
           e.name == "Context Sync";
  };
  std::vector<std::int64_t> iteration(events.size(), -1);
  std::unordered_map<std::int64_t, std::size_t> launcher;  // correlation -> event
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (!in_hta_frame(r, e) || stream_of(r, e) >= 0) continue;
    iteration[i] = step_at(e.start_ns);
    const std::int64_t c = correlation_of(r, e);
    if (c != -1 && !gpu_side(e)) launcher[c] = i;
  }
  // GPU work takes its launcher's iteration. HTA does this for streams above 0 only: work on
  // stream 0 (ROCm's kernels and copies) gets no iteration at all (NaN), so it never appears
  // in a diff. opscope treats every stream alike.
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (!in_hta_frame(r, e) || stream_of(r, e) < 0) continue;
    const std::int64_t c = correlation_of(r, e);
    if (c < 0) continue;
    const auto it = launcher.find(c);
    if (it != launcher.end()) iteration[i] = iteration[it->second];
  }
  return iteration;
}

// One side: its results by rank (a rank is distributedInfo.rank, else the position) and the
// iterations its step names hold.
struct Side {
  std::string label;
  Ranks results;
  std::vector<std::int64_t> ranks;  // of each result
  std::set<std::int64_t> all_ranks;
  std::set<std::int64_t> all_iterations;  // over every rank, as HTA's symbol table is
};

Side side_of(std::string label, Ranks results) {
  Side s{std::move(label), results, {}, {}, {}};
  for (std::size_t i = 0; i < results.size(); ++i) {
    const ProfilerResult& r = *results[i];
    s.ranks.push_back(rank_of(r, static_cast<std::int64_t>(i)));
    s.all_ranks.insert(s.ranks.back());
    for (const Event& e : r.events()) {
      if (!in_hta_frame(r, e)) continue;
      const std::int64_t n = step_number(e.name);
      if (n >= 0) s.all_iterations.insert(n);
    }
  }
  return s;
}

std::string joined(const std::set<std::int64_t>& values) {
  std::string out;
  for (std::int64_t v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out;
}

// HTA's extract_ops: the chosen ranks (default: the smallest) and iterations (default: the
// smallest), validated as HTA does, but with a message that says what there is.
std::vector<std::int64_t> chosen(const std::vector<std::int64_t>& asked,
                                 const std::set<std::int64_t>& have, const Side& side,
                                 const char* what, const char* flag) {
  if (have.empty()) {
    throw Error(side.label + " trace has no " +
                (std::string_view(what) == "rank"
                     ? "ranks: no trace was given"
                     : "ProfilerStep#N event: no iteration to compare"));
  }
  if (asked.empty()) return {*have.begin()};
  for (std::int64_t v : asked) {
    if (have.count(v) == 0) {
      throw Error(side.label + " trace has no " + what + " " + std::to_string(v) + " (" + flag +
                  "); it has " + what + (have.size() > 1 ? "s " : " ") + joined(have));
    }
  }
  return asked;
}

struct Totals {
  std::int64_t counts = 0;
  // Wide (util/wide_sums.h): a name's durations over many events can pass INT64_MAX; the
  // output is a double of microseconds, so the sum is exact to a double's precision.
  internal::WideSum duration_ns = 0;
};

// Counts and total durations by name over the kept events of one side.
// `step_names`: the row a step span of iteration N is counted in, when it is not its own name
// (DiffOptions::match_steps_by_position).
std::map<std::string, Totals> summary(const Side& side, const std::vector<std::int64_t>& ranks,
                                      const std::vector<std::int64_t>& iterations,
                                      const std::map<std::int64_t, std::string>& step_names,
                                      const DiffOptions& options) {
  std::map<std::string, Totals> out;  // sorted by name, as pandas' groupby sorts
  for (std::size_t k = 0; k < side.results.size(); ++k) {
    if (std::find(ranks.begin(), ranks.end(), side.ranks[k]) == ranks.end()) continue;
    const ProfilerResult& r = *side.results[k];
    const std::vector<std::int64_t> iteration = iterations_of(r);
    const std::vector<Event>& events = r.events();
    for (std::size_t i = 0; i < events.size(); ++i) {
      const Event& e = events[i];
      if (iteration[i] < 0 ||
          std::find(iterations.begin(), iterations.end(), iteration[i]) == iterations.end()) {
        continue;
      }
      // HTA's device filter: CPU is stream == -1, GPU the rest.
      const bool gpu = stream_of(r, e) != -1;
      if ((options.device == DiffOptions::Device::kCpu && gpu) ||
          (options.device == DiffOptions::Device::kGpu && !gpu)) {
        continue;
      }
      std::string name = options.short_names ? shorten_name(e.name) : std::string(e.name);
      if (!step_names.empty()) {
        const auto renamed = step_names.find(step_number(e.name));
        if (renamed != step_names.end()) name = renamed->second;
      }
      Totals& t = out[name];
      ++t.counts;
      t.duration_ns += e.duration_ns();
    }
  }
  return out;
}

}  // namespace

std::string shorten_name(std::string_view name) {
  if (internal::is_memory_kernel(name)) return std::string(name);
  if (name.find('<') == std::string_view::npos && name.find('(') == std::string_view::npos) {
    return std::string(name);
  }
  std::string s;
  for (std::size_t i = 0; i < name.size(); ++i) {  // name.replace("->", "")
    if (name[i] == '-' && i + 1 < name.size() && name[i + 1] == '>') {
      ++i;
      continue;
    }
    s += name[i];
  }
  // A closing bracket drops everything back to its opening one, as HTA's stack does (also
  // when there is none: then everything before it goes). Bytes are as good as characters:
  // these ASCII marks never occur inside a UTF-8 sequence.
  std::string stack;
  for (char c : s) {
    if (c == '>' || c == ')') {
      const char open = c == '>' ? '<' : '(';
      while (!stack.empty() && stack.back() != open) stack.pop_back();
      if (!stack.empty()) stack.pop_back();
    } else {
      stack += c;
    }
  }
  const std::size_t space = stack.rfind(' ');
  return space == std::string::npos ? stack : stack.substr(space + 1);
}

std::vector<Report> trace_diff(Ranks control, Ranks test, const DiffOptions& options) {
  std::string test_label = options.test_label;
  // HTA renames the test side when the labels are equal (or the columns would collide), to
  // "<label>_control_test" (it appends both suffixes, a slip); opscope appends "_test".
  if (test_label == options.control_label) test_label += "_test";
  const Side c = side_of(options.control_label, control);
  const Side t = side_of(test_label, test);
  const std::vector<std::int64_t> control_iterations =
      chosen(options.control_iterations, c.all_iterations, c, "iteration", "--control-iteration");
  const std::vector<std::int64_t> test_iterations =
      chosen(options.test_iterations, t.all_iterations, t, "iteration", "--test-iteration");
  // Iterations 4 and 5 compared are one step each: their spans are one row, named after both,
  // and matched in order (the k-th smallest of each side), as the iterations themselves are.
  std::map<std::int64_t, std::string> control_steps;
  std::map<std::int64_t, std::string> test_steps;
  if (options.match_steps_by_position) {
    std::vector<std::int64_t> ci = control_iterations;
    std::vector<std::int64_t> ti = test_iterations;
    std::sort(ci.begin(), ci.end());
    ci.erase(std::unique(ci.begin(), ci.end()), ci.end());
    std::sort(ti.begin(), ti.end());
    ti.erase(std::unique(ti.begin(), ti.end()), ti.end());
    for (std::size_t k = 0; k < ci.size() && k < ti.size(); ++k) {
      if (ci[k] == ti[k]) continue;
      const std::string name = "ProfilerStep#" + std::to_string(ci[k]) + " (" + t.label + " #" +
                               std::to_string(ti[k]) + ")";
      control_steps[ci[k]] = name;
      test_steps[ti[k]] = name;
    }
  }
  const std::map<std::string, Totals> cs =
      summary(c, chosen(options.control_ranks, c.all_ranks, c, "rank", "--control-rank"),
              control_iterations, control_steps, options);
  const std::map<std::string, Totals> ts =
      summary(t, chosen(options.test_ranks, t.all_ranks, t, "rank", "--test-rank"), test_iterations,
              test_steps, options);

  Report diff;
  diff.name = "ops_diff";
  diff.columns = {options.short_names ? "short_name" : "name",
                  c.label + "_counts",
                  c.label + "_total_duration",
                  t.label + "_counts",
                  t.label + "_total_duration",
                  "diff_counts",
                  "diff_duration",
                  "counts_change_categories"};
  // pandas' outer concat: the control's names in order, then the names only the test has.
  std::vector<std::pair<std::string, std::pair<Totals, Totals>>> joined_rows;
  for (const auto& [name, totals] : cs) {
    const auto it = ts.find(name);
    joined_rows.push_back({name, {totals, it == ts.end() ? Totals{} : it->second}});
  }
  for (const auto& [name, totals] : ts) {
    if (cs.count(name) == 0) joined_rows.push_back({name, {Totals{}, totals}});
  }
  Report summary_table;
  summary_table.name = "ops_summary";
  summary_table.columns = {"category", "name"};
  std::vector<std::string> by_category[5];  // added, deleted, increased, decreased, unchanged
  for (const auto& [name, sides] : joined_rows) {
    const auto& [ct, tt] = sides;
    const std::int64_t dc = tt.counts - ct.counts;
    diff.rows.push_back({name, ct.counts, internal::wide_us(ct.duration_ns), tt.counts,
                         internal::wide_us(tt.duration_ns), dc,
                         internal::wide_us(tt.duration_ns - ct.duration_ns),
                         std::string(dc > 0   ? "+"
                                     : dc < 0 ? "-"
                                              : "=")});
    // HTA's ops_diff conditions, one list each; with both sides present no name is in two.
    if (ct.counts == 0 && tt.counts > 0) by_category[0].push_back(name);
    if (ct.counts > 0 && tt.counts == 0) by_category[1].push_back(name);
    if (ct.counts > 0 && dc > 0) by_category[2].push_back(name);
    if (tt.counts > 0 && dc < 0) by_category[3].push_back(name);
    if (tt.counts > 0 && dc == 0) by_category[4].push_back(name);
  }
  static const char* const kCategories[] = {"added", "deleted", "increased", "decreased",
                                            "unchanged"};
  for (int k = 0; k < 5; ++k) {
    for (const std::string& name : by_category[k]) {
      summary_table.rows.push_back({std::string(kCategories[k]), name});
    }
  }
  std::vector<Report> out;
  out.push_back(std::move(diff));
  out.push_back(std::move(summary_table));
  return out;
}

namespace internal {

std::vector<std::int64_t> event_iterations(const ProfilerResult& r) { return iterations_of(r); }

}  // namespace internal
}  // namespace opscope
