// `opscope analyze diff`: two traces compared operator by operator (trace_diff()), printed as
// `opscope analyze` prints its reports.
#include "analyze_diff.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <system_error>
#include <vector>

#include "cli.h"
#include "cli_args.h"
#include "export/sink.h"
#include "opscope/export.h"
#include "opscope/report_output.h"
#include "opscope/trace_analysis.h"
#include "opscope/trace_reader.h"
#include "trace_inputs.h"

namespace opscope::cli {
namespace {

struct DiffArgs {
  std::string control;
  std::string test;
  DiffOptions options;
  ReportFormat format = ReportFormat::kText;
  std::string output;
  TraceLimits limits;                           // --max-gzip-ratio, --max-event-size
  TraceTimes times = TraceTimes::kNanoseconds;  // --times, --hta-rounding
  bool help = false;
};

// "3" or "3,4,5" (HTA takes an int or a list of ints).
std::vector<std::int64_t> parse_int_list(const std::string& flag, const std::string& text) {
  std::vector<std::int64_t> out;
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size()) {
      throw UsageError(flag + " expects an integer or a comma-separated list of them, got '" +
                       text + "'");
    }
    out.push_back(v);
    at = comma + 1;
  }
  return out;
}

DiffArgs parse_diff(const std::vector<std::string>& args) {
  DiffArgs a;
  // A person comparing iteration 4 with 5 compares one step with another (--steps-by-name:
  // HTA's rows, #4 deleted and #5 added).
  a.options.match_steps_by_position = true;
  std::vector<std::string> paths;
  if (wants_help(args, 2)) {
    a.help = true;
    return a;
  }
  Args it(args, 2);
  while (!it.done()) {
    if (auto path = it.positional()) {
      paths.push_back(std::move(*path));
      continue;
    }
    const std::string arg = it.next_flag();
    const auto take = [&] { return it.value(arg); };
    if (arg == "--control-rank") {
      a.options.control_ranks = parse_int_list(arg, take());
    } else if (arg == "--test-rank") {
      a.options.test_ranks = parse_int_list(arg, take());
    } else if (arg == "--control-iteration") {
      a.options.control_iterations = parse_int_list(arg, take());
    } else if (arg == "--test-iteration") {
      a.options.test_iterations = parse_int_list(arg, take());
    } else if (arg == "--device") {
      const std::string d = take();
      if (d == "all") {
        a.options.device = DiffOptions::Device::kAll;
      } else if (d == "cpu") {
        a.options.device = DiffOptions::Device::kCpu;
      } else if (d == "gpu") {
        a.options.device = DiffOptions::Device::kGpu;
      } else {
        throw UsageError("--device expects cpu, gpu or all, got '" + d + "'");
      }
    } else if (arg == "--steps-by-name") {
      it.no_value(arg);
      a.options.match_steps_by_position = false;
    } else if (arg == "--short-names") {
      it.no_value(arg);
      a.options.short_names = true;
    } else if (arg == "--labels") {
      const std::string l = take();
      const std::size_t comma = l.find(',');
      if (comma == std::string::npos || comma == 0 || comma + 1 == l.size() ||
          l.find(',', comma + 1) != std::string::npos) {
        throw UsageError("--labels expects two names, CONTROL,TEST, got '" + l + "'");
      }
      a.options.control_label = l.substr(0, comma);
      a.options.test_label = l.substr(comma + 1);
    } else if (parse_limit_flag(arg, take, a.limits)) {
      continue;
    } else if (arg == "--hta-rounding") {
      it.no_value(arg);
      a.times = parse_times(arg, "");
    } else if (arg == "--times") {
      a.times = parse_times(arg, take());
    } else if (arg == "--format") {
      a.format = parse_report_format(take());
    } else if (arg == "--output") {
      a.output = take();
      if (a.output.empty()) throw UsageError("--output expects a file name");
    } else {
      throw UsageError("unknown flag " + arg +
                       " for `opscope analyze diff`; see `opscope analyze diff --help`");
    }
  }
  if (paths.size() != 2) {
    throw UsageError("expects two traces, CONTROL and TEST (files or directories), got " +
                     std::to_string(paths.size()));
  }
  a.control = paths[0];
  a.test = paths[1];
  return a;
}

