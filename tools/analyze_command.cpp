// `opscope analyze`: Holistic-Trace-Analysis-class reports on trace files (read_trace(), the
// reports of opscope/trace_analysis.h), printed as text, JSON or CSV.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "analysis/gpu_work.h"
#include "analysis/table_sort_keys.h"
#include "analyze_diff.h"
#include "cli.h"
#include "cli_args.h"
#include "export/sink.h"
#include "opscope/export.h"
#include "opscope/key_averages.h"
#include "opscope/report_output.h"
#include "opscope/trace_analysis.h"
#include "opscope/trace_reader.h"
#include "trace_inputs.h"

namespace opscope::cli {
namespace {

// The summaries of report_kinds(), each folded under itself.
std::string report_list() {
  constexpr std::size_t kIndent = 33;
  constexpr std::size_t kWidth = 94;
  std::string out;
  for (const ReportKind& k : report_kinds()) {
    std::string line = "                       " + std::string(k.name);
    line.resize(std::max(line.size() + 1, kIndent), ' ');
    const std::string text = std::string(k.summary) + " (HTA " + std::string(k.hta) + ")";
    std::string_view rest = text;
    while (!rest.empty()) {
      std::size_t cut = rest.size();
      if (line.size() + cut > kWidth) {
        cut = rest.rfind(' ', kWidth - line.size());
        if (cut == std::string_view::npos || cut == 0) cut = kWidth - line.size();
      }
      out += line + std::string(rest.substr(0, cut)) + "\n";
      rest.remove_prefix(cut);
      if (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
      line.assign(kIndent, ' ');
    }
  }
  return out;
}

std::string analyze_help() {
  return R"(usage: opscope analyze PATH... [--report NAME[,NAME...]] [--format text|json|csv|html]
                       [--output FILE] [--augment OUT] [--times ns|hta|hta-float]
                       [report settings]

Reads traces written by PyTorch's profiler (Kineto) or by opscope (.json or .json.gz) and
prints reports with the meaning and the column names of Holistic Trace Analysis.

  PATH               a trace file, or a directory: every .json and .json.gz file in it is a
                     rank of one job. The rank is the trace's distributedInfo.rank; a trace
                     without one takes its position among the files (the output says so).
                     A directory's execution traces (Chakra) and raw memory timelines are
                     skipped, a line each; a trace given twice (or copied), or two claiming
                     one rank, is warned of on stderr
  --report NAMES     comma-separated, in the order to print (default: temporal); all: every
                     report below, in this order:
)" + report_list() +
         R"(  --format F         text (default: aligned tables; names over 100 characters shortened
                     in the middle, keeping what tells them apart), json (one object: table
                     name -> list of rows keyed by HTA's column names), csv, html (one
                     self-contained page naming its inputs, command and time, with contents:
                     the tables, long names clipped to three lines and whole on hover, and
                     charts of temporal, idle, kernel types and kernel-dist; open it in any
                     browser, offline); all but text keep every name whole
  --output FILE      write there instead of standard output (replaced whole, or left alone
                     when the command fails; gzip for a name ending in .gz)
  --augment OUT      also write each trace with the counters of HTA's
                     generate_trace_with_counters: "Queue Length" per GPU stream and
                     "Memcpy BW" per kind of copy, after its own events, which stay as they
                     were. With one trace OUT is the file (gzip for a name ending in .gz);
                     with several it is a directory (made when missing) that gets
                     <name>_with_counters.json or .json.gz for each. Without --report, no
                     report is printed. A line on standard error says what was written
  --threads N        threads to read the traces with (default: one per core): a trace
                     to each, and with more threads than traces, a plain trace's pieces
                     parsed on two or a gzip trace inflated beside its reading;
                     1 reads on this thread alone
  --help             this text

Limits, so that a hostile file is refused before it takes memory without bound (each
refusal names its limit):
)" + std::string(kGzipLimitHelp) +
         kEventLimitHelp + R"(
Times:
)" + kTimesHelp +
         R"(
  opscope analyze diff CONTROL TEST compares two traces operator by operator (HTA's
  TraceDiff); see `opscope analyze diff --help`.

