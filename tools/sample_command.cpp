// `opscope sample`: runs a command under a Sampler and reports what its samples add up to.
//
// The order matters: the command is forked paused (blocked reading a socket), the sampler is
// started against its pid and waited for until it samples, and only then is the command
// released to exec. So the whole command is sampled from its first instruction, and a sampler
// that cannot start costs nothing: the paused child is killed before it ever ran.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli.h"
#include "cli_args.h"

namespace opscope::cli {

namespace fs = std::filesystem;

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
  --top N            print the N functions with the most samples in all (Total: the
                     samples with the function anywhere in the stack, the functions it
                     calls included, so main and its callers are listed), with their own
                     (Self), 1 to 100000 (default: 20)
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

namespace {

// Shells' exit codes for a command that could not be executed.
constexpr int kExitCannotExecute = 126;
constexpr int kExitNotFound = 127;

// The pid the stop signals are forwarded to, read by the signal handler: a lock-free atomic is
// the only kind of shared state a handler may read.
std::atomic<pid_t> g_forward_to{0};
static_assert(std::atomic<pid_t>::is_always_lock_free);

extern "C" void forward_stop_signal(int sig, siginfo_t* info, void*) {
  // Ctrl-C at a terminal is sent by the kernel (SI_KERNEL) to the whole foreground process
  // group, the command included: passing it on would deliver it twice, and a program that
  // cleans up on the first SIGINT (Python's KeyboardInterrupt) would be cut short by the second.
  if (info != nullptr && info->si_code == SI_KERNEL) return;
  const int saved_errno = errno;  // kill() may set it under the interrupted code's feet
  if (const pid_t pid = g_forward_to.load(std::memory_order_relaxed); pid > 0) ::kill(pid, sig);
  errno = saved_errno;
}

// While alive, SIGINT and SIGTERM sent to opscope go to `child` instead of ending opscope, so
// that an interrupted command still gets its samples printed. A signal that was ignored when
// opscope started (nohup, a background job of a non-interactive shell) stays ignored, as the
// command inherited that too.
class SignalForwarder {
 public:
  explicit SignalForwarder(pid_t child) {
    g_forward_to.store(child, std::memory_order_relaxed);
    struct sigaction forward {};
    forward.sa_sigaction = forward_stop_signal;
    forward.sa_flags = SA_SIGINFO;
    sigemptyset(&forward.sa_mask);
    for (std::size_t i = 0; i < kSignals.size(); ++i) {
      struct sigaction old {};
      ::sigaction(kSignals[i], nullptr, &old);
      if (old.sa_handler == SIG_IGN) continue;
      previous_[i] = old;
      ::sigaction(kSignals[i], &forward, nullptr);
    }
  }
  ~SignalForwarder() {
    for (std::size_t i = 0; i < kSignals.size(); ++i) {
      if (previous_[i]) ::sigaction(kSignals[i], &*previous_[i], nullptr);
    }
    g_forward_to.store(0, std::memory_order_relaxed);
  }
  SignalForwarder(const SignalForwarder&) = delete;
  SignalForwarder& operator=(const SignalForwarder&) = delete;

 private:
  static constexpr std::array<int, 2> kSignals = {SIGINT, SIGTERM};
  std::array<std::optional<struct sigaction>, 2> previous_;
};

// The command, forked and blocked until release(); it execs only when released, and exits
// without running anything when opscope goes away first (its socket reads end of file).
class PausedCommand {
 public:
  // Throws opscope::Error when the process cannot be forked.
  explicit PausedCommand(const std::vector<std::string>& command) {
    // argv is built before fork(): the child of a possibly multi-threaded process may only
    // make async-signal-safe calls, and allocating is not one.
    std::vector<char*> argv;
    for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);

    // A socket, not a pipe, for the release byte: send(MSG_NOSIGNAL) to a child that died
    // meanwhile fails with EPIPE instead of raising SIGPIPE in opscope. Both channels are
    // close-on-exec so that perf, started in between, holds no end of them.
    int release[2];
    int exec_error[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, release) != 0) {
      throw Error(std::string("cannot start the command: socketpair: ") + std::strerror(errno));
    }
    if (::pipe2(exec_error, O_CLOEXEC) != 0) {
      const int e = errno;
      ::close(release[0]);
      ::close(release[1]);
      throw Error(std::string("cannot start the command: pipe: ") + std::strerror(e));
    }
    pid_ = ::fork();
    if (pid_ < 0) {
      const int e = errno;
      for (const int fd : {release[0], release[1], exec_error[0], exec_error[1]}) ::close(fd);
      throw Error(std::string("cannot start the command: fork: ") + std::strerror(e));
    }
    if (pid_ == 0) {
      // The child: async-signal-safe calls only, until exec.
      ::close(release[0]);
      ::close(exec_error[0]);
      char go = 0;
      ssize_t n;
      do {
        n = ::read(release[1], &go, 1);
      } while (n < 0 && errno == EINTR);
      if (n != 1) ::_exit(kExitFailure);  // opscope gave up (or died): never run the command
      ::execvp(argv[0], argv.data());
      const int e = errno;
      (void)!::write(exec_error[1], &e, sizeof e);
      ::_exit(e == ENOENT ? kExitNotFound : kExitCannotExecute);
    }
    ::close(release[1]);
    ::close(exec_error[1]);
    release_fd_ = release[0];
    exec_error_fd_ = exec_error[0];
  }

