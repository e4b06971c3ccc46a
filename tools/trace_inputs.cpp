// What the trace-reading subcommands share (trace_inputs.h).
#include "trace_inputs.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string_view>
#include <system_error>

#include "cli.h"
#include "export/sink.h"
#include "opscope/error.h"

namespace opscope::cli {
namespace {

bool is_trace_name(const std::filesystem::path& p) {
  const std::string n = p.filename().string();
  const auto ends = [&](std::string_view s) {
    return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
  };
  return ends(".json") || ends(".json.gz");
}

}  // namespace

std::vector<std::string> trace_files(const std::vector<std::string>& paths,
                                     const std::string& exclude) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code ec;
  const fs::path excluded = exclude.empty() ? fs::path() : fs::weakly_canonical(exclude, ec);
  for (const std::string& p : paths) {
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> in_dir;
      for (const auto& entry : fs::directory_iterator(p, ec)) {
        if (!entry.is_regular_file() || !is_trace_name(entry.path())) continue;
        std::error_code same_ec;
        if (!excluded.empty() && fs::equivalent(entry.path(), excluded, same_ec)) continue;
        in_dir.push_back(entry.path().string());
      }
      if (ec) throw Error("cannot list " + p + ": " + ec.message());
      if (in_dir.empty()) throw Error("no .json or .json.gz trace in directory " + p);
      std::sort(in_dir.begin(), in_dir.end());
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else if (fs::exists(p, ec)) {
      files.push_back(p);
    } else {
      throw Error("no such trace file or directory: " + p);
    }
  }
  return files;
}

ReportFormat parse_report_format(const std::string& text) {
  if (text == "text") return ReportFormat::kText;
  if (text == "json") return ReportFormat::kJson;
  if (text == "csv") return ReportFormat::kCsv;
  if (text == "html") return ReportFormat::kHtml;
  throw UsageError("--format expects text, json, csv or html, got '" + text + "'");
}

void write_output(const std::string& output, const std::string& text, std::ostream& out,
                  const char* what) {
  if (output.empty()) {
    out << text;
    return;
  }
  const std::unique_ptr<internal::Sink> sink = internal::open_file_sink(output, {.what = what});
  sink->write(text);
  sink->commit();
}

}  // namespace opscope::cli
