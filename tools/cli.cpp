#include "cli.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <sstream>
#include <thread>
#include <utility>

#include "ondemand/config.h"
#include "ondemand/daemon.h"

namespace opscope::cli {

namespace fs = std::filesystem;

std::string main_help() {
  return R"(usage: opscope <command> [flags]

On-demand tracing of running processes, compatible with dynolog: a process started with
KINETO_USE_DAEMON=1 registers with the daemon; `opscope trace` asks the daemon to make it
record a trace. `opscope sample` runs a command under a sampling profiler (Linux perf).

commands:
  daemon    serve traced processes (IPC) and trace requests (TCP on 127.0.0.1)
  trace     ask the daemon to trace processes by pid or job id
  sample    run a command under perf; print its top functions, write its collapsed stacks

Run `opscope <command> --help` for the flags of each command.
)";
}

std::string daemon_help() {
  return R"(usage: opscope daemon [--ipc-name NAME] [--port P] [--socket-dir DIR]

Runs the on-demand daemon in the foreground until SIGINT or SIGTERM. Only one daemon (opscope's
or dynolog) can serve a machine's endpoint and port at a time.

  --ipc-name NAME    the IPC endpoint traced processes send to (default: dynolog)
  --port P           TCP port on 127.0.0.1 for trace requests, 0 to 65535; 0 picks a free one
                     and prints it (default: 1778, dynolog's)
  --socket-dir DIR   use socket files in DIR instead of the abstract namespace; traced
                     processes must then have KINETO_IPC_SOCKET_DIR=DIR (default: the value of
                     KINETO_IPC_SOCKET_DIR, else the abstract namespace)
  --help             this text
)";
}

std::string trace_help() {
  return R"(usage: opscope trace (--pid P... | --job-id J)
                    (--duration-ms N | --iterations N [--start-iteration N] [--roundup N])
                    --log-file PATH [flags]

Asks the daemon to trace processes of yours that run with KINETO_USE_DAEMON=1. Each traced
process writes its own file, _<pid> inserted before the extension (for --log-file
/tmp/t.json: /tmp/t_<pid>.json; for /tmp/t.json.gz: /tmp/t_<pid>.json.gz, gzipped).

which processes (one of):
  --pid P            a process id, or the id of an ancestor (a launcher's pid reaches its
                     workers); repeat the flag or give a comma list for several
  --job-id J         every process registered with job id J (0: every process, any job)

how long (one of):
  --duration-ms N    record for N milliseconds (N >= 1)
  --iterations N     record N steps (step() calls), N >= 1
  --start-iteration N  with --iterations: start at step N (N >= 0)
  --roundup N        with --iterations: start at the next step that is a multiple of N (N >= 1)

what:
  --log-file PATH    the trace file name (required; a relative path is made absolute here).
                     The traced process writes only under /tmp, or under the directory its
                     OPSCOPE_ONDEMAND_TRACE_DIR names
  --record-shapes    record input shapes (PROFILE_REPORT_INPUT_SHAPES)
  --profile-memory   record allocations (PROFILE_PROFILE_MEMORY)
  --with-stack       record native stacks (PROFILE_WITH_STACK)
  --with-flops       estimate FLOPs (PROFILE_WITH_FLOPS)
  --with-modules     record module paths (PROFILE_WITH_MODULES)
  --start-time-ms T  start at Unix time T in milliseconds (PROFILE_START_TIME)

daemon and waiting:
  --process-limit N  trigger at most N processes, N >= 1 (default: 1000)
  --port P           the daemon's TCP port on 127.0.0.1, 1 to 65535 (default: 1778)
  --wait             wait for the trace files of the triggered processes and print their paths
  --timeout-s S      with --wait: give up after S seconds, S >= 1 (default: 120)
  --help             this text

Exit code: 0 when processes were triggered (and with --wait, their files appeared), 1 when
none matched, the daemon was unreachable or the wait timed out, 2 for a bad command line.
)";
}