  // Kills and reaps the child unless it was released and reaped.
  ~PausedCommand() {
    if (release_fd_ >= 0) ::close(release_fd_);
    if (exec_error_fd_ >= 0) ::close(exec_error_fd_);
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      int status;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }
  PausedCommand(const PausedCommand&) = delete;
  PausedCommand& operator=(const PausedCommand&) = delete;

  pid_t pid() const { return pid_; }

  // Lets the child exec the command. Returns 0 once the exec succeeded, the errno of the
  // failed exec (the child then exits 126 or 127), or -1 when the paused child was already
  // gone (something killed it; wait() tells how).
  int release() {
    const char go = 'g';
    ssize_t n;
    do {
      n = ::send(release_fd_, &go, 1, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    ::close(std::exchange(release_fd_, -1));
    if (n != 1) return -1;
    // End of file: exec closed the child's end (close-on-exec), so the command runs.
    int e = 0;
    ssize_t got;
    do {
      got = ::read(exec_error_fd_, &e, sizeof e);
    } while (got < 0 && errno == EINTR);
    ::close(std::exchange(exec_error_fd_, -1));
    return got == static_cast<ssize_t>(sizeof e) ? e : 0;
  }

  // Waits for the child to end; its wait status. With `until` set, returns nothing once that
  // time has come and the child still runs.
  std::optional<int> wait(std::optional<std::chrono::steady_clock::time_point> until) {
    int status = 0;
    for (;;) {
      const pid_t r = ::waitpid(pid_, &status, until ? WNOHANG : 0);
      if (r == pid_) {
        reaped_ = true;
        return status;
      }
      if (r < 0 && errno != EINTR) {
        // ECHILD: someone else reaped it (a SIGCHLD handler set to SIG_IGN would); report it
        // as a failure rather than waiting forever.
        reaped_ = true;
        return W_EXITCODE(kExitFailure, 0);
      }
      if (until) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= *until) return std::nullopt;
        // Polling keeps this free of SIGCHLD handling, which would be process-wide and could
        // reap the sampler's own perf processes. 10 ms is far below what --duration is for.
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
            std::chrono::milliseconds(10), *until - now));
      }
    }
  }

 private:
  pid_t pid_ = -1;
  int release_fd_ = -1;
  int exec_error_fd_ = -1;
  bool reaped_ = false;
};

// The command as a shell would take it back: arguments with anything but plain characters are
// single-quoted, so `sh -c 'a; b'` does not read as three arguments in a message.
std::string command_line(const std::vector<std::string>& command) {
  std::string s;
  for (const std::string& a : command) {
    if (!s.empty()) s += ' ';
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_-+=.,:/@%") == std::string::npos;
    if (plain) {
      s += a;
      continue;
    }
    s += '\'';
    for (const char c : a) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
    s += '\'';
  }
  return s;
}

// The shell's exit code for a wait status: the exit status, or 128 + the signal.
int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitFailure;
}

// Whether this process may record kernel frames whatever perf_event_paranoid says: root, or
// CAP_PERFMON (38) or CAP_SYS_ADMIN (21) in its effective set.
bool may_record_kernel() {
  if (::geteuid() == 0) return true;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const std::uint64_t caps = std::strtoull(line.c_str() + 7, nullptr, 16);
    return (caps >> 38 & 1) != 0 || (caps >> 21 & 1) != 0;
  }
  return false;
}

int read_perf_event_paranoid() {
  std::ifstream in("/proc/sys/kernel/perf_event_paranoid");
  int value = 2;
  in >> value;
  return value;
}

}  // namespace

std::string kernel_permission_note(int paranoid, bool privileged) {
  if (privileged || paranoid <= 1) return {};
  return "opscope sample: --kernel: kernel.perf_event_paranoid is " + std::to_string(paranoid) +
         " and opscope runs without root or CAP_PERFMON, so perf records user-space frames "
         "only: kernel frames need perf_event_paranoid 1 or lower (as root: `sysctl -w "
         "kernel.perf_event_paranoid=1`) or CAP_PERFMON\n";
}

