// Parsing of the daemon's config text (see config.h).
#include "ondemand/config.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <optional>
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

// What the keys of one config said, before the request is checked as a whole.
struct Seen {
  std::optional<std::int64_t> duration_ms;
  std::optional<std::int64_t> iterations;
  bool flight_dump = false;  // OPSCOPE_FLIGHT_DUMP=true
};

// One config key: how a value is read into a request, and written from one. The client
// (parse_capture_config), the CLI (format_capture_config) and the daemon's tests all go
// through this table, so the two sides cannot spell a key differently.
struct ConfigKey {
  std::string_view key;
  std::string_view allowed;  // what a value must be, for refusals
  // Reads `value`; false when it is not `allowed`.
  bool (*read)(std::string_view value, CaptureRequest& r, Seen& seen);
  // Appends the value when the request has one for this key (nullptr: never written).
  void (*write)(const CaptureRequest& r, std::string& out);
};

constexpr std::string_view kPositiveMs = "a positive number of milliseconds";
constexpr std::string_view kNonNegative = "a non-negative integer";
constexpr std::string_view kBool = "true, false, 1 or 0";

bool read_count(std::string_view v, std::int64_t& into, bool positive) {
  const auto n = parse_non_negative(v);
  if (!n || (positive && *n == 0)) return false;
  into = *n;
  return true;
}
void write_number(std::string& out, std::int64_t v) { out += std::to_string(v); }

// ACTIVITIES_DURATION_MSECS and ACTIVITIES_ITERATIONS: positive, and kept aside until the
// request is checked as a whole (exactly one of them).
template <std::optional<std::int64_t> Seen::*kField>
bool read_seen_count(std::string_view v, CaptureRequest&, Seen& seen) {
  std::int64_t n = 0;
  if (!read_count(v, n, true)) return false;
  seen.*kField = n;
  return true;
}

// A boolean key that sets one field of the request.
template <bool CaptureRequest::*kField>
bool read_flag(std::string_view v, CaptureRequest& r, Seen&) {
  const auto b = parse_bool(v);
  if (!b) return false;
  r.*kField = *b;
  return true;
}

// The lens keys, in Lens order.
constexpr std::string_view kLensKeys[] = {
    "PROFILE_REPORT_INPUT_SHAPES", "PROFILE_PROFILE_MEMORY", "PROFILE_WITH_STACK",
    "PROFILE_WITH_FLOPS",          "PROFILE_WITH_MODULES",
};
static_assert(std::size(kLensKeys) == kLensFields.size());

template <std::size_t I>
bool read_lens(std::string_view v, CaptureRequest& r, Seen&) {
  static_assert(static_cast<std::size_t>(kLensFields[I].lens) == I, "kLensFields is in Lens order");
  const auto b = parse_bool(v);
  if (!b) return false;
  r.lenses.*kLensFields[I].member = *b;
  return true;
}
template <std::size_t I>
void write_lens(const CaptureRequest& r, std::string& out) {
  if (r.lenses.*kLensFields[I].member) out += "true";
}