std::string sample_help() {
  return R"(usage: opscope sample [flags] -- command [args...]

Runs a command under a sampling profiler (Linux perf), then prints the functions it spent its
time in and writes every sampled stack in the collapsed format that flamegraph.pl and
speedscope read. The command is started paused and runs only once perf samples, so it is
sampled from its first instruction, all its threads included.

what to sample:
  --freq N           samples per second, 1 to 100000 (default: 999; perf -F)
  --period N         instead of --freq: one sample every N events, N >= 1 (perf -c)
  --event E          the event to sample on, by perf's name (default: cycles). Where hardware
                     counters cannot be opened (many virtual machines) cycles falls back to
                     cpu-clock, and the output says so
  --call-graph M     how stacks are unwound: fp (frame pointers; default) or dwarf (unwind
                     tables: needs no frame pointers, costs more)
  --kernel           include kernel frames (needs perf_event_paranoid <= 1 or CAP_PERFMON)
  --duration S       stop sampling after S seconds (decimals allowed, 0 < S <= 86400); the
                     command keeps running and opscope waits for it

output:
  --top N            print the N functions with the most self samples, 1 to 100000
                     (default: 20)
  --output PATH      where the collapsed stacks go, one "frame;frame;... count" line per stack,
                     gzipped when PATH ends in .gz (default: opscope-sample-<pid>.folded in the
                     current directory, <pid> being the command's process id)

perf:
  --perf PATH        the perf executable (default: $OPSCOPE_PERF, else perf from PATH)
  --timeout S        the longest wait for perf to start sampling, and again for it to stop and
                     hand back its samples, 1 to 86400 seconds (default: 60)
  --help             this text

Ctrl-C at a terminal reaches the command directly; SIGINT and SIGTERM sent to opscope alone
(kill) are passed on to it. Either way opscope waits for the command to end, then still prints
and writes the samples taken until then.

Exit code: the command's own (128+N when signal N ended it), with these exceptions:
  1    perf could not start sampling (the command did not run; the message says why and what
       to do), or the command exited 0 but its samples could not be read or written
  2    a bad command line
  126  the command could not be executed (permission denied, not an executable)
  127  the command was not found
)";
}

namespace {

std::int64_t parse_int(const std::string& flag, const std::string& text, std::int64_t lo,
                       std::int64_t hi, const std::string& allowed) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used, 10);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || v < lo || v > hi) {
    throw UsageError(flag + " expects " + allowed + ", got '" + text + "'");
  }
  return v;
}

// Walks the arguments; "--flag value" and "--flag=value" are both accepted.
class Args {
 public:
  Args(const std::vector<std::string>& args, std::size_t start) : args_(args), i_(start) {}
  bool done() const { return i_ >= args_.size(); }
  // The next flag; its inline value, if any, is kept for value().
  std::string next_flag() {
    std::string a = args_[i_++];
    inline_.reset();
    if (a.rfind("--", 0) != 0) throw UsageError("unexpected argument '" + a + "'");
    if (const auto eq = a.find('='); eq != std::string::npos) {
      inline_ = a.substr(eq + 1);
      a.resize(eq);
    }
    return a;
  }
  std::string value(const std::string& flag) {
    if (inline_) return *std::exchange(inline_, std::nullopt);
    if (i_ >= args_.size()) throw UsageError(flag + " needs a value");
    return args_[i_++];
  }
  void no_value(const std::string& flag) {
    if (inline_) throw UsageError(flag + " takes no value, got '" + *inline_ + "'");
  }

 private:
  const std::vector<std::string>& args_;
  std::size_t i_;
  std::optional<std::string> inline_;
};

constexpr std::int64_t kMaxInt = INT32_MAX;

DaemonArgs parse_daemon(Args& a) {
  DaemonArgs d;
  while (!a.done()) {
    const std::string f = a.next_flag();
    if (f == "--ipc-name") {
      d.ipc_name = a.value(f);
      if (d.ipc_name.empty() || d.ipc_name.size() > 100) {
        throw UsageError("--ipc-name expects a name of 1 to 100 characters");
      }
    } else if (f == "--port") {
      d.port = static_cast<int>(parse_int(f, a.value(f), 0, 65535, "a port from 0 to 65535"));
    } else if (f == "--socket-dir") {
      d.socket_dir = a.value(f);
      if (d.socket_dir.empty()) throw UsageError("--socket-dir expects a directory");
    } else {
      throw UsageError("unknown flag " + f +
                       " for `opscope daemon`; allowed: --ipc-name, --port, --socket-dir, --help");
    }
  }
  return d;
}

