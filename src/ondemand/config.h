// The config text an on-demand daemon sends, parsed into what the traced process should do.
//
// dynolog delivers a Kineto config: KEY=VALUE lines, framed as
// "\n    <config>\n    REQUEST_TRACE_ID=<hash>\n". parse_capture_config() turns it into a
// CaptureRequest or a reason it is refused; it touches no global state (the pid, the allowed
// directory and the current time are arguments), so tests can drive every rule.
//
//   auto parsed = opscope::ondemand::parse_capture_config(text, ::getpid(), allowed_trace_dir());
//   if (!parsed.request) warn(parsed.error);
//   for (const auto& w : parsed.warnings) warn(w);
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "opscope/lenses.h"

namespace opscope::ondemand {

// Kineto's default ACTIVITIES_LOG_FILE.
inline constexpr std::string_view kDefaultLogFile = "/tmp/libkineto_activities.json";
// The directory traces may be written under unless OPSCOPE_ONDEMAND_TRACE_DIR says otherwise.
inline constexpr std::string_view kDefaultTraceDir = "/tmp";

// Values reach logs and tests only; never reuse one.
enum class CaptureKind : std::uint8_t {
  kDuration = 0,    // ACTIVITIES_DURATION_MSECS, from PROFILE_START_TIME (or now)
  kIterations = 1,  // ACTIVITIES_ITERATIONS, counted by ondemand::step()
  // OPSCOPE_FLIGHT_DUMP=true: no capture; the process's flight recorder (opscope/
  // flight_recorder.h) is dumped to the output path at once. A key of opscope's own: dynolog
  // passes the config text through untouched, and Kineto ignores keys it does not know (a
  // Kineto process given such a request records its default on-demand trace instead).
  kFlightDump = 2,
};

struct CaptureRequest {
  CaptureKind kind = CaptureKind::kDuration;
  std::int64_t duration_ms = 0;      // kDuration: > 0
  std::int64_t start_time_ms = 0;    // kDuration: wall-clock ms since the Unix epoch; 0: now
  std::int64_t iterations = 0;       // kIterations: > 0
  std::int64_t start_iteration = 0;  // kIterations: the first step counted (at least this)
  std::int64_t start_iteration_roundup = 0;  // kIterations: start on a multiple of it; 0/1: off
  // ACTIVITIES_ENABLED: whether the capture asks for GPU activity besides the CPU ranges. True
  // when absent, as dynolog's `dyno gputrace` (which never sends the key) asks for Kineto's
  // default activities, GPU ones included; what this process cannot record is listed in the
  // trace ("opscope_not_recorded"). False: CPU ranges only. (Kineto traces an on-demand
  // request whatever this key says; opscope reads it as the way to leave the GPU out.)
  bool gpu_activities = true;
  // The lenses (PROFILE_REPORT_INPUT_SHAPES, PROFILE_PROFILE_MEMORY, PROFILE_WITH_STACK,
  // PROFILE_WITH_FLOPS, PROFILE_WITH_MODULES: lens_config_key()).
  LensSet lenses;
  // PROFILE_MEMORY: a memory profile. Kineto answers it with a snapshot of the CUDA caching
  // allocator; opscope records with profile_memory on and writes the window's memory timeline
  // beside the trace (memory_timeline_path()). PROFILE_MEMORY_DURATION_MSECS is its length:
  // a duration capture lasts the longer of it and ACTIVITIES_DURATION_MSECS, and stands for
  // the duration when ACTIVITIES_DURATION_MSECS is absent.
  bool memory_profile = false;
  std::int64_t memory_duration_ms = 0;
  std::string log_file;     // ACTIVITIES_LOG_FILE as given (kDefaultLogFile when absent)
  std::string output_path;  // where the trace goes: see output_path_for()
  std::string trace_id;     // REQUEST_TRACE_ID, empty when absent
};

struct ParsedConfig {
  std::optional<CaptureRequest> request;  // nullopt: refused, `error` says why
  std::string error;                      // names the key and the value at fault
  std::vector<std::string> warnings;      // unknown keys, lines without '=' (ignored)
};

// Parses one config. Whitespace around lines, keys and values is trimmed; empty lines and
// lines starting with '#' are ignored. Exactly one of ACTIVITIES_DURATION_MSECS,
// ACTIVITIES_ITERATIONS and OPSCOPE_FLIGHT_DUMP=true must be given
// (PROFILE_MEMORY_DURATION_MSECS with PROFILE_MEMORY=true stands for the first); a flight
// recorder dump takes no capture keys (the lenses are the recorder's: lens keys are ignored
// with a warning); numbers must be non-negative decimal integers (durations and the
// iteration count positive); booleans are true/false/1/0 in any case. The output path must lie
// under `allowed_dir` (check_output_path()). Every key is read and written through one table
// (config.cpp), which format_capture_config() uses too.
ParsedConfig parse_capture_config(std::string_view text, pid_t pid, std::string_view allowed_dir);

// The config text of `request`, one KEY=VALUE line per key that says something (no trailing
// line break: dynolog's frame adds it), in the order of the key table: what `opscope trace`
// sends. Parsing it back gives `request` again (output_path and trace_id aside).
std::string format_capture_config(const CaptureRequest& request);

// The value of `key` in a config text ("" when absent): REQUEST_TRACE_ID of a request that is
// refused before it is parsed whole.
std::string find_config_value(std::string_view text, std::string_view key);

// Kineto's config key of a lens ("PROFILE_REPORT_INPUT_SHAPES" for Lens::kRecordShapes).
std::string_view lens_config_key(Lens lens);

// Where a PROFILE_MEMORY capture writes its memory timeline: the trace path with its
// ".json" or ".json.gz" replaced by ".memory.html" ("/tmp/t_42.json" -> "/tmp/t_42.memory.html").
std::string memory_timeline_path(std::string_view output_path);

// dynolog's rule: "_<pid>" goes before the extension of the file name ("/tmp/t.json" ->
// "/tmp/t_42.json", "/tmp/t.json.gz" -> "/tmp/t_42.json.gz"); a name without one gets
// "_<pid>.json".
std::string output_path_for(std::string_view log_file, pid_t pid);

// True when `path` may be written: absolute, no ".." component, and under `allowed_dir`
// (also once symbolic links in its existing directories are resolved). Otherwise false with
// the reason in `error`.
bool check_output_path(std::string_view path, std::string_view allowed_dir, std::string* error);

// True when the directory `path` goes in exists and this process may create files in it;
// otherwise false with the reason in `error`. Checked when a request arrives, so that a
// missing or unwritable directory refuses the request before anything is recorded.
bool check_output_directory(std::string_view path, std::string* error);

// A file descriptor that closes itself.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  ~UniqueFd();
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// The directory `path` goes in, opened (O_DIRECTORY) by walking from `allowed_dir` one
// component at a time without following symbolic links, so that the file created in it later
// (openat, renameat) lands inside `allowed_dir` whatever becomes of the path meanwhile. An
// invalid descriptor when `path` is not below `allowed_dir`, a component is a link, a loop, or
// missing, or the directory is not writable; `error` says which.
UniqueFd open_output_directory(std::string_view path, std::string_view allowed_dir,
                               std::string* error);

// OPSCOPE_ONDEMAND_TRACE_DIR when set and not empty, else kDefaultTraceDir.
std::string allowed_trace_dir();

// The step an iteration capture starts at when requested at step `current`: the first step
// >= max(start_iteration, current) that is a multiple of `roundup` (when roundup > 1).
std::int64_t first_capture_step(std::int64_t start_iteration, std::int64_t roundup,
                                std::int64_t current);

// A non-negative decimal integer that fits int64, or nullopt ("", "-1", "12x", "1e3").
std::optional<std::int64_t> parse_non_negative(std::string_view text);

}  // namespace opscope::ondemand