int run_sample(const SampleArgs& args, std::ostream& out, std::ostream& err,
               std::shared_ptr<Sampler> sampler) {
  // Built piecewise: a literal + std::string here draws a false -Wrestrict from GCC 12 at -O3.
  std::string name = "`";
  name += command_line(args.command);
  name += '`';
  const auto timeout = std::chrono::milliseconds(args.timeout_s * 1000);

  // An output path that cannot be written is found before the command runs, not after.
  if (!args.output.empty()) {
    std::error_code ec;
    const fs::path path = fs::absolute(args.output, ec);
    if (fs::is_directory(path, ec)) {
      err << "opscope sample: --output expects a file path, '" << args.output
          << "' is a directory\n";
      return kExitUsage;
    }
    if (!fs::is_directory(path.parent_path(), ec)) {
      err << "opscope sample: --output '" << args.output << "': the directory '"
          << path.parent_path().string() << "' does not exist\n";
      return kExitUsage;
    }
  }

  // perf quietly leaves the kernel out where it may not record it: said before, not found
  // missing after.
  if (args.include_kernel) {
    err << kernel_permission_note(read_perf_event_paranoid(), may_record_kernel()) << std::flush;
  }

  std::optional<PausedCommand> child;
  std::unique_ptr<SamplerSession> session;
  try {
    if (!sampler) sampler = perf_sampler(args.perf);
    child.emplace(args.command);
    SamplerRequest request;
    request.pid = child->pid();
    request.event = args.event;
    request.frequency_hz = args.frequency_hz;
    request.period = args.period;
    request.include_kernel = args.include_kernel;
    request.call_graph = args.call_graph;
    session = sampler->start(request);
    session->wait_running(timeout);
  } catch (const std::exception& e) {
    child.reset();  // kills the paused command: it never ran
    err << "opscope sample: " << e.what() << "\n"
        << "opscope sample: " << name << " was not run\n";
    return kExitFailure;
  }
  const pid_t pid = child->pid();

  std::optional<int> status;
  std::string profile_error;  // why the samples are missing, when they are
  // Said while it runs, so that a long command does not look like a hung opscope.
  err << "opscope sample: sampling " << name << " (pid " << pid << ") at "
      << (args.period != 0 ? "one sample per " + std::to_string(args.period) + " events"
                           : std::to_string(args.frequency_hz) + " Hz")
      << "; the profile follows when it ends" << (args.duration_s ? " or --duration passes" : "")
      << "\n"
      << std::flush;
  {
    SignalForwarder forwarder(pid);
    const int exec_errno = child->release();
    if (exec_errno > 0) {
      status = child->wait(std::nullopt);
      try {
        session->stop(timeout);
      } catch (const std::exception&) {
        // Nothing was profiled; the command's failure is the message that matters.
      }
      err << "opscope sample: cannot run '" << args.command[0] << "': " << std::strerror(exec_errno)
          << "\n";
      return exec_errno == ENOENT ? kExitNotFound : kExitCannotExecute;
    }
    std::optional<std::chrono::steady_clock::time_point> stop_at;
    if (args.duration_s && exec_errno == 0) {
      stop_at = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(*args.duration_s));
    }
    status = child->wait(stop_at);
    if (!status) {
      // --duration passed and the command still runs: stop sampling, keep waiting for it.
      try {
        session->stop(timeout);
        err << "opscope sample: sampling stopped after " << *args.duration_s << " s; waiting for "
            << name << " (pid " << pid << ") to end\n"
            << std::flush;
      } catch (const std::exception& e) {
        profile_error = e.what();
      }
      status = child->wait(std::nullopt);
    }
  }
  const int command_code = exit_code_of(*status);
  if (WIFSIGNALED(*status)) {
    err << "opscope sample: " << name << " was ended by signal " << WTERMSIG(*status) << " ("
        << strsignal(WTERMSIG(*status)) << ")\n";
  }

  if (profile_error.empty()) {
    err << "opscope sample: " << name << " ended; reading its samples\n" << std::flush;
    try {
      session->stop(timeout);
      const SampleProfile profile = SampleProfile::build(session->samples(timeout));
      const std::string path =
          fs::absolute(args.output.empty() ? "opscope-sample-" + std::to_string(pid) + ".folded"
                                           : args.output)
              .lexically_normal()
              .string();
      profile.write_collapsed_stacks(path);
      // summary() names the event, says why it is not the one asked for, and says when there
      // are no samples at all.
      out << "opscope sample: profile of " << name << " (pid " << pid << ")\n"
          << profile.summary(static_cast<std::size_t>(args.top));
      if (profile.total_samples() == 0 && !args.include_kernel) {
        out << "(time asleep is not sampled, nor time in the kernel without --kernel)\n";
      }
      out << "collapsed stacks: " << path << "\n";
    } catch (const std::exception& e) {
      profile_error = e.what();
    }
  }
  if (!profile_error.empty()) {
    err << "opscope sample: " << name << " ran, but its profile is lost: " << profile_error << "\n";
    // The command's own failure is the more important fact for a script; a profiling failure
    // fails an otherwise successful run.
    return command_code != 0 ? command_code : kExitFailure;
  }
  return command_code;
}

const Subcommand& sample_subcommand() {
  static const Subcommand s{
      "sample", "run a command under perf; print its top functions, write its collapsed stacks",
      sample_help,
      [](const std::vector<std::string>& args, Command& c) {
        // Only the flags before "--" are opscope's: `opscope sample -- grep --help` profiles grep.
        const auto dashes = std::find(args.begin() + 1, args.end(), "--");
        c.kind = Command::Kind::kSample;
        c.sample =
            parse_sample(std::vector<std::string>(args.begin() + 1, dashes),
                         dashes == args.end() ? std::vector<std::string>{}
                                              : std::vector<std::string>(dashes + 1, args.end()));
      },
      nullptr};
  return s;
}

}  // namespace opscope::cli