constexpr ConfigKey kConfigKeys[] = {
    {"ACTIVITIES_LOG_FILE", "a file path",
     [](std::string_view v, CaptureRequest& r, Seen&) {
       if (v.empty()) return false;
       r.log_file = std::string(v);
       return true;
     },
     [](const CaptureRequest& r, std::string& out) { out += r.log_file; }},
    {"PROFILE_START_TIME", "wall-clock milliseconds since the Unix epoch, or 0 for now",
     [](std::string_view v, CaptureRequest& r, Seen&) {
       return read_count(v, r.start_time_ms, false);
     },
     [](const CaptureRequest& r, std::string& out) {
       if (r.kind == CaptureKind::kDuration && r.start_time_ms > 0)
         write_number(out, r.start_time_ms);
     }},
    {"ACTIVITIES_DURATION_MSECS", kPositiveMs, read_seen_count<&Seen::duration_ms>,
     [](const CaptureRequest& r, std::string& out) {
       if (r.kind == CaptureKind::kDuration) write_number(out, r.duration_ms);
     }},
    {"ACTIVITIES_ITERATIONS", "a positive number of steps", read_seen_count<&Seen::iterations>,
     [](const CaptureRequest& r, std::string& out) {
       if (r.kind == CaptureKind::kIterations) write_number(out, r.iterations);
     }},
    {"PROFILE_START_ITERATION", kNonNegative,
     [](std::string_view v, CaptureRequest& r, Seen&) {
       return read_count(v, r.start_iteration, false);
     },
     [](const CaptureRequest& r, std::string& out) {
       if (r.kind == CaptureKind::kIterations && r.start_iteration > 0) {
         write_number(out, r.start_iteration);
       }
     }},
    {"PROFILE_START_ITERATION_ROUNDUP", kNonNegative,
     [](std::string_view v, CaptureRequest& r, Seen&) {
       return read_count(v, r.start_iteration_roundup, false);
     },
     [](const CaptureRequest& r, std::string& out) {
       if (r.kind == CaptureKind::kIterations && r.start_iteration_roundup > 1) {
         write_number(out, r.start_iteration_roundup);
       }
     }},
    {"ACTIVITIES_ENABLED", kBool, read_flag<&CaptureRequest::gpu_activities>,
     [](const CaptureRequest& r, std::string& out) {
       if (!r.gpu_activities) out += "false";
     }},
    {kLensKeys[0], kBool, read_lens<0>, write_lens<0>},
    {kLensKeys[1], kBool, read_lens<1>, write_lens<1>},
    {kLensKeys[2], kBool, read_lens<2>, write_lens<2>},
    {kLensKeys[3], kBool, read_lens<3>, write_lens<3>},
    {kLensKeys[4], kBool, read_lens<4>, write_lens<4>},
    {"PROFILE_MEMORY", kBool, read_flag<&CaptureRequest::memory_profile>,
     [](const CaptureRequest& r, std::string& out) {
       if (r.memory_profile) out += "true";
     }},
    {"PROFILE_MEMORY_DURATION_MSECS", kPositiveMs,
     [](std::string_view v, CaptureRequest& r, Seen&) {
       return read_count(v, r.memory_duration_ms, true);
     },
     [](const CaptureRequest& r, std::string& out) {
       if (r.memory_profile && r.memory_duration_ms > 0) write_number(out, r.memory_duration_ms);
     }},
    // opscope's own key: a dump of the flight recorder instead of a capture (CaptureKind).
    {"OPSCOPE_FLIGHT_DUMP", kBool,
     [](std::string_view v, CaptureRequest&, Seen& seen) {
       const auto b = parse_bool(v);
       if (!b) return false;
       seen.flight_dump = *b;
       return true;
     },
     [](const CaptureRequest& r, std::string& out) {
       if (r.kind == CaptureKind::kFlightDump) out += "true";
     }},
    // Set by the daemon when it delivers a request (dynolog frames it so); never sent.
    {"REQUEST_TRACE_ID", "any text",
     [](std::string_view v, CaptureRequest& r, Seen&) {
       r.trace_id = std::string(v);
       return true;
     },
     nullptr},
};

const ConfigKey* find_key(std::string_view key) {
  for (const ConfigKey& k : kConfigKeys) {
    if (k.key == key) return &k;
  }
  return nullptr;
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
  if (ec)
    return fail("the allowed directory " + dir.string() + " cannot be resolved: " + ec.message());
  const fs::path real_parent = fs::weakly_canonical(p.parent_path(), ec);
  if (ec) {
    return fail("the trace path \"" + std::string(path) + "\" cannot be resolved: " + ec.message());
  }
  if (!(real_parent == real_dir || under(real_parent / "x", real_dir))) return fail(outside);
  return true;
}

bool check_output_directory(std::string_view path, std::string* error) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(std::string(path)).parent_path();
  std::error_code ec;
  const auto status = fs::status(dir, ec);
  std::string why;
  if (!fs::exists(status)) {
    why = "the directory " + dir.string() + " does not exist";
  } else if (!fs::is_directory(status)) {
    why = dir.string() + " is not a directory";
  } else if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    why = "the directory " + dir.string() + " is not writable by this process (" +
          std::strerror(errno) + ")";
  } else {
    return true;
  }
  if (error) *error = std::move(why);
  return false;
}

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

UniqueFd open_output_directory(std::string_view path, std::string_view allowed_dir,
                               std::string* error) {
  namespace fs = std::filesystem;
  const auto fail = [&](std::string why) {
    if (error) *error = std::move(why);
    return UniqueFd();
  };
  const fs::path root = fs::path(std::string(allowed_dir)).lexically_normal();
  const fs::path dir = fs::path(std::string(path)).parent_path().lexically_normal();
  const fs::path rel = dir.lexically_relative(root);
  if (rel.empty() || *rel.begin() == "..") {
    return fail("the trace path \"" + std::string(path) + "\" is outside the allowed directory " +
                root.string());
  }
  // The allowed directory itself is the administrator's choice and may be a link (/tmp often
  // is on some systems); below it, nothing is followed.
  UniqueFd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd)
    return fail("cannot open the allowed directory " + root.string() + ": " + std::strerror(errno));
  fs::path walked = root;
  for (const fs::path& part : rel) {
    if (part == ".") continue;
    walked /= part;
    UniqueFd next(
        ::openat(fd.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) {
      const int err = errno;
      return fail(err == ELOOP || err == ENOTDIR
                      ? walked.string() +
                            " is a symbolic link or not a directory; the trace "
                            "path may not go through links below " +
                            root.string()
                      : "cannot open " + walked.string() + ": " + std::strerror(err));
    }
    fd = std::move(next);
  }
  if (::faccessat(fd.get(), ".", W_OK | X_OK, AT_EACCESS) != 0) {
    return fail("the directory " + dir.string() + " is not writable by this process (" +
                std::strerror(errno) + ")");
  }
  return fd;
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

std::string find_config_value(std::string_view text, std::string_view key) {
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view line = trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    const std::size_t eq = line.find('=');
    if (eq != std::string_view::npos && trim(line.substr(0, eq)) == key) {
      return std::string(trim(line.substr(eq + 1)));
    }
  }
  return {};
}

