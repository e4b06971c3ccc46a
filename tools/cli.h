// The `opscope` command line: argument parsing, the config text, and the two subcommands.
//
// Kept out of main() so that tests can parse, build configs and run subcommands in-process:
//
//   std::ostringstream out, err;
//   int code = opscope::cli::run({"trace", "--pid", "42", "--duration-ms", "500",
//                                 "--log-file", "/tmp/t.json"}, out, err);
//
// Exit codes: 0 success, 1 failure (daemon unreachable, nothing matched, wait timed out),
// 2 usage error (the message names the flag and what it allows).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "opscope/error.h"

namespace opscope::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// A bad command line; exit code 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

struct DaemonArgs {
  std::string ipc_name = "dynolog";
  int port = 1778;
  std::string socket_dir;
};

struct TraceArgs {
  std::vector<std::int32_t> pids;
  std::optional<std::int64_t> job_id;
  std::optional<std::int64_t> duration_ms;
  std::optional<std::int64_t> iterations;
  std::optional<std::int64_t> start_iteration;
  std::optional<std::int64_t> roundup;
  std::string log_file;  // made absolute: the traced process has its own working directory
  bool record_shapes = false;
  bool profile_memory = false;
  bool with_stack = false;
  bool with_flops = false;
  bool with_modules = false;
  std::optional<std::int64_t> start_time_ms;
  std::int64_t process_limit = 1000;
  int port = 1778;
  bool wait = false;
  std::int64_t timeout_s = 120;
};

struct Command {
  enum class Kind { kHelp, kDaemon, kTrace };
  Kind kind = Kind::kHelp;
  std::string help;  // for kHelp: the text to print
  DaemonArgs daemon;
  TraceArgs trace;
};

// Parses argv without the program name. Throws UsageError.
Command parse(const std::vector<std::string>& args);

std::string main_help();
std::string daemon_help();
std::string trace_help();

// The KEY=VALUE config the traced process receives (DESIGN.md's keys), one per line.
std::string config_text(const TraceArgs& args);
// The dynolog TCP request for `args`.
std::string request_json(const TraceArgs& args);
// Where the process `pid` writes its trace: "_<pid>" before the extension (dynolog's naming).
std::string trace_file_for(const std::string& log_file, std::int32_t pid);

// Runs a trace request; prints to `out`/`err`; returns the exit code.
int run_trace(const TraceArgs& args, std::ostream& out, std::ostream& err);
// Runs the daemon until SIGINT or SIGTERM.
int run_daemon(const DaemonArgs& args, std::ostream& out, std::ostream& err);

// The whole command line: parse, then run; usage errors print to `err` and return 2.
int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace opscope::cli