TraceArgs parse_trace(Args& a) {
  TraceArgs t;
  bool have_timeout = false;
  while (!a.done()) {
    const std::string f = a.next_flag();
    const auto flag_on = [&](bool& b) {
      a.no_value(f);
      b = true;
    };
    if (f == "--pid") {
      std::stringstream list(a.value(f));
      std::string item;
      while (std::getline(list, item, ',')) {
        t.pids.push_back(static_cast<std::int32_t>(
            parse_int(f, item, 1, kMaxInt, "process ids from 1 to 2147483647")));
      }
    } else if (f == "--job-id") {
      t.job_id = parse_int(f, a.value(f), 0, INT64_MAX, "a job id >= 0");
    } else if (f == "--duration-ms") {
      t.duration_ms = parse_int(f, a.value(f), 1, kMaxInt, "milliseconds >= 1");
    } else if (f == "--iterations") {
      t.iterations = parse_int(f, a.value(f), 1, kMaxInt, "a number of steps >= 1");
    } else if (f == "--start-iteration") {
      t.start_iteration = parse_int(f, a.value(f), 0, kMaxInt, "a step number >= 0");
    } else if (f == "--roundup") {
      t.roundup = parse_int(f, a.value(f), 1, kMaxInt, "a step multiple >= 1");
    } else if (f == "--log-file") {
      t.log_file = a.value(f);
      if (t.log_file.empty()) throw UsageError("--log-file expects a file path");
    } else if (f == "--record-shapes") {
      flag_on(t.record_shapes);
    } else if (f == "--profile-memory") {
      flag_on(t.profile_memory);
    } else if (f == "--with-stack") {
      flag_on(t.with_stack);
    } else if (f == "--with-flops") {
      flag_on(t.with_flops);
    } else if (f == "--with-modules") {
      flag_on(t.with_modules);
    } else if (f == "--start-time-ms") {
      t.start_time_ms = parse_int(f, a.value(f), 0, INT64_MAX, "a Unix time in milliseconds");
    } else if (f == "--process-limit") {
      t.process_limit = parse_int(f, a.value(f), 1, kMaxInt, "a number of processes >= 1");
    } else if (f == "--port") {
      t.port = static_cast<int>(parse_int(f, a.value(f), 1, 65535, "a port from 1 to 65535"));
    } else if (f == "--wait") {
      flag_on(t.wait);
    } else if (f == "--timeout-s") {
      t.timeout_s = parse_int(f, a.value(f), 1, 24 * 3600, "seconds from 1 to 86400");
      have_timeout = true;
    } else {
      throw UsageError("unknown flag " + f + " for `opscope trace`; see `opscope trace --help`");
    }
  }
  if (t.pids.empty() == !t.job_id) {
    throw UsageError("give exactly one of --pid and --job-id");
  }
  if (!t.duration_ms == !t.iterations) {
    throw UsageError("give exactly one of --duration-ms and --iterations");
  }
  if ((t.start_iteration || t.roundup) && !t.iterations) {
    throw UsageError("--start-iteration and --roundup need --iterations");
  }
  if (t.log_file.empty()) throw UsageError("--log-file is required");
  if (have_timeout && !t.wait) throw UsageError("--timeout-s needs --wait");
  t.log_file = fs::absolute(t.log_file).lexically_normal().string();
  return t;
}

// Seconds with an optional fraction ("0.5"), strictly above zero.
double parse_seconds(const std::string& flag, const std::string& text, double hi,
                     const std::string& allowed) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  // !(v > 0) also refuses NaN; "inf", hex floats and exponents are refused as not plain
  // decimals, so what is accepted is what the help says.
  const bool plain = text.find_first_not_of("0123456789.") == std::string::npos;
  if (text.empty() || !plain || used != text.size() || !(v > 0) || v > hi) {
    throw UsageError(flag + " expects " + allowed + ", got '" + text + "'");
  }
  return v;
}