Report settings (HTA's defaults):
  --num-kernels N               kernels: the top kernels of each type kept by name (10)
  --duration-ratio R            kernels: the share of a type's time its named kernels
                                cover, 0 to 1 (0.8)
  --consecutive-kernel-delay US idle: the longest gap that is kernel_wait, in us (30)
  --runtime-cutoff US           launch: a runtime call longer than this is an outlier, one
                                at most this long launching a shorter kernel is a short
                                kernel, in us (50)
  --launch-delay-cutoff US      launch: a longer launch delay is an outlier, in us (100)
  --no-memory-events            launch: leave out cudaMemcpyAsync and cudaMemsetAsync
  --operator NAME               patterns: the operators whose kernels make a pattern, by a
                                part of their name (default: every top-level operator)
  --min-pattern-len N           patterns: the fewest kernels a pattern has (3)
  --annotation A                critical-path: the window is the instances of the events
                                named like A (a part of the name; default: the whole trace)
  --instance N[:M]              critical-path: instance N of the annotation, or N to M
                                inclusive, counted from 0 in HTA's order (0)
  --data-load-events A[,B...]   critical-path: parts of the names of data-loading events
  --zero-weight-launch-edges    critical-path: a zero-weight launch edge to every kernel
                                without a launch delay (HTA's
                                CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE=1)
  --sort-by KEY                 ops (text): the order of the rows, largest first, by one of
                                torch's keys: cpu_time, cpu_time_total, self_cpu_time_total,
                                count, cpu_memory_usage, self_cpu_memory_usage, flops,
                                cuda_time, cuda_time_total, self_cuda_time_total,
                                cuda_memory_usage, self_cuda_memory_usage (cpu_time and
                                cuda_time: averages per call) (self_cpu_time_total)
  --row-limit N                 ops (text): the rows shown per rank, then a line saying how
                                many were left out; 0 or -1 shows every row (100, torch's).
                                json, csv and html keep every row, in first-seen order
  --include-last-step           keep the last ProfilerStep#N, which HTA leaves out when a
                                trace holds two or more (it is often cut short). Each trace
                                decides alone, from its own steps, so that a rank's numbers
                                do not depend on the other traces given; stderr names the
                                ranks cut

Exit codes: 0 success, 1 a trace could not be read, 2 usage error.
)";
}

struct AnalyzeArgs {
  std::vector<std::string> paths;
  std::vector<std::string> reports;
  ReportFormat format = ReportFormat::kText;
  std::string output;
  std::string augment;   // --augment: where the traces with counters go; empty: none
  unsigned threads = 0;  // --threads; 0: one per core
  ReportOptions options;
  TraceLimits limits;                           // --max-gzip-ratio, --max-event-size
  TraceTimes times = TraceTimes::kNanoseconds;  // --times, --hta-rounding
  // The text ops table: torch's key_averages().table() defaults, except that the rows are
  // sorted (torch keeps first-seen order without sort_by, which hides the heaviest rows).
  std::string sort_by = "self_cpu_time_total";
  int row_limit = 100;  // 0 or -1: every row
};

double parse_number(const std::string& flag, const std::string& text, double lo, double hi) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || !(v >= lo && v <= hi)) {
    std::ostringstream range;
    range << lo << " to " << hi;
    throw UsageError(flag + " expects a number from " + range.str() + ", got '" + text + "'");
  }
  return v;
}