// The ranks of one side: a trace file, or the traces of a directory (trace_files()).
std::vector<std::shared_ptr<const ProfilerResult>> read_side(const std::string& path,
                                                             const char* side, std::ostream& err,
                                                             const TraceLimits& limits,
                                                             TraceTimes times) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw Error(std::string("no such ") + side + " trace file or directory: " + path);
  }
  std::vector<std::string> skipped;
  const std::vector<std::string> files = trace_files({path}, {}, &skipped);
  for (const std::string& line : skipped) err << "opscope analyze diff: " << line << "\n";
  TraceReadOptions options;
  options.limits = limits;
  options.times = times;
  std::vector<std::shared_ptr<const ProfilerResult>> ranks = read_traces(files, 0, options);
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (ranks[i]->rank() < 0) {
      err << "opscope analyze diff: " << files[i] << " has no distributedInfo.rank; using rank "
          << i << " (its position)\n";
    }
  }
  return ranks;
}

}  // namespace

std::string analyze_diff_help() {
  return R"(usage: opscope analyze diff CONTROL TEST [--control-rank R] [--test-rank R]
                            [--control-iteration N] [--test-iteration N]
                            [--device cpu|gpu|all] [--short-names] [--labels C,T]
                            [--steps-by-name]
                            [--format text|json|csv|html] [--output FILE]
                            [--times ns|hta|hta-float]

Compares two traces operator by operator and kernel by kernel, as Holistic Trace Analysis's
TraceDiff does: how often each name ran in the iterations compared, for how long in total,
and what changed.

  CONTROL, TEST          a trace file, or a directory whose .json and .json.gz traces are the
                         ranks of one job (a trace without distributedInfo.rank takes its
                         position among the files as its rank)
  --control-rank R       the ranks whose events are summed, R or R,R,... (default: the
  --test-rank R          smallest rank of that side)
  --control-iteration N  the ProfilerStep#N iterations compared, N or N,N,... (default: the
  --test-iteration N     smallest of that side). An event belongs to the step its start lies
                         in; GPU work belongs to the step of the call that launched it
                         The step spans are matched by position: iterations 4 and 5
                         compared give one row, ProfilerStep#4 (Test #5)
  --steps-by-name        match the step spans by name, as HTA does (ProfilerStep#4
                         deleted, ProfilerStep#5 added)
  --device D             cpu (events without a stream), gpu (kernels, copies, sets and
                         waits on streams) or all (default)
  --short-names          group by the name without return type, template and function
                         arguments (HTA's shorten_name)
  --labels C,T           the column prefixes (default: Control,Test)
  --format F             text (default; names over 100 characters shortened in the
                         middle, keeping what tells them apart), json ({"ops_diff": [...],
                         "ops_summary": [...]}), csv, html (one self-contained page with
                         both tables, long names clipped to three lines, whole on hover)
  --output FILE          write there instead of standard output (replaced whole, or left
                         alone when the command fails; gzip for a name ending in .gz)
  --help                 this text
)" + std::string(kGzipLimitHelp) +
         kEventLimitHelp + kTimesHelp + R"(
Tables:
  ops_diff       name, C_counts, C_total_duration, T_counts, T_total_duration, diff_counts,
                 diff_duration, counts_change_categories (+, -, =): one row per name, the
                 control's first; durations in us, test minus control
  ops_summary    category (added, deleted, increased, decreased, unchanged), name

Durations keep the traces' nanoseconds by default (HTA rounds each event inward to whole
microseconds unless HTA_DISABLE_NS_ROUNDING=1: --times hta). Work on GPU stream 0 (ROCm) is compared like any other
(HTA leaves it out), and only the host's ProfilerStep#N spans define iterations.

Exit codes: 0 success, 1 a trace could not be read or lacks the rank or iteration asked
for, 2 usage error.
)";
}

int run_analyze_diff(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const DiffArgs a = parse_diff(args);
  if (a.help) {
    out << analyze_diff_help();
    return kExitOk;
  }
  try {
    err << times_note("opscope analyze diff", a.times);
    const auto control = read_side(a.control, "control", err, a.limits, a.times);
    const auto test = read_side(a.test, "test", err, a.limits, a.times);
    write_output(a.output,
                 format_reports(trace_diff(control, test, a.options), a.format,
                                report_page(args, {a.control, a.test})),
                 out, "report");
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    err << "opscope analyze diff: " << e.what() << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace opscope::cli
