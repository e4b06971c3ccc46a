// `opscope trace`: asks the daemon (opscope's or dynolog) to make running processes record a
// trace, and with --wait follows the request until the files appear.
//
// The config text is written by ondemand::format_capture_config(), from the same key table the
// traced process parses it with (src/ondemand/config.cpp), and the lens flags come from
// opscope::kLensFields, so the CLI, the client and the daemon share one vocabulary.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli.h"
#include "cli_args.h"
#include "daemon/requests.h"
#include "daemon/tcp_client.h"
#include "ondemand/config.h"

namespace opscope::cli {

namespace fs = std::filesystem;

namespace {

// "--record-shapes" for record_shapes.
std::string lens_flag(const LensField& f) {
  std::string flag = "--" + std::string(f.name);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

// dyno's spellings that differ from ours, accepted so that a dyno command line works here.
const std::map<std::string, std::string, std::less<>> kDynoAliases = {
    {"--with-stacks", "--with-stack"},
    {"--pids", "--pid"},
    {"--profile-start-time", "--start-time-ms"},
    {"--profile-start-iteration-roundup", "--roundup"},
};

}  // namespace

std::string trace_help() {
  std::ostringstream lenses;
  for (const LensField& f : kLensFields) {
    std::string flag = lens_flag(f);
    flag.resize(std::max<std::size_t>(flag.size() + 1, 19), ' ');
    lenses << "  " << flag << f.what << " (" << ondemand::lens_config_key(f.lens) << ")\n";
  }
  return R"(usage: opscope trace (--pid P... | --job-id J)
                    (--duration-ms N | --iterations N [--start-iteration N] [--roundup N]
                     | --dump)
                    --log-file PATH [flags]

Asks the daemon (`opscope daemon`, or dynolog) to trace processes of yours that run with
KINETO_USE_DAEMON=1. Each traced process writes its own file, _<pid> inserted before the
extension (for --log-file /tmp/t.json: /tmp/t_<pid>.json; for /tmp/t.json.gz:
/tmp/t_<pid>.json.gz, gzipped).

which processes (one of):
  --pid P            a process id, or the id of an ancestor (a launcher's pid reaches its
                     workers); repeat the flag or give a comma list for several
  --job-id J         every process registered with job id J (SLURM_JOB_ID, 0 without one).
                     opscope's daemon takes 0 as any job; dynolog as processes without a job

how long (one of):
  --duration-ms N    record for N milliseconds (N >= 1)
  --start-time-ms T  with --duration-ms: start at Unix time T in milliseconds
                     (PROFILE_START_TIME), for a synchronized start across processes
  --iterations N     record N steps (step() calls), N >= 1
  --start-iteration N  with --iterations: start at step N (N >= 0)
  --roundup N        with --iterations: start at the next step that is a multiple of N (N >= 1)
  --dump             record nothing: each process writes what its flight recorder holds
                     now (the last seconds of ranges, the open ones marked open) to the
                     log file, as if it called opscope::dump_flight_recorder. The process
                     must run one (OPSCOPE_FLIGHT_RECORDER=seconds[,MiB], or a
                     FlightRecorder of its own), or it refuses the request. Sent as the
                     config key OPSCOPE_FLIGHT_DUMP=true, which dynolog passes through;
                     a Kineto process ignores the key and records its default trace

what:
  --log-file PATH    the trace file name (required; a relative path is made absolute here).
                     Its directory must exist and be writable. The traced process writes only
                     under /tmp, or under the directory its OPSCOPE_ONDEMAND_TRACE_DIR names
)" + lenses.str() +
         R"(                     With --duration-ms, --profile-memory also asks for a memory profile
                     (PROFILE_MEMORY, as dyno does): the process writes its memory
                     timeline beside the trace, <file>.memory.html. The lens flags do not
                     go with --dump: a dump holds the lenses its flight recorder records

daemon and waiting:
  --process-limit N  trigger at most N processes, N >= 1 (default: 1000)
  --port P           the daemon's TCP port on 127.0.0.1, 1 to 65535 (default: 1778)
  --wait             wait for the trace files of the triggered processes and print their
                     paths; with opscope's daemon, a process that refuses the request or
                     fails is reported as soon as it says so
  --timeout-s S      with --wait: give up after S seconds, S >= 1 (default: 120)
  --help             this text

dyno's spellings --pids, --with-stacks, --profile-start-time and
--profile-start-iteration-roundup are accepted too.

Exit code: 0 when processes were triggered (and with --wait, their files appeared), 1 when
none matched, the daemon was unreachable, a process refused or the wait timed out, 2 for a
bad command line.
)";
}