// `flags` are the arguments between "sample" and "--"; `command` is everything after "--".
SampleArgs parse_sample(const std::vector<std::string>& flags, std::vector<std::string> command) {
  SampleArgs s;
  Args a(flags, 0);
  bool have_freq = false;
  bool have_period = false;
  while (!a.done()) {
    std::string f;
    try {
      f = a.next_flag();
    } catch (const UsageError& e) {
      // Most likely the command without the "--" in front of it.
      throw UsageError(std::string(e.what()) +
                       "; put the command to profile after --: opscope sample [flags] -- "
                       "command [args...]");
    }
    if (f == "--freq") {
      s.frequency_hz = static_cast<std::uint32_t>(
          parse_int(f, a.value(f), 1, 100000, "samples per second from 1 to 100000"));
      have_freq = true;
    } else if (f == "--period") {
      s.period = static_cast<std::uint64_t>(
          parse_int(f, a.value(f), 1, INT64_MAX, "a number of events per sample >= 1"));
      have_period = true;
    } else if (f == "--duration") {
      s.duration_s = parse_seconds(f, a.value(f), 86400, "seconds above 0, at most 86400");
    } else if (f == "--event") {
      s.event = a.value(f);
      if (s.event.empty() || s.event.find_first_of(" \t\n") != std::string::npos) {
        throw UsageError(
            "--event expects one perf event name such as cycles or cpu-clock, "
            "got '" +
            s.event + "'");
      }
    } else if (f == "--call-graph") {
      s.call_graph = a.value(f);
      if (s.call_graph != "fp" && s.call_graph != "dwarf") {
        throw UsageError("--call-graph expects fp or dwarf, got '" + s.call_graph + "'");
      }
    } else if (f == "--kernel") {
      a.no_value(f);
      s.include_kernel = true;
    } else if (f == "--top") {
      s.top = parse_int(f, a.value(f), 1, 100000, "a number of functions from 1 to 100000");
    } else if (f == "--output") {
      s.output = a.value(f);
      if (s.output.empty()) throw UsageError("--output expects a file path, got ''");
    } else if (f == "--perf") {
      s.perf = a.value(f);
      if (s.perf.empty()) throw UsageError("--perf expects the perf executable, got ''");
    } else if (f == "--timeout") {
      s.timeout_s = parse_int(f, a.value(f), 1, 24 * 3600, "seconds from 1 to 86400");
    } else {
      throw UsageError("unknown flag " + f + " for `opscope sample`; see `opscope sample --help`");
    }
  }
  if (have_freq && have_period) throw UsageError("give only one of --freq and --period");
  if (command.empty()) {
    throw UsageError("no command to profile; usage: opscope sample [flags] -- command [args...]");
  }
  if (command[0].empty()) throw UsageError("the command to profile is an empty string");
  s.command = std::move(command);
  return s;
}

bool wants_help(const std::vector<std::string>& args, std::size_t start,
                std::size_t end = std::string::npos) {
  for (std::size_t i = start; i < args.size() && i < end; ++i) {
    if (args[i] == "--help" || args[i] == "-h") return true;
  }
  return false;
}

}  // namespace

Command parse(const std::vector<std::string>& args) {
  Command c;
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    c.help = main_help();
    return c;
  }
  Args a(args, 1);
  if (args[0] == "daemon") {
    if (wants_help(args, 1)) {
      c.help = daemon_help();
      return c;
    }
    c.kind = Command::Kind::kDaemon;
    c.daemon = parse_daemon(a);
  } else if (args[0] == "trace") {
    if (wants_help(args, 1)) {
      c.help = trace_help();
      return c;
    }
    c.kind = Command::Kind::kTrace;
    c.trace = parse_trace(a);
  } else if (args[0] == "sample") {
    // Only the flags before "--" are opscope's: `opscope sample -- grep --help` profiles grep.
    const auto dashes = std::find(args.begin() + 1, args.end(), "--");
    const std::size_t end = static_cast<std::size_t>(dashes - args.begin());
    if (wants_help(args, 1, end)) {
      c.help = sample_help();
      return c;
    }
    c.kind = Command::Kind::kSample;
    c.sample =
        parse_sample(std::vector<std::string>(args.begin() + 1, dashes),
                     dashes == args.end() ? std::vector<std::string>{}
                                          : std::vector<std::string>(dashes + 1, args.end()));
  } else {
    throw UsageError("unknown command '" + args[0] +
                     "'; allowed: daemon, trace, sample (see --help)");
  }
  return c;
}

std::string config_text(const TraceArgs& t) {
  std::ostringstream c;
  c << "ACTIVITIES_LOG_FILE=" << t.log_file << "\n";
  if (t.start_time_ms) c << "PROFILE_START_TIME=" << *t.start_time_ms << "\n";
  if (t.duration_ms) c << "ACTIVITIES_DURATION_MSECS=" << *t.duration_ms << "\n";
  if (t.iterations) {
    c << "ACTIVITIES_ITERATIONS=" << *t.iterations << "\n";
    if (t.start_iteration) c << "PROFILE_START_ITERATION=" << *t.start_iteration << "\n";
    if (t.roundup) c << "PROFILE_START_ITERATION_ROUNDUP=" << *t.roundup << "\n";
  }
  if (t.record_shapes) c << "PROFILE_REPORT_INPUT_SHAPES=true\n";
  if (t.profile_memory) c << "PROFILE_PROFILE_MEMORY=true\n";
  if (t.with_stack) c << "PROFILE_WITH_STACK=true\n";
  if (t.with_flops) c << "PROFILE_WITH_FLOPS=true\n";
  if (t.with_modules) c << "PROFILE_WITH_MODULES=true\n";
  std::string s = c.str();
  s.pop_back();  // dynolog's frame adds the line break after the config
  return s;
}

