// What the trace-reading subcommands share (trace_inputs.h).
#include "trace_inputs.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <ostream>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "cli.h"
#include "export/sink.h"
#include "import/importer.h"
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

// Whether two files of the same size hold the same bytes, read in pieces so that two large
// traces are compared without holding either.
bool same_bytes(const std::string& a, const std::string& b) {
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  if (!fa || !fb) return false;
  std::vector<char> ba(1 << 16), bb(1 << 16);
  while (fa && fb) {
    fa.read(ba.data(), static_cast<std::streamsize>(ba.size()));
    fb.read(bb.data(), static_cast<std::streamsize>(bb.size()));
    if (fa.gcount() != fb.gcount() ||
        !std::equal(ba.begin(), ba.begin() + fa.gcount(), bb.begin())) {
      return false;
    }
  }
  return fa.eof() && fb.eof();
}

}  // namespace

std::vector<std::string> repeated_inputs(const std::vector<std::string>& files,
                                         const std::vector<std::int64_t>& claimed) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::vector<std::uintmax_t> sizes(files.size(), static_cast<std::uintmax_t>(-1));
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::error_code ec;
    sizes[i] = fs::file_size(files[i], ec);
    if (ec) sizes[i] = static_cast<std::uintmax_t>(-1);
  }
  for (std::size_t j = 0; j < files.size(); ++j) {
    for (std::size_t i = 0; i < j; ++i) {
      std::error_code ec;
      std::string why;
      if (files[i] == files[j] || fs::equivalent(files[i], files[j], ec)) {
        why = "are the same file";
      } else if (sizes[i] == sizes[j] && sizes[i] != static_cast<std::uintmax_t>(-1) &&
                 same_bytes(files[i], files[j])) {
        why = "hold the same bytes (one trace, copied)";
      } else if (j < claimed.size() && claimed[j] >= 0 && claimed[i] == claimed[j]) {
        why = "both claim rank " + std::to_string(claimed[j]) + " (distributedInfo.rank)";
      } else {
        continue;
      }
      std::string line = files[i] + " and " + files[j] + " " + why;
      // One path given three times is said once.
      if (std::find(out.begin(), out.end(), line) == out.end()) out.push_back(std::move(line));
      break;  // one line per repeating file
    }
  }
  return out;
}

std::vector<std::string> trace_files(const std::vector<std::string>& paths,
                                     const std::string& exclude,
                                     std::vector<std::string>* skipped) {
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
      std::sort(in_dir.begin(), in_dir.end());
      std::string strays;
      std::size_t traces = 0;
      for (const std::string& f : in_dir) {
        const std::string kind = import::non_trace_kind(f);
        if (kind.empty()) {
          files.push_back(f);
          ++traces;
          continue;
        }
        const std::string line = "skipped " + f + ": a " + kind + ", not a Chrome trace";
        if (skipped != nullptr) skipped->push_back(line);
        strays += "; " + line;
      }
      if (traces == 0) {
        throw Error("no .json or .json.gz trace in directory " + p + strays);
      }
    } else if (fs::exists(p, ec)) {
      files.push_back(p);
    } else {
      throw Error("no such trace file or directory: " + p);
    }
  }
  return files;
}

bool parse_limit_flag(const std::string& flag, const std::function<std::string()>& value,
                      TraceLimits& limits) {
  if (flag != "--max-gzip-ratio" && flag != "--max-event-size") return false;
  const std::string text = value();
  // Whole numbers only, so that what the refusal printed can be given back as it is.
  std::int64_t v = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0) {
    throw UsageError(flag + " expects a whole number, 0 or more (0: no limit), got '" + text + "'");
  }
  if (flag == "--max-gzip-ratio") {
    limits.max_gzip_ratio = static_cast<double>(v);
  } else {
    limits.max_event_bytes = v;
  }
  return true;
}

const char* const kGzipLimitHelp =
    R"(  --max-gzip-ratio R            a gzip trace's text may inflate to R times the file's
                                size, or to 64 MiB when that is more (100; real traces
                                inflate 5 to 30 times, a gzip bomb up to 1032); 0: no limit
)";
const char* const kEventLimitHelp =
    R"(  --max-event-size BYTES        the most one event's JSON, or the text around the
                                events array, may hold (67108864, 64 MiB); 0: no limit
)";

TraceTimes parse_times(const std::string& flag, const std::string& text) {
  if (flag == "--hta-rounding") return TraceTimes::kHtaRounded;
  if (text == "ns") return TraceTimes::kNanoseconds;
  if (text == "hta") return TraceTimes::kHtaRounded;
  if (text == "hta-float") return TraceTimes::kHtaFloat;
  throw UsageError(flag + " expects ns, hta or hta-float, got '" + text + "'");
}

const char* const kTimesHelp =
    R"(  --times ns|hta|hta-float      how the traces' times are held: ns (default) the
                                nanoseconds as written; hta as Holistic Trace Analysis
                                holds them by default, each event rounded inward to whole
                                microseconds (ts = ceil(ts), end = floor(ts + dur)) when
                                the trace's ts have fractions; hta-float as HTA holds them
                                with HTA_DISABLE_NS_ROUNDING=1 (doubles of microseconds
                                since 1970, 0.25 us steps). A trace with whole ts is the
                                same in all three. The Python API uses HTA's by default
  --hta-rounding                --times hta
)";

std::string times_note(const std::string& command, TraceTimes times) {
  switch (times) {
    case TraceTimes::kNanoseconds:
      return {};
    case TraceTimes::kHtaRounded:
      return command +
             ": times rounded inward to whole microseconds as HTA rounds them "
             "(--times hta); the default keeps the nanoseconds\n";
    case TraceTimes::kHtaFloat:
      return command +
             ": times held as HTA's doubles of microseconds (--times hta-float, "
             "HTA_DISABLE_NS_ROUNDING=1); the default keeps the nanoseconds\n";
  }
  return {};
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

ReportPage report_page(const std::vector<std::string>& args, std::vector<std::string> inputs) {
  ReportPage page;
  page.inputs = std::move(inputs);
  page.command = "opscope";
  for (const std::string& a : args) {
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyz"
                                         "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_-+=.,/:@%") == std::string::npos;
    if (plain) {
      page.command += " " + a;
      continue;
    }
    std::string quoted = "'";
    for (const char c : a) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    page.command += " " + quoted + "'";
  }
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  char when[32];
  if (gmtime_r(&now, &utc) != nullptr &&
      std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc) > 0) {
    page.made_at = when;
  }
  return page;
}

}  // namespace opscope::cli