AnalyzeArgs parse_analyze(const std::vector<std::string>& args) {
  AnalyzeArgs a;
  Args it(args, 1);
  while (!it.done()) {
    if (auto path = it.positional()) {
      a.paths.push_back(std::move(*path));
      continue;
    }
    const std::string arg = it.next_flag();
    const auto take = [&] { return it.value(arg); };
    if (arg == "--report") {
      std::string list = take();
      for (std::size_t at = 0; at <= list.size();) {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        const std::string name = list.substr(at, comma - at);
        const auto kinds = report_kinds();
        if (name == "all") {
          for (const ReportKind& k : kinds) a.reports.emplace_back(k.name);
          at = comma + 1;
          continue;
        }
        if (std::none_of(kinds.begin(), kinds.end(),
                         [&](const ReportKind& k) { return k.name == name; })) {
          std::string allowed;
          std::vector<std::string> names;
          for (const ReportKind& k : kinds) {
            allowed += (allowed.empty() ? "" : ", ") + std::string(k.name);
            names.emplace_back(k.name);
          }
          names.emplace_back("all");
          throw UsageError("--report expects names from: " + allowed + ", or all; got '" + name +
                           "'" + did_you_mean(name, names));
        }
        a.reports.push_back(name);
        at = comma + 1;
      }
    } else if (arg == "--format") {
      a.format = parse_report_format(take());
    } else if (arg == "--output") {
      a.output = take();
      if (a.output.empty()) throw UsageError("--output expects a file name");
    } else if (arg == "--augment") {
      a.augment = take();
      if (a.augment.empty()) throw UsageError("--augment expects a file or directory name");
    } else if (parse_limit_flag(arg, take, a.limits)) {
      continue;
    } else if (arg == "--hta-rounding") {
      it.no_value(arg);
      a.times = parse_times(arg, "");
    } else if (arg == "--times") {
      a.times = parse_times(arg, take());
    } else if (arg == "--threads") {
      a.threads = static_cast<unsigned>(parse_number(arg, take(), 1, 1024));
    } else if (arg == "--num-kernels") {
      a.options.num_kernels = static_cast<std::size_t>(parse_number(arg, take(), 1, 1e9));
    } else if (arg == "--duration-ratio") {
      a.options.duration_ratio = parse_number(arg, take(), 0, 1);
    } else if (arg == "--consecutive-kernel-delay") {
      a.options.consecutive_kernel_delay_us = parse_number(arg, take(), 0, 1e12);
    } else if (arg == "--runtime-cutoff") {
      a.options.runtime_cutoff_us = parse_number(arg, take(), 0, 1e12);
    } else if (arg == "--launch-delay-cutoff") {
      a.options.launch_delay_cutoff_us = parse_number(arg, take(), 0, 1e12);
    } else if (arg == "--no-memory-events") {
      it.no_value(arg);
      a.options.include_memory_events = false;
    } else if (arg == "--operator") {
      a.options.operator_name = take();
    } else if (arg == "--min-pattern-len") {
      a.options.min_pattern_len = static_cast<std::size_t>(parse_number(arg, take(), 1, 1e9));
    } else if (arg == "--annotation") {
      a.options.annotation = take();
    } else if (arg == "--instance") {
      const std::string v = take();
      const std::size_t colon = v.find(':');
      a.options.instance_start =
          static_cast<std::int64_t>(parse_number(arg, v.substr(0, colon), -1e9, 1e9));
      a.options.instance_end =
          colon == std::string::npos
              ? a.options.instance_start
              : static_cast<std::int64_t>(parse_number(arg, v.substr(colon + 1), -1e9, 1e9));
    } else if (arg == "--data-load-events") {
      std::string v = take();
      for (std::size_t at = 0; at <= v.size();) {
        const std::size_t comma = std::min(v.find(',', at), v.size());
        if (comma > at) a.options.data_load_events.push_back(v.substr(at, comma - at));
        at = comma + 1;
      }
    } else if (arg == "--zero-weight-launch-edges") {
      it.no_value(arg);
      a.options.add_zero_weight_launch_edges = true;
    } else if (arg == "--sort-by") {
      a.sort_by = take();
      const auto keys = internal::table_sort_keys();
      if (std::find(keys.begin(), keys.end(), a.sort_by) == keys.end()) {
        std::string allowed;
        for (std::string_view k : keys) allowed += (allowed.empty() ? "" : ", ") + std::string(k);
        throw UsageError("--sort-by expects one of: " + allowed + "; got '" + a.sort_by + "'");
      }
    } else if (arg == "--row-limit") {
      const std::string v = take();
      const double n = parse_number(arg, v, -1, 1e9);
      if (n != std::floor(n)) throw UsageError(arg + " expects a whole number, got '" + v + "'");
      a.row_limit = static_cast<int>(n);
    } else if (arg == "--include-last-step") {
      it.no_value(arg);
      a.options.drop_last_step = 0;
    } else {
      throw UsageError("unknown flag " + arg +
                       " for `opscope analyze`; see `opscope analyze --help`");
    }
  }
  if (a.paths.empty()) throw UsageError("no trace given: name a trace file or a directory");
  if (a.reports.empty() && a.augment.empty()) a.reports.push_back("temporal");
  return a;
}

