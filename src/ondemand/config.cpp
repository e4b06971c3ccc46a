// Parsing of the daemon's config text (see config.h).
#include "ondemand/config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <system_error>

namespace opscope::ondemand {
namespace {

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<bool> parse_bool(std::string_view v) {
  const std::string l = lower(v);
  if (l == "true" || l == "1") return true;
  if (l == "false" || l == "0") return false;
  return std::nullopt;
}

// Keys of a Kineto config that opscope accepts without acting on them: GPU activities,
// event profiling, logging and warm-up settings that a CPU-only profiler has no use for.
constexpr std::string_view kIgnoredKeys[] = {
    "REQUEST_GROUP_TRACE_ID",
    "ACTIVITIES_ENABLED",
    "ACTIVITY_TYPES",
    "ACTIVITIES_WARMUP_PERIOD_SECS",
    "ACTIVITIES_WARMUP_ITERATIONS",
    "ACTIVITIES_MAX_GPU_BUFFER_SIZE_MB",
    "ACTIVITIES_DISPLAY_CUDA_SYNC_WAIT_EVENTS",
    "ACTIVITIES_COMPRESSION_ENABLED",
    "ACTIVITIES_LOG_TO_STDOUT",
    "EVENTS_ENABLED",
    "EVENTS_LOG_FILE",
    "EVENTS",
    "METRICS",
    "SAMPLE_PERIOD_MSECS",
    "MULTIPLEX_PERIOD_MSECS",
    "REPORT_PERIOD_SECS",
    "SAMPLES_PER_REPORT",
    "EVENTS_DURATION_SECS",
    "VERBOSE_LOG_LEVEL",
    "VERBOSE_LOG_MODULES",
    "CUPTI_PROFILER_METRICS",
    "CUPTI_PROFILER_ENABLE_PER_KERNEL",
    "CUPTI_PROFILER_MAX_RANGES",
    "ENABLE_IPC_FABRIC",
    "CLIENT_INTERFACE_ENABLE_OP_INPUTS_COLLECTION",
};

std::string quoted(std::string_view key, std::string_view value) {
  return std::string(key) + "=\"" + std::string(value) + "\"";
}

}  // namespace

std::optional<std::int64_t> parse_non_negative(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0) return std::nullopt;
  if (text.front() == '+' || text.front() == '-') return std::nullopt;
  return v;
}

std::string output_path_for(std::string_view log_file, pid_t pid) {
  std::string suffix(1, '_');
  suffix += std::to_string(pid);
  std::string path(log_file);
  const std::size_t slash = path.rfind('/');
  const std::size_t name_at = slash == std::string::npos ? 0 : slash + 1;
  // ".json.gz" stays whole so the gzip choice (by suffix) and the ".json" survive.
  constexpr std::string_view kGz = ".json.gz";
  if (path.size() >= name_at + kGz.size() + 1 && path.ends_with(kGz)) {
    return path.insert(path.size() - kGz.size(), suffix);
  }
  const std::size_t dot = path.rfind('.');
  if (dot == std::string::npos || dot <= name_at) return path + suffix + ".json";
  return path.insert(dot, suffix);
}

bool check_output_path(std::string_view path, std::string_view allowed_dir, std::string* error) {
  namespace fs = std::filesystem;
  const auto fail = [&](std::string why) {
    if (error) *error = std::move(why);
    return false;
  };
  const fs::path p{std::string(path)};
  if (path.empty() || !p.is_absolute()) {
    return fail("the trace path \"" + std::string(path) +
                "\" is not absolute; give a full path under " + std::string(allowed_dir));
  }
  for (const auto& part : p) {
    if (part == "..") {
      return fail("the trace path \"" + std::string(path) + "\" contains \"..\"");
    }
  }
  const fs::path dir = fs::path(std::string(allowed_dir)).lexically_normal();
  const auto under = [](const fs::path& file, const fs::path& root) {
    const fs::path rel = file.lexically_relative(root);
    return !rel.empty() && *rel.begin() != ".." && *rel.begin() != ".";
  };
  const std::string outside = "the trace path \"" + std::string(path) +
                              "\" is outside the allowed directory " + dir.string() +
                              " (set OPSCOPE_ONDEMAND_TRACE_DIR to allow another)";
  if (!dir.is_absolute() || !under(p.lexically_normal(), dir)) return fail(outside);
  // Symbolic links in existing directories must not lead out of it either.
  std::error_code ec;
  const fs::path real_dir = fs::weakly_canonical(dir, ec);
  const fs::path real_parent = fs::weakly_canonical(p.parent_path(), ec);
  if (!ec && !(real_parent == real_dir || under(real_parent / "x", real_dir))) return fail(outside);
  return true;
}

