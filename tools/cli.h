// The `opscope` command line: argument parsing, the config text, and the subcommands (daemon,
// trace, sample), one file each (tools/<name>_command.cpp); cli.cpp holds the command table.
//
// Kept out of main() so that tests can parse, build configs and run subcommands in-process:
//
//   std::ostringstream out, err;
//   int code = opscope::cli::run({"trace", "--pid", "42", "--duration-ms", "500",
//                                 "--log-file", "/tmp/t.json"}, out, err);
//
// Exit codes: 0 success, 1 failure (daemon unreachable, nothing matched, wait timed out, the
// sampler could not start), 2 usage error (the message names the flag and what it allows).
// `opscope sample` returns the profiled command's own exit code instead (see sample_help()).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ondemand/config.h"
#include "opscope/error.h"
#include "opscope/sampling.h"

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
  // What the processes record: kind, duration or steps, lenses, the log file (made absolute:
  // the traced process has its own working directory). Sent as its config text
  // (ondemand::format_capture_config); output_path and trace_id are not used here.
  ondemand::CaptureRequest capture;
  std::int64_t process_limit = 1000;
  int port = 1778;
  bool wait = false;
  std::int64_t timeout_s = 120;
};

struct SampleArgs {
  std::uint32_t frequency_hz = 999;
  std::uint64_t period = 0;          // non-zero: one sample every `period` events instead
  std::optional<double> duration_s;  // stop sampling after this long; the command goes on
  std::string event = "cycles";
  std::string call_graph = "fp";  // "fp" or "dwarf"
  bool include_kernel = false;
  std::int64_t top = 20;
  std::string output;                // empty: opscope-sample-<command's pid>.folded here
  std::string perf;                  // empty: perf_sampler()'s default ($OPSCOPE_PERF, perf)
  std::int64_t timeout_s = 60;       // for perf to start, and to stop and hand back samples
  std::vector<std::string> command;  // what follows `--`; never empty after parse()
};

struct Subcommand;

struct Command {
  enum class Kind { kHelp, kDaemon, kTrace, kSample, kRunner };
  Kind kind = Kind::kHelp;
  std::string help;  // for kHelp: the text to print
  DaemonArgs daemon;
  TraceArgs trace;
  SampleArgs sample;
  // kRunner: a subcommand that parses and runs in one step, with the whole command line.
  const Subcommand* runner = nullptr;
  std::vector<std::string> args;
};

// One `opscope <name>`: tools/<name>_command.cpp defines `const Subcommand& <name>_subcommand()`
// and the build lists it in the table (cli.cpp). A subcommand either fills a Command (`parse`,
// for those whose arguments the tests inspect) or parses and runs itself (`run`: the whole
// command line, name first; it throws UsageError for a bad one).
struct Subcommand {
  const char* name;
  const char* summary;  // one line for `opscope --help`
  std::string (*help)();
  void (*parse)(const std::vector<std::string>& args, Command& c);
  int (*run)(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
};

// Every `opscope <name>`, in `opscope --help`'s order (the completion and the man page list
// them from here).
std::vector<const Subcommand*> subcommand_table();

// Parses argv without the program name. Throws UsageError; no arguments at all is one (the
// usage is printed and the exit code is 2). `--version` and `--help` are kHelp commands.
Command parse(const std::vector<std::string>& args);

std::string main_help();
// "opscope 0.1.0" and the library it runs with.
std::string version_text();
std::string daemon_help();
std::string trace_help();
std::string sample_help();

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
// Runs args.command under `sampler` (null: perf_sampler(args.perf)), then prints the top
// functions to `out` and writes the collapsed stacks; messages go to `err`. Returns the
// command's exit code, or kExitFailure / 126 / 127 as sample_help() says. Forks: call it from a
// thread that may (the child only reads a pipe and execs before anything else).
int run_sample(const SampleArgs& args, std::ostream& out, std::ostream& err,
               std::shared_ptr<Sampler> sampler = nullptr);

// What `opscope sample --kernel` says before it runs when perf will leave the kernel frames out
// (perf_event_paranoid above 1 and neither root nor CAP_PERFMON); empty when it may record them.
std::string kernel_permission_note(int paranoid, bool privileged);

// `opscope completion SHELL`'s text: a bash or zsh completion script, or ("man") the manual
// page in roff; made from main_help() and every command's help. Throws UsageError otherwise.
std::string completion_text(const std::string& shell);
// A help text escaped for roff's no-fill mode, as the manual page holds it.
std::string roff_text(const std::string& text);

// The whole command line: parse, then run; usage errors print to `err` and return 2.
int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace opscope::cli
