#include "export/trace_formats.h"

#include <string>

#include "export/chrome_trace.h"
#include "opscope/error.h"
#include "opscope/export.h"

namespace opscope {
namespace internal {
namespace {

constexpr std::string_view kChromeSuffixes[] = {".json", ".json.gz"};

constexpr TraceFormat kFormats[] = {
    {"chrome", "Chrome trace", kChromeSuffixes, write_chrome_trace},
};

std::string known() {
  std::string out;
  for (const TraceFormat& f : kFormats) {
    out += out.empty() ? "" : "; ";
    out += std::string(f.name) + " (";
    for (std::size_t i = 0; i < f.suffixes.size(); ++i) {
      out += (i ? ", " : "") + std::string(f.suffixes[i]);
    }
    out += ")";
  }
  return out;
}

}  // namespace

std::span<const TraceFormat> trace_formats() { return kFormats; }

const TraceFormat* trace_format_by_suffix(std::string_view path) {
  const TraceFormat* best = nullptr;
  std::size_t best_length = 0;
  for (const TraceFormat& f : kFormats) {
    for (std::string_view suffix : f.suffixes) {
      if (path.ends_with(suffix) && suffix.size() > best_length) {
        best = &f;
        best_length = suffix.size();
      }
    }
  }
  return best;
}

const TraceFormat& trace_format_for(std::string_view path, std::string_view name) {
  if (!name.empty()) {
    for (const TraceFormat& f : kFormats) {
      if (f.name == name) return f;
    }
    throw Error("unknown trace format '" + std::string(name) + "'; formats: " + known());
  }
  if (const TraceFormat* f = trace_format_by_suffix(path)) return *f;
  throw Error("cannot tell the trace format of '" + std::string(path) +
              "' from its name; formats and their suffixes: " + known());
}

}  // namespace internal

void export_trace(const ProfilerResult& result, const std::string& path, std::string_view format) {
  const internal::TraceFormat& f = internal::trace_format_for(path, format);
  std::unique_ptr<internal::Sink> sink = internal::open_file_sink(path, {.what = std::string(f.what)});
  f.write(result, path, *sink);
}

void export_chrome_trace(const ProfilerResult& result, const std::string& path) {
  export_trace(result, path, "chrome");
}

}  // namespace opscope
