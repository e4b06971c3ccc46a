// `opscope analyze`: Holistic-Trace-Analysis-class reports on trace files (read_trace(), the
// reports of opscope/trace_analysis.h), printed as text, JSON or CSV.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "cli.h"
#include "cli_args.h"
#include "export/sink.h"
#include "opscope/export.h"
#include "opscope/key_averages.h"
#include "opscope/trace_analysis.h"

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
  return R"(usage: opscope analyze PATH... [--report NAME[,NAME...]] [--format text|json|csv]
                       [--output FILE] [report settings]

Reads traces written by PyTorch's profiler (Kineto) or by opscope (.json or .json.gz) and
prints reports with the meaning and the column names of Holistic Trace Analysis.

  PATH               a trace file, or a directory: every .json and .json.gz file in it is a
                     rank of one job. The rank is the trace's distributedInfo.rank; a trace
                     without one takes its position among the files (the output says so)
  --report NAMES     comma-separated, in the order to print (default: temporal):
)" + report_list() +
         R"(  --format F         text (default: aligned tables), json (one object: table name -> list
                     of rows keyed by HTA's column names), csv
  --output FILE      write there instead of standard output (replaced whole, or left alone
                     when the command fails; gzip for a name ending in .gz)
  --help             this text

Report settings (HTA's defaults):
  --num-kernels N               kernels: the top kernels of each type kept by name (10)
  --duration-ratio R            kernels: the share of a type's time its named kernels
                                cover, 0 to 1 (0.8)
  --consecutive-kernel-delay US idle: the longest gap that is kernel_wait, in us (30)
  --include-last-step           keep the last ProfilerStep#N, which HTA leaves out when the
                                traces hold two or more (it is often cut short)

Exit codes: 0 success, 1 a trace could not be read, 2 usage error.
)";
}

struct AnalyzeArgs {
  std::vector<std::string> paths;
  std::vector<std::string> reports;
  ReportFormat format = ReportFormat::kText;
  std::string output;
  ReportOptions options;
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
  for (std::size_t i = 1; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg.rfind("--", 0) != 0) {
      a.paths.push_back(arg);
      continue;
    }
    std::string value;
    const auto eq = arg.find('=');
    const bool has_inline = eq != std::string::npos;
    if (has_inline) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
    }
    const auto take = [&]() {
      if (has_inline) return value;
      if (i + 1 >= args.size()) throw UsageError(arg + " needs a value");
      return args[++i];
    };
    if (arg == "--report") {
      std::string list = take();
      for (std::size_t at = 0; at <= list.size();) {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        const std::string name = list.substr(at, comma - at);
        const auto kinds = report_kinds();
        if (std::none_of(kinds.begin(), kinds.end(),
                         [&](const ReportKind& k) { return k.name == name; })) {
          std::string allowed;
          for (const ReportKind& k : kinds)
            allowed += (allowed.empty() ? "" : ", ") + std::string(k.name);
          throw UsageError("--report expects names from: " + allowed + "; got '" + name + "'");
        }
        a.reports.push_back(name);
        at = comma + 1;
      }
    } else if (arg == "--format") {
      const std::string f = take();
      if (f == "text") {
        a.format = ReportFormat::kText;
      } else if (f == "json") {
        a.format = ReportFormat::kJson;
      } else if (f == "csv") {
        a.format = ReportFormat::kCsv;
      } else {
        throw UsageError("--format expects text, json or csv, got '" + f + "'");
      }
    } else if (arg == "--output") {
      a.output = take();
      if (a.output.empty()) throw UsageError("--output expects a file name");
    } else if (arg == "--num-kernels") {
      a.options.num_kernels = static_cast<std::size_t>(parse_number(arg, take(), 1, 1e9));
    } else if (arg == "--duration-ratio") {
      a.options.duration_ratio = parse_number(arg, take(), 0, 1);
    } else if (arg == "--consecutive-kernel-delay") {
      a.options.consecutive_kernel_delay_us = parse_number(arg, take(), 0, 1e12);
    } else if (arg == "--include-last-step") {
      if (has_inline) throw UsageError("--include-last-step takes no value");
      a.options.drop_last_step = 0;
    } else {
      throw UsageError("unknown flag " + arg +
                       " for `opscope analyze`; see `opscope analyze --help`");
    }
  }
  if (a.paths.empty()) throw UsageError("no trace given: name a trace file or a directory");
  if (a.reports.empty()) a.reports.push_back("temporal");
  return a;
}

bool is_trace_name(const std::filesystem::path& p) {
  const std::string n = p.filename().string();
  const auto ends = [&](std::string_view s) {
    return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
  };
  return ends(".json") || ends(".json.gz");
}

// The trace files PATHs name: files as given, directories' traces in name order.
std::vector<std::string> trace_files(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      std::vector<std::string> in_dir;
      for (const auto& entry : std::filesystem::directory_iterator(p, ec)) {
        if (entry.is_regular_file() && is_trace_name(entry.path())) {
          in_dir.push_back(entry.path().string());
        }
      }
      if (ec) throw Error("cannot list " + p + ": " + ec.message());
      if (in_dir.empty()) throw Error("no .json or .json.gz trace in directory " + p);
      std::sort(in_dir.begin(), in_dir.end());
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else if (std::filesystem::exists(p, ec)) {
      files.push_back(p);
    } else {
      throw Error("no such trace file or directory: " + p);
    }
  }
  return files;
}

int run_analyze(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const AnalyzeArgs a = parse_analyze(args);
  std::vector<std::shared_ptr<const ProfilerResult>> ranks;
  std::string text;
  try {
    const std::vector<std::string> files = trace_files(a.paths);
    for (std::size_t i = 0; i < files.size(); ++i) {
      ranks.push_back(read_trace(files[i]));
      if (ranks.back()->rank() < 0) {
        err << "opscope analyze: " << files[i] << " has no distributedInfo.rank; using rank " << i
            << " (its position)\n";
      }
    }
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
          text += "ops, rank " + std::to_string(rank_of(*ranks[i], static_cast<std::int64_t>(i))) +
                  "\n" + key_averages(*ranks[i]).table() + "\n";
        }
      }
    } else {
      text = format_reports(reports, a.format);
    }
  } catch (const Error& e) {
    err << "opscope analyze: " << e.what() << "\n";
    return kExitFailure;
  }
  if (a.output.empty()) {
    out << text;
    return kExitOk;
  }
  try {
    // A temporary name renamed when complete (gzip for a name ending in .gz), as every file
    // opscope writes: a reader never sees half a report, a failure leaves nothing.
    const std::unique_ptr<internal::Sink> sink =
        internal::open_file_sink(a.output, {.what = "report"});
    sink->write(text);
    sink->commit();
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