std::string allowed_trace_dir() {
  const char* env = std::getenv("OPSCOPE_ONDEMAND_TRACE_DIR");
  if (env != nullptr && *env != '\0') return env;
  return std::string(kDefaultTraceDir);
}

std::int64_t first_capture_step(std::int64_t start_iteration, std::int64_t roundup,
                                std::int64_t current) {
  std::int64_t s = std::max(start_iteration, current);
  if (roundup > 1 && s % roundup != 0) s += roundup - s % roundup;
  return s;
}

ParsedConfig parse_capture_config(std::string_view text, pid_t pid, std::string_view allowed_dir) {
  ParsedConfig out;
  CaptureRequest r;
  r.log_file = std::string(kDefaultLogFile);
  std::optional<std::int64_t> duration;
  std::optional<std::int64_t> iterations;
  const auto refuse = [&](std::string why) {
    out.request.reset();
    out.error = "config refused: " + std::move(why);
    return out;
  };

  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view raw = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    const std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#') continue;
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      out.warnings.push_back("on-demand config: ignored a line without '=': \"" +
                             std::string(line) + "\"");
      continue;
    }
    const std::string_view key = trim(line.substr(0, eq));
    const std::string_view value = trim(line.substr(eq + 1));

    const auto number = [&](std::int64_t& into) {
      const auto v = parse_non_negative(value);
      if (!v) return false;
      into = *v;
      return true;
    };
    const auto flag = [&](bool& into) {
      const auto v = parse_bool(value);
      if (!v) return false;
      into = *v;
      return true;
    };
    bool ok = true;
    std::string allowed = "a non-negative integer";
    if (key == "ACTIVITIES_DURATION_MSECS") {
      std::int64_t v = 0;
      ok = number(v) && v > 0;
      allowed = "a positive number of milliseconds";
      if (ok) duration = v;
    } else if (key == "ACTIVITIES_ITERATIONS") {
      std::int64_t v = 0;
      ok = number(v) && v > 0;
      allowed = "a positive number of steps";
      if (ok) iterations = v;
    } else if (key == "PROFILE_START_TIME") {
      ok = number(r.start_time_ms);
      allowed = "wall-clock milliseconds since the Unix epoch, or 0 for now";
    } else if (key == "PROFILE_START_ITERATION") {
      ok = number(r.start_iteration);
    } else if (key == "PROFILE_START_ITERATION_ROUNDUP") {
      ok = number(r.start_iteration_roundup);
    } else if (key == "ACTIVITIES_LOG_FILE") {
      ok = !value.empty();
      allowed = "a file path";
      if (ok) r.log_file = std::string(value);
    } else if (key == "PROFILE_REPORT_INPUT_SHAPES") {
      ok = flag(r.record_shapes);
      allowed = "true, false, 1 or 0";
    } else if (key == "PROFILE_PROFILE_MEMORY") {
      ok = flag(r.profile_memory);
      allowed = "true, false, 1 or 0";
    } else if (key == "PROFILE_WITH_STACK") {
      ok = flag(r.with_stack);
      allowed = "true, false, 1 or 0";
    } else if (key == "PROFILE_WITH_FLOPS") {
      ok = flag(r.with_flops);
      allowed = "true, false, 1 or 0";
    } else if (key == "PROFILE_WITH_MODULES") {
      ok = flag(r.with_modules);
      allowed = "true, false, 1 or 0";
    } else if (key == "REQUEST_TRACE_ID") {
      r.trace_id = std::string(value);
    } else if (std::find(std::begin(kIgnoredKeys), std::end(kIgnoredKeys), key) ==
               std::end(kIgnoredKeys)) {
      out.warnings.push_back("on-demand config: ignored the unknown key " + quoted(key, value));
    }
    if (!ok) return refuse(quoted(key, value) + " is not " + allowed);
  }

  if (duration && iterations) {
    return refuse("ACTIVITIES_DURATION_MSECS=\"" + std::to_string(*duration) +
                  "\" and ACTIVITIES_ITERATIONS=\"" + std::to_string(*iterations) +
                  "\" are both given; a capture is either duration- or iteration-based");
  }
  if (!duration && !iterations) {
    return refuse("neither ACTIVITIES_DURATION_MSECS nor ACTIVITIES_ITERATIONS is given");
  }
  if (duration) {
    r.kind = CaptureKind::kDuration;
    r.duration_ms = *duration;
  } else {
    r.kind = CaptureKind::kIterations;
    r.iterations = *iterations;
  }
  r.output_path = output_path_for(r.log_file, pid);
  std::string why;
  if (!check_output_path(r.output_path, allowed_dir, &why)) {
    return refuse("ACTIVITIES_LOG_FILE=\"" + r.log_file + "\": " + why);
  }
  out.request = std::move(r);
  return out;
}

}  // namespace opscope::ondemand