std::string_view lens_config_key(Lens lens) { return kLensKeys[static_cast<std::size_t>(lens)]; }

std::string format_capture_config(const CaptureRequest& request) {
  std::string out;
  for (const ConfigKey& k : kConfigKeys) {
    if (k.write == nullptr) continue;
    std::string value;
    k.write(request, value);
    if (value.empty()) continue;
    if (!out.empty()) out += '\n';
    out.append(k.key).append("=").append(value);
  }
  return out;
}

std::string memory_timeline_path(std::string_view output_path) {
  std::string p(output_path);
  for (const std::string_view ext : {".json.gz", ".json"}) {
    if (p.size() > ext.size() && p.ends_with(ext)) {
      p.resize(p.size() - ext.size());
      break;
    }
  }
  return p + ".memory.html";
}

ParsedConfig parse_capture_config(std::string_view text, pid_t pid, std::string_view allowed_dir) {
  ParsedConfig out;
  CaptureRequest r;
  r.log_file = std::string(kDefaultLogFile);
  Seen seen;
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
    if (const ConfigKey* k = find_key(key)) {
      if (!k->read(value, r, seen)) {
        return refuse(quoted(key, value) + " is not " + std::string(k->allowed));
      }
    } else if (std::find(std::begin(kIgnoredKeys), std::end(kIgnoredKeys), key) ==
               std::end(kIgnoredKeys)) {
      out.warnings.push_back("on-demand config: ignored the unknown key " + quoted(key, value));
    }
  }

  if (seen.flight_dump) {
    // A dump writes what the recorder holds: nothing here could say how long or what to record.
    for (const auto& [key, given] :
         {std::pair{"ACTIVITIES_DURATION_MSECS", seen.duration_ms.has_value()},
          std::pair{"ACTIVITIES_ITERATIONS", seen.iterations.has_value()},
          std::pair{"PROFILE_MEMORY", r.memory_profile}}) {
      if (given) {
        return refuse(std::string("OPSCOPE_FLIGHT_DUMP=\"true\" asks for a dump of the flight "
                                  "recorder, which records already; ") +
                      key + " asks for a capture: give one or the other");
      }
    }
    for (const LensField& f : kLensFields) {
      if (r.lenses.*f.member) {
        out.warnings.push_back("on-demand config: " + std::string(lens_config_key(f.lens)) +
                               " is ignored by a flight recorder dump: it holds the lenses the "
                               "recorder records");
      }
    }
    r.kind = CaptureKind::kFlightDump;
    r.lenses = {};
  } else {
    if (r.memory_profile) r.lenses.profile_memory = true;
    std::optional<std::int64_t> duration = seen.duration_ms;
    if (r.memory_profile && r.memory_duration_ms > 0 && !seen.iterations) {
      // The capture covers the memory profile's length too.
      duration = std::max(duration.value_or(0), r.memory_duration_ms);
    }
    if (duration && seen.iterations) {
      return refuse("ACTIVITIES_DURATION_MSECS=\"" + std::to_string(*duration) +
                    "\" and ACTIVITIES_ITERATIONS=\"" + std::to_string(*seen.iterations) +
                    "\" are both given; a capture is either duration- or iteration-based");
    }
    if (!duration && !seen.iterations) {
      return refuse(
          "none of ACTIVITIES_DURATION_MSECS, ACTIVITIES_ITERATIONS and OPSCOPE_FLIGHT_DUMP=true "
          "is given");
    }
    if (duration) {
      r.kind = CaptureKind::kDuration;
      r.duration_ms = *duration;
    } else {
      r.kind = CaptureKind::kIterations;
      r.iterations = *seen.iterations;
      if (r.memory_duration_ms > 0) {
        out.warnings.push_back(
            "on-demand config: PROFILE_MEMORY_DURATION_MSECS is ignored by an iteration-based "
            "capture; its steps decide how long memory is recorded");
      }
    }
  }
  r.output_path = output_path_for(r.log_file, pid);
  std::string why;
  if (!check_output_path(r.output_path, allowed_dir, &why) ||
      !check_output_directory(r.output_path, &why)) {
    return refuse("ACTIVITIES_LOG_FILE=\"" + r.log_file + "\": " + why);
  }
  out.request = std::move(r);
  return out;
}

}  // namespace opscope::ondemand