TraceArgs parse_trace(Args& a) {
  TraceArgs t;
  ondemand::CaptureRequest& c = t.capture;
  bool have_timeout = false;
  bool have_duration = false;
  bool have_iterations = false;
  bool have_start_time = false;
  bool have_start_iteration = false;
  bool have_roundup = false;
  bool have_dump = false;
  bool have_lens = false;
  while (!a.done()) {
    std::string f = a.next_flag();
    if (const auto alias = kDynoAliases.find(f); alias != kDynoAliases.end()) f = alias->second;
    const auto lens = std::find_if(kLensFields.begin(), kLensFields.end(),
                                   [&](const LensField& l) { return lens_flag(l) == f; });
    if (lens != kLensFields.end()) {
      a.no_value(f);
      c.lenses.*lens->member = true;
      have_lens = true;
    } else if (f == "--pid") {
      std::stringstream list(a.value(f));
      std::string item;
      while (std::getline(list, item, ',')) {
        t.pids.push_back(static_cast<std::int32_t>(
            parse_int(f, item, 1, kMaxInt, "process ids from 1 to 2147483647")));
      }
    } else if (f == "--job-id") {
      t.job_id = parse_int(f, a.value(f), 0, INT64_MAX, "a job id >= 0");
    } else if (f == "--duration-ms") {
      c.duration_ms = parse_int(f, a.value(f), 1, kMaxInt, "milliseconds >= 1");
      have_duration = true;
    } else if (f == "--iterations") {
      c.iterations = parse_int(f, a.value(f), 1, kMaxInt, "a number of steps >= 1");
      have_iterations = true;
    } else if (f == "--start-iteration") {
      c.start_iteration = parse_int(f, a.value(f), 0, kMaxInt, "a step number >= 0");
      have_start_iteration = true;
    } else if (f == "--roundup") {
      c.start_iteration_roundup = parse_int(f, a.value(f), 1, kMaxInt, "a step multiple >= 1");
      have_roundup = true;
    } else if (f == "--log-file") {
      c.log_file = a.value(f);
      if (c.log_file.empty()) throw UsageError("--log-file expects a file path");
    } else if (f == "--start-time-ms") {
      c.start_time_ms = parse_int(f, a.value(f), 0, INT64_MAX, "a Unix time in milliseconds");
      have_start_time = true;
    } else if (f == "--process-limit") {
      t.process_limit = parse_int(f, a.value(f), 1, kMaxInt, "a number of processes >= 1");
    } else if (f == "--port") {
      t.port = static_cast<int>(parse_int(f, a.value(f), 1, 65535, "a port from 1 to 65535"));
    } else if (f == "--dump") {
      a.no_value(f);
      have_dump = true;
    } else if (f == "--wait") {
      a.no_value(f);
      t.wait = true;
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
  if (static_cast<int>(have_duration) + static_cast<int>(have_iterations) +
          static_cast<int>(have_dump) !=
      1) {
    throw UsageError("give exactly one of --duration-ms, --iterations and --dump");
  }
  if (have_dump && have_lens) {
    throw UsageError(
        "the lens flags do not go with --dump: a dump holds the lenses its flight recorder "
        "records");
  }
  if ((have_start_iteration || have_roundup) && !have_iterations) {
    throw UsageError("--start-iteration and --roundup need --iterations");
  }
  if (have_start_time && !have_duration) {
    throw UsageError("--start-time-ms needs --duration-ms (an iteration capture starts at a step)");
  }
  if (c.log_file.empty()) throw UsageError("--log-file is required");
  if (have_timeout && !t.wait) throw UsageError("--timeout-s needs --wait");
  c.kind = have_dump       ? ondemand::CaptureKind::kFlightDump
           : have_duration ? ondemand::CaptureKind::kDuration
                           : ondemand::CaptureKind::kIterations;
  // dyno's --profile-memory asks for both the lens and a memory profile of the same length.
  if (c.lenses.profile_memory && have_duration) {
    c.memory_profile = true;
    c.memory_duration_ms = c.duration_ms;
  }
  c.log_file = fs::absolute(c.log_file).lexically_normal().string();
  return t;
}

std::string config_text(const TraceArgs& t) { return ondemand::format_capture_config(t.capture); }

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

namespace {

// What --wait knows of one triggered process.
struct Waiting {
  std::int32_t pid;
  std::string file;
  ondemand::TraceStatus status;  // from getTraceStatus (opscope's daemon only)
};

// The reason a process that did not write its file gives, in words: what the daemon saw.
std::string what_is_known(const Waiting& w, bool daemon_reports) {
  if (!daemon_reports) {
    return "the daemon (dynolog) does not tell whether the process fetched the request; the "
           "process says on its stderr why it refused one (\"on-demand: ...\")";
  }
  const ondemand::TraceStatus& s = w.status;
  if (!s.known) return "the process stopped polling the daemon and was forgotten (did it exit?)";
  if (!s.delivered) {
    return "the process has not fetched the request: it has not polled the daemon since (is "
           "it stopped, or polling another daemon or socket directory?)";
  }
  if (s.state.empty()) {
    return "the process fetched the request and has reported nothing since (a client older "
           "than this opscope?)";
  }
  if (s.state == "accepted") {
    return "the process accepted the request and has not started recording: an iteration "
           "capture waits for step() calls, a timed one for its start time";
  }
  if (s.state == "recording") return "the process is still recording";
  return s.state + ": " + s.detail;
}

}  // namespace

int run_trace(const TraceArgs& t, std::ostream& out, std::ostream& err) {
  const std::string& log_file = t.capture.log_file;
  // The directory is checked here, before any process records for nothing: the traced
  // processes run as the same user (the daemon's rule), so what this process may write they may.
  std::string why;
  if (!ondemand::check_output_directory(log_file, &why)) {
    err << "opscope trace: --log-file " << log_file << ": " << why << "\n";
    return kExitFailure;
  }
  const std::string allowed = ondemand::allowed_trace_dir();
  if (!ondemand::check_output_path(trace_file_for(log_file, 1), allowed, &why)) {
    err << "opscope trace: note: " << log_file << " is outside " << allowed
        << "; a traced process refuses it unless its OPSCOPE_ONDEMAND_TRACE_DIR allows that "
           "directory\n";
  }

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
    out << "  pid " << pid << " -> " << trace_file_for(log_file, pid) << "\n";
  }
  if (!t.wait) return kExitOk;

  // opscope's daemon numbers each request and collects the processes' reports on it.
  const bool daemon_reports = result.request_id != 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(t.timeout_s);
  std::vector<Waiting> waiting;
  for (const std::int32_t pid : result.triggered) {
    waiting.push_back({pid, trace_file_for(log_file, pid), {}});
  }
  int failed = 0;
  auto next_status = std::chrono::steady_clock::now();
  while (!waiting.empty()) {
    std::erase_if(waiting, [&](const Waiting& w) {
      std::error_code ec;
      if (!fs::exists(w.file, ec)) return false;
      out << w.file << "\n" << std::flush;
      return true;
    });
    if (waiting.empty()) break;
    if (daemon_reports && std::chrono::steady_clock::now() >= next_status) {
      next_status = std::chrono::steady_clock::now() + std::chrono::milliseconds(250);
      try {
        const std::string query = ondemand::trace_status_request_json(result.request_id);
        for (const ondemand::TraceStatus& s :
             ondemand::parse_trace_status(ondemand::tcp_request(t.port, query))) {
          for (Waiting& w : waiting) {
            if (w.pid == s.pid) w.status = s;
          }
        }
      } catch (const std::exception& e) {
        err << "opscope trace: could not ask the daemon about the request: " << e.what() << "\n";
      }
      // A refusal or a failure is final: say so now rather than at the timeout.
      std::erase_if(waiting, [&](const Waiting& w) {
        if (w.status.state != "refused" && w.status.state != "failed") return false;
        err << "opscope trace: pid " << w.pid << " " << w.status.state
            << " the request: " << w.status.detail << "\n";
        ++failed;
        return true;
      });
      if (waiting.empty()) break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (const Waiting& w : waiting) {
        err << "opscope trace: no trace from pid " << w.pid << " after " << t.timeout_s << " s ("
            << w.file << " does not exist): " << what_is_known(w, daemon_reports) << "\n";
      }
      return kExitFailure;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return failed > 0 ? kExitFailure : kExitOk;
}

const Subcommand& trace_subcommand() {
  static const Subcommand s{"trace", "ask the daemon to trace processes by pid or job id",
                            trace_help,
                            [](const std::vector<std::string>& args, Command& c) {
                              Args a(args, 1);
                              c.kind = Command::Kind::kTrace;
                              c.trace = parse_trace(a);
                            },
                            nullptr};
  return s;
}

}  // namespace opscope::cli