// Where --augment writes the traces with counters: OUT itself for one trace; for several, OUT
// is a directory and each trace goes there as <its name without .json or .json.gz>
// _with_counters.json, or .json.gz when it was gzip (HTA's names). The directory is made when
// missing, and removed again when the writing fails and leaves it empty. Returns the line that
// says what was written.
std::string write_augmented(const std::vector<std::string>& files,
                            const std::vector<std::shared_ptr<const ProfilerResult>>& ranks,
                            const std::string& out, const ReportOptions& options,
                            const TraceLimits& limits) {
  namespace fs = std::filesystem;
  const auto events = [](std::size_t n) {
    return std::to_string(n) + " counter event" + (n == 1 ? "" : "s");
  };
  if (files.size() == 1) {
    const std::vector<std::size_t> written =
        write_traces_with_counters(ranks, files, std::vector<std::string>{out}, options, limits);
    return "opscope analyze: wrote " + out + ": " + files[0] + " with " + events(written[0]) +
           " (Queue Length, Memcpy BW) after its own events\n";
  }
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec)) {
    throw Error("--augment " + out + ": with " + std::to_string(files.size()) +
                " traces it names the directory to write them to, but it is a file");
  }
  std::vector<std::string> paths;
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::string name = fs::path(files[i]).filename().string();
    const bool gz = name.ends_with(".gz");
    if (gz) name.resize(name.size() - 3);
    if (name.ends_with(".json")) name.resize(name.size() - 5);
    paths.push_back(
        (fs::path(out) / (name + "_with_counters" + (gz ? ".json.gz" : ".json"))).string());
    for (std::size_t j = 0; j < i; ++j) {
      if (paths[j] == paths[i]) {
        throw Error("--augment: " + files[j] + " and " + files[i] + " would both be written to " +
                    paths[i] + "; give traces with distinct names");
      }
    }
  }
  const bool made = fs::create_directory(out, ec);
  if (ec) throw Error("--augment: cannot make directory " + out + ": " + ec.message());
  std::vector<std::size_t> written;
  try {
    written = write_traces_with_counters(ranks, files, paths, options, limits);
  } catch (const Error&) {
    if (made) fs::remove(out, ec);  // only when still empty
    throw;
  }
  std::size_t total = 0;
  for (const std::size_t n : written) total += n;
  return "opscope analyze: wrote " + std::to_string(files.size()) +
         " traces with counters (Queue Length, Memcpy BW) into " + out + ", " + events(total) +
         " in all, from " + fs::path(paths.front()).filename().string() + " to " +
         fs::path(paths.back()).filename().string() + "\n";
}

// One line on stderr naming the ranks whose last profiler step the reports leave out (each
// trace decides alone: two or more distinct ProfilerStep#N names in it), or nothing when none
// is cut or no report cuts (ops reads the whole trace, as key_averages() does).
std::string last_step_note(const AnalyzeArgs& a,
                           const std::vector<std::shared_ptr<const ProfilerResult>>& ranks) {
  if (a.options.drop_last_step == 0) return "";
  // Nothing for ops alone, nor for --augment alone, which prints no report (its counters
  // follow the same cut).
  if (std::all_of(a.reports.begin(), a.reports.end(),
                  [](const std::string& r) { return r == "ops"; })) {
    return "";
  }
  std::string cut;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (profiler_step_names(*ranks[i]).size() < 2) continue;
    cut += (cut.empty() ? "" : ", ") +
           std::to_string(rank_of(*ranks[i], static_cast<std::int64_t>(i)));
  }
  if (cut.empty()) return "";
  return "opscope analyze: the last ProfilerStep#N of each trace holding two or more is left "
         "out, with the GPU work launched in it, as HTA does (rank " +
         cut + "); --include-last-step keeps it\n";
}

// One line per rank without GPU work (no kernel, copy or set), when a report other than ops is
// asked for: their GPU figures are then zeros or NaN, which alone read like a measurement.
std::string no_gpu_note(const AnalyzeArgs& a,
                        const std::vector<std::shared_ptr<const ProfilerResult>>& ranks,
                        const std::vector<std::string>& files) {
  if (std::all_of(a.reports.begin(), a.reports.end(),
                  [](const std::string& r) { return r == "ops"; })) {
    return "";
  }
  std::string out;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const ProfilerResult& r = *ranks[i];
    const bool gpu = std::any_of(r.events().begin(), r.events().end(),
                                 [&](const Event& e) { return internal::stream_of(r, e) >= 0; });
    if (gpu) continue;
    out += "opscope analyze: rank " + std::to_string(rank_of(r, static_cast<std::int64_t>(i))) +
           " (" + files[i] +
           "): no GPU activity in this trace; its GPU reports are zeros or empty\n";
  }
  return out;
}