std::string request_json(const TraceArgs& t) {
  ondemand::TraceRequest r;
  r.config = config_text(t);
  r.job_id = t.job_id.value_or(0);
  r.pids = t.pids.empty() ? std::vector<std::int32_t>{0} : t.pids;
  r.process_limit = t.process_limit;
  return ondemand::trace_request_json(r);
}

// The traced process's own rule, so --wait looks for the file it really writes.
std::string trace_file_for(const std::string& log_file, std::int32_t pid) {
  return ondemand::output_path_for(log_file, pid);
}

int run_trace(const TraceArgs& t, std::ostream& out, std::ostream& err) {
  ondemand::TraceResult result;
  try {
    result = ondemand::parse_trace_result(ondemand::tcp_request(t.port, request_json(t)));
  } catch (const std::exception& e) {
    err << "opscope trace: " << e.what() << "\n";
    return kExitFailure;
  }
  out << "matched " << result.matched.size() << " process(es), triggered "
      << result.triggered.size();
  if (result.busy > 0) out << ", " << result.busy << " busy with an earlier request";
  out << "\n";
  if (result.triggered.empty()) {
    for (const std::string& r : result.reasons) err << "opscope trace: " << r << "\n";
    if (result.reasons.empty()) err << "opscope trace: no process was triggered\n";
    return kExitFailure;
  }
  for (const std::int32_t pid : result.triggered) {
    out << "  pid " << pid << " -> " << trace_file_for(t.log_file, pid) << "\n";
  }
  if (!t.wait) return kExitOk;

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(t.timeout_s);
  std::vector<std::int32_t> waiting = result.triggered;
  while (!waiting.empty()) {
    std::erase_if(waiting, [&](std::int32_t pid) {
      const std::string f = trace_file_for(t.log_file, pid);
      std::error_code ec;
      if (!fs::exists(f, ec)) return false;
      out << f << "\n" << std::flush;
      return true;
    });
    if (waiting.empty()) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (const std::int32_t pid : waiting) {
        err << "opscope trace: no trace from pid " << pid << " after " << t.timeout_s << " s ("
            << trace_file_for(t.log_file, pid) << " does not exist)\n";
      }
      err << "opscope trace: a traced process writes only under /tmp unless its "
             "OPSCOPE_ONDEMAND_TRACE_DIR allows another directory, and says on its stderr why "
             "it refused a request\n";
      return kExitFailure;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return kExitOk;
}

int run_daemon(const DaemonArgs& d, std::ostream& out, std::ostream& err) {
  // Block the stop signals before any thread starts, so that only sigwait below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  try {
    ondemand::DaemonOptions options;
    options.ipc_name = d.ipc_name;
    options.port = d.port;
    options.socket_dir = d.socket_dir;
    ondemand::Daemon daemon(options);
    const std::string dir = ondemand::socket_dir_or_env(d.socket_dir);
    out << "opscope daemon: IPC endpoint '" << d.ipc_name << "'"
        << (dir.empty() ? " (abstract namespace)" : " in " + dir)
        << ", trace requests on 127.0.0.1:" << daemon.port() << "\n"
        << std::flush;
    int sig = 0;
    sigwait(&stop_signals, &sig);
    daemon.stop();
  } catch (const std::exception& e) {
    err << "opscope daemon: " << e.what() << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Command c;
  try {
    c = parse(args);
  } catch (const UsageError& e) {
    const bool known =
        !args.empty() && (args[0] == "daemon" || args[0] == "trace" || args[0] == "sample");
    err << "opscope" << (args.empty() ? "" : " " + args[0]) << ": " << e.what() << "\n"
        << "Run `opscope " << (known ? args[0] + " " : "") << "--help` for the flags.\n";
    return kExitUsage;
  }
  switch (c.kind) {
    case Command::Kind::kHelp:
      out << c.help;
      return kExitOk;
    case Command::Kind::kDaemon:
      return run_daemon(c.daemon, out, err);
    case Command::Kind::kTrace:
      return run_trace(c.trace, out, err);
    case Command::Kind::kSample:
      return run_sample(c.sample, out, err);
  }
  return kExitFailure;
}

}  // namespace opscope::cli
