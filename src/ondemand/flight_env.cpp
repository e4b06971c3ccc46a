// The flight recorder's opt-in by environment (flight_env.h).
#include "ondemand/flight_env.h"

#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "opscope/error.h"

namespace opscope::ondemand {
namespace {

constexpr std::uint64_t kMaxFlightMiB = 1ull << 20;  // 1 TiB: far above any ring worth keeping

const char* flight_env_value(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

std::string flight_ignored(const char* name, std::string_view value, std::string_view allowed) {
  return std::string("flight recorder: flight_ignored ") + name + "=\"" + std::string(value) +
         "\": " + std::string(allowed) + "; no flight recorder records";
}

// "30", "2.5": a finite number of seconds above 0, nothing else around it.
std::optional<double> parse_flight_seconds(std::string_view s) {
  if (s.empty() || !(std::isdigit(static_cast<unsigned char>(s.front())) || s.front() == '.')) {
    return std::nullopt;  // no sign, no "inf" or "nan"
  }
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || !(v > 0)) {
    return std::nullopt;
  }
  return v;
}

std::optional<std::uint64_t> parse_flight_mib(std::string_view s) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s.front()))) return std::nullopt;
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 1 || v > kMaxFlightMiB)
    return std::nullopt;
  return v;
}

std::optional<bool> parse_flight_switch(std::string_view s) {
  std::string l(s);
  for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (l == "true" || l == "1") return true;
  if (l == "false" || l == "0") return false;
  return std::nullopt;
}

}  // namespace

FlightEnv flight_options_from_env() {
  FlightEnv out;
  const char* spec = flight_env_value("OPSCOPE_FLIGHT_RECORDER");
  if (spec == nullptr) return out;
  FlightRecorderOptions o;
  bool ok = true;

  const std::string_view text(spec);
  const std::size_t comma = text.find(',');
  const auto seconds = parse_flight_seconds(text.substr(0, comma));
  const auto mib = comma == std::string_view::npos ? std::optional<std::uint64_t>(o.max_bytes >> 20)
                                                   : parse_flight_mib(text.substr(comma + 1));
  if (!seconds || !mib) {
    out.warnings.push_back(flight_ignored(
        "OPSCOPE_FLIGHT_RECORDER", text,
        "the form is seconds[,MiB]: seconds a number above 0, then optionally a comma and the "
        "ring's size in MiB, an integer from 1 to " +
            std::to_string(kMaxFlightMiB) + " (default " + std::to_string(o.max_bytes >> 20) +
            "); e.g. \"30\" or \"120,256\""));
    ok = false;
  } else {
    o.keep_seconds = *seconds;
    o.max_bytes = *mib << 20;
  }

  // Made absolute now: a program that changes its directory later still dumps where it was
  // started, and the crash file is opened there at once.
  const char* dir = flight_env_value("OPSCOPE_FLIGHT_DIR");
  std::error_code ec;
  const std::filesystem::path where = std::filesystem::absolute(dir != nullptr ? dir : ".", ec);
  if (ec || !std::filesystem::is_directory(where, ec) ||
      ::access(where.c_str(), W_OK | X_OK) != 0) {
    if (dir != nullptr) {
      out.warnings.push_back(
          flight_ignored("OPSCOPE_FLIGHT_DIR", dir, "not a directory this process can write in"));
    } else {
      out.warnings.push_back(
          "flight recorder: the current directory " + where.string() +
          " is not writable, and dumps go there; set OPSCOPE_FLIGHT_DIR to a directory this "
          "process can write in; no flight recorder records");
    }
    ok = false;
  } else {
    o.dump_dir = where.lexically_normal().string();
    // "/a/." normalizes to "/a/": the dump paths join a '/' of their own.
    if (o.dump_dir.size() > 1 && o.dump_dir.back() == '/') o.dump_dir.pop_back();
  }

  // On by default: the environment opt-in is for a job one cannot change or rerun under a
  // debugger, and a crash is the one trigger nobody can pull after the fact.
  o.dump_on_crash = true;
  if (const char* crash = flight_env_value("OPSCOPE_FLIGHT_ON_CRASH")) {
    const auto b = parse_flight_switch(crash);
    if (!b) {
      out.warnings.push_back(flight_ignored("OPSCOPE_FLIGHT_ON_CRASH", crash,
                                            "allowed are true, false, 1 or 0 (default true)"));
      ok = false;
    } else {
      o.dump_on_crash = *b;
    }
  }
  if (ok) out.options = std::move(o);
  return out;
}

void start_flight_recorder_from_env() noexcept {
  try {
    FlightEnv e = flight_options_from_env();
    for (const std::string& w : e.warnings) warn(w);
    if (!e.options) return;
    // Never deleted: the recorder lives until the process ends.
    static FlightRecorder* recorder = new FlightRecorder(*e.options);
    (void)recorder;
    char figures[96];
    std::snprintf(figures, sizeof figures, "the last %g s in %llu MiB", e.options->keep_seconds,
                  static_cast<unsigned long long>(e.options->max_bytes >> 20));
    inform(std::string("flight recorder: recording ") + figures +
           " (OPSCOPE_FLIGHT_RECORDER); dumps go to " + e.options->dump_dir +
           (e.options->dump_on_crash ? ", a crash's too" : ""));
  } catch (const std::exception& ex) {
    warn(std::string("flight recorder: OPSCOPE_FLIGHT_RECORDER did not start one: ") + ex.what());
  } catch (...) {
  }
}

}  // namespace opscope::ondemand