int run_analyze(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  // Two traces compared (HTA's TraceDiff) rather than reports on one: tools/analyze_diff.cpp.
  if (args.size() > 1 && args[1] == "diff") return run_analyze_diff(args, out, err);
  const AnalyzeArgs a = parse_analyze(args);
  // An interrupted --augment or --output removes its half-written temporaries (sink.h).
  internal::remove_temporaries_on_signal();
  std::vector<std::shared_ptr<const ProfilerResult>> ranks;
  std::string text;
  try {
    std::vector<std::string> skipped;
    const std::vector<std::string> files = trace_files(a.paths, {}, &skipped);
    for (const std::string& line : skipped) err << "opscope analyze: " << line << "\n";
    // The ranks in parallel, one per core by default, each keeping what the reports read, or
    // everything when the traces are written back (--augment).
    TraceReadOptions read_options =
        a.augment.empty() ? what_reports_read(a.reports) : TraceReadOptions{};
    read_options.limits = a.limits;
    read_options.times = a.times;
    err << times_note("opscope analyze", a.times);
    ranks = read_traces(files, a.threads, read_options);
    for (std::size_t i = 0; i < files.size(); ++i) {
      if (ranks[i]->rank() < 0) {
        err << "opscope analyze: " << files[i] << " has no distributedInfo.rank; using rank " << i
            << " (its position)\n";
      }
    }
    {
      // A trace given twice, or two claiming one rank, prints rows that cannot be told apart:
      // said, not refused (a person comparing two runs of one rank may mean it).
      std::vector<std::int64_t> claimed;
      for (const auto& r : ranks) claimed.push_back(r->rank());
      for (const std::string& line : repeated_inputs(files, claimed)) {
        err << "opscope analyze: warning: " << line << "; their rows share one rank\n";
      }
    }
    err << last_step_note(a, ranks);
    err << no_gpu_note(a, ranks, files);
    // Said on standard error, so that standard output stays the reports alone.
    if (!a.augment.empty()) err << write_augmented(files, ranks, a.augment, a.options, a.limits);
    if (a.reports.empty()) return kExitOk;  // --augment alone: nothing to print
    std::vector<Report> reports;
    for (const std::string& name : a.reports) {
      for (Report& r : run_report(name, ranks, a.options)) reports.push_back(std::move(r));
    }
    if (a.format == ReportFormat::kText &&
        std::find(a.reports.begin(), a.reports.end(), "ops") != a.reports.end()) {
      // The operator table reads best as key_averages().table() prints it.
      for (const Report& r : reports) {
        if (r.name != "ops") {
          text += format_reports({&r, 1}, ReportFormat::kText) + "\n";
          continue;
        }
        for (std::size_t i = 0; i < ranks.size(); ++i) {
          const KeyAverages avg = key_averages(*ranks[i]);
          const int limit = a.row_limit <= 0 ? -1 : a.row_limit;
          text += "ops, rank " + std::to_string(rank_of(*ranks[i], static_cast<std::int64_t>(i))) +
                  ", by " + a.sort_by + "\n" +
                  avg.table({.sort_by = a.sort_by, .row_limit = limit});
          const std::vector<const FunctionEventAvg*> order = internal::table_order(avg, a.sort_by);
          if (limit >= 0 && order.size() > static_cast<std::size_t>(limit)) {
            // Said with how many of them hold GPU time, which sorting by CPU time puts last.
            const auto gpu =
                std::count_if(order.begin() + limit, order.end(), [](const FunctionEventAvg* r) {
                  return r->self_cuda_time_total_ns > 0 || r->cuda_time_total_ns > 0;
                });
            text += std::to_string(order.size() - static_cast<std::size_t>(limit)) + " of " +
                    std::to_string(order.size()) + " rows left out";
            if (gpu > 0) {
              text += ", " + std::to_string(gpu) + " of them with GPU time (--sort-by " +
                      "self_cuda_time_total shows those first)";
            }
            text += " (--row-limit " + std::to_string(limit) + "; --row-limit 0 shows all)\n";
          }
          text += "\n";
        }
      }
    } else {
      text = format_reports(reports, a.format, report_page(args, files));
    }
  } catch (const Error& e) {
    err << "opscope analyze: " << e.what() << "\n";
    return kExitFailure;
  }
  try {
    write_output(a.output, text, out, "report");
  } catch (const Error& e) {
    err << "opscope analyze: " << e.what() << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

const Subcommand& analyze_subcommand() {
  static const Subcommand s{"analyze", "report on traces as Holistic Trace Analysis does",
                            analyze_help, nullptr, run_analyze};
  return s;
}

}  // namespace opscope::cli
