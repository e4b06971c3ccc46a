// The built-in sampler: `perf record` attached to a process, `perf script` to read it back.
//
// perf record starts with its events disabled (-D -1) and a control FIFO (--control): the
// session writes "enable" into the FIFO before perf even starts, and perf answers "ack" on the
// second FIFO once its events are open, attached and enabled. That answer is the sampler itself
// saying it samples, so kRunning never precedes real sampling (perf's own start takes 100 to
// 300 ms, most of it reading /proc for the process's mappings). "stop" on the same FIFO ends it
// cleanly: perf writes its file and exits 0.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "opscope/error.h"
#include "opscope/sampling.h"
#include "sampling/child_process.h"
#include "sampling/perf_script.h"

namespace opscope {

std::string_view to_string(SamplerState state) {
  switch (state) {
    case SamplerState::kIdle: return "idle";
    case SamplerState::kPreparing: return "preparing";
    case SamplerState::kRunning: return "running";
    case SamplerState::kProcessing: return "processing";
    case SamplerState::kFinished: return "finished";
    case SamplerState::kFailed: return "failed";
  }
  return "unknown";
}

namespace sampling {
namespace {

using std::chrono::milliseconds;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\0')) {
    text.pop_back();
  }
  return text;
}

int perf_event_paranoid() {
  std::ifstream in("/proc/sys/kernel/perf_event_paranoid");
  int value = 2;
  in >> value;
  return value;
}

// The record log as a message shows it: perf record may be started up to six times (a thread
// that ends while perf attaches, an event that falls back), each attempt appending the same
// lines; each line is shown once, in the order first seen, after one line that says how many
// attempts there were.
constexpr std::string_view kRelaunchMark = "[opscope: relaunching perf record]";

std::string each_line_once(const std::string& log) {
  std::istringstream lines(log);
  std::string line;
  std::vector<std::string> kept;
  int attempts = 1;
  while (std::getline(lines, line)) {
    if (line == kRelaunchMark) {
      ++attempts;
      continue;
    }
    if (std::find(kept.begin(), kept.end(), line) == kept.end()) kept.push_back(line);
  }
  std::string out;
  if (attempts > 1) {
    out = fmt::format("[opscope: perf record was started {} times; each of its lines once]\n",
                      attempts);
  }
  for (const std::string& l : kept) out += l + "\n";
  return out;
}

bool mentions(std::string_view text, std::initializer_list<std::string_view> needles) {
  for (std::string_view needle : needles) {
    if (text.find(needle) != std::string_view::npos) return true;
  }
  return false;
}

bool permission_problem(std::string_view output) {
  return mentions(output, {"perf_event_paranoid", "Permission denied", "No permission",
                           "Access to performance monitoring", "Operation not permitted"});
}

// What to do about a perf that would not start, judged from what it printed.
std::string remedy_for(std::string_view output) {
  if (permission_problem(output)) {
    int paranoid = perf_event_paranoid();
    return fmt::format(
        "remedy: kernel.perf_event_paranoid is {} on this machine; sampling your own processes "
        "needs 2 or lower (user-space frames) or 1 (with kernel frames). As root run "
        "`sysctl -w kernel.perf_event_paranoid=2`, or give the program CAP_PERFMON; in a "
        "container, its seccomp profile must also allow perf_event_open.",
        paranoid);
  }
  if (mentions(output, {"perf not found for kernel", "WARNING: perf not found"})) {
    return "remedy: install the perf that matches the running kernel (Debian: "
           "`apt-get install linux-perf`), or point OPSCOPE_PERF at a perf executable.";
  }
  if (mentions(output, {"ptrace"})) {
    return "remedy: attaching to a process needs ptrace permission over it "
           "(kernel.yama.ptrace_scope); run as the process's user or with CAP_SYS_PTRACE.";
  }
  return "";
}

// A hardware event perf could not open, where the software clock would do.
bool event_unavailable(std::string_view output) {
  return !permission_problem(output) &&
         mentions(output, {"not supported", "Failure to open event", "No such device",
                           "sys_perf_event_open() syscall returned"});
}

std::string event_without_modifiers(std::string_view event) {
  return std::string(event.substr(0, event.find(':')));
}

bool is_software_clock(std::string_view event) {
  std::string name = event_without_modifiers(event);
  return name == "cpu-clock" || name == "task-clock";
}

class PerfSession final : public SamplerSession {
 public:
  PerfSession(std::string perf, SamplerRequest request)
      : perf_(std::move(perf)), request_(std::move(request)) {
    std::string base = std::filesystem::temp_directory_path().string() + "/opscope-perf-XXXXXX";
    if (mkdtemp(base.data()) == nullptr) {
      throw Error(fmt::format("cannot create a folder for perf's files ('{}'): {}", base,
                              std::strerror(errno)));
    }
    dir_ = base;
    const std::string ctl = dir_ + "/control";
    const std::string ack = dir_ + "/ack";
    if (mkfifo(ctl.c_str(), 0600) != 0 || mkfifo(ack.c_str(), 0600) != 0) {
      int error = errno;
      remove_files();
      throw Error(fmt::format("cannot create perf's control FIFOs in '{}': {}", dir_,
                              std::strerror(error)));
    }
    // Both ends open read-write and non-blocking: opening never waits for perf, a command
    // written before perf starts waits in the FIFO, and perf's write of "ack" finds a reader.
    ctl_fd_ = open(ctl.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
    ack_fd_ = open(ack.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (ctl_fd_ < 0 || ack_fd_ < 0) {
      int error = errno;
      close_fds();
      remove_files();
      throw Error(fmt::format("cannot open perf's control FIFOs in '{}': {}", dir_,
                              std::strerror(error)));
    }
    try {
      launch(request_.event);
    } catch (...) {
      close_fds();
      remove_files();
      throw;
    }
  }

  ~PerfSession() override {
    record_.reset();  // kills a perf that still runs
    script_.reset();
    close_fds();
    remove_files();
  }

  SamplerState state() const override { return state_.load(std::memory_order_acquire); }

  void wait_running(milliseconds timeout) override {
    require(SamplerState::kPreparing, "wait_running");
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      if (read_ack()) {
        state_.store(SamplerState::kRunning, std::memory_order_release);
        return;
      }
      if (std::optional<int> status = record_->poll()) {
        // This attempt's output decides what to do; the message shows every attempt's.
        const std::string log = record_log();
        const std::string output = log.substr(std::min(launch_offset_, log.size()));
        const std::string all_output = record_output();
        const bool thread_race = mentions(output, {"No such process"}) ||
                                 output.find_first_not_of(" \n") == std::string::npos;
        if (thread_race && ::kill(request_.pid, 0) == 0 &&
            ++thread_race_retries_ <= kThreadRaceRetries) {
          // perf lists the process's threads, then attaches to each and describes each in its
          // file: a thread that ends in between fails the whole attach, with "Couldn't create
          // thread/CPU maps: No such process", or, when it ends during the description, with
          // status 255 and no message at all. The process is still there, so it is a race
          // with its threads: retry.
          drain_control();
          launch(event_);
          continue;
        }
        if (event_unavailable(output) && !is_software_clock(event_)) {
          // Virtual machines often expose no PMU: the software clock samples the same places,
          // at the same rate, by time instead of by cycle.
          fallback_reason_ = fmt::format(
              "perf could not open '{}' ({}); sampled 'cpu-clock' instead", event_,
              first_line_about(output, {"not supported", "Failure", "syscall returned"}));
          drain_control();
          launch("cpu-clock");
          continue;
        }
        fail(fmt::format("perf record {} before it started sampling", describe_wait_status(*status)),
             all_output);
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        record_->kill();
        fail(fmt::format("perf record did not start sampling within {} ms", timeout.count()),
             record_output());
      }
      pollfd fd{ack_fd_, POLLIN, 0};
      ::poll(&fd, 1, 5);
    }
  }

  void stop(milliseconds timeout) override {
    SamplerState current = state();
    if (current != SamplerState::kRunning && current != SamplerState::kPreparing) return;
    write_control("stop\n");
    std::optional<int> status = record_->wait_for(timeout);
    if (!status) {
      // perf answers SIGINT too; it may be stuck before its control loop (a slow /proc scan).
      ::kill(record_->pid(), SIGINT);
      status = record_->wait_for(milliseconds(1000));
    }
    if (!status) {
      record_->kill();
      fail(fmt::format("perf record did not stop within {} ms", timeout.count()),
           record_output());
    }
    if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
      fail(fmt::format("perf record {} while stopping", describe_wait_status(*status)),
           record_output());
    }
    state_.store(SamplerState::kProcessing, std::memory_order_release);
  }

  SampleBatch samples(milliseconds timeout) override {
    require(SamplerState::kProcessing, "samples");
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    SampleBatch batch;
    batch.event = run_script({perf_, "evlist", "-i", data_path()}, deadline, "evlist");
    batch.event = first_event(batch.event);
    std::vector<std::string> script = {perf_, "script", "-i", data_path(), "-F",
                                       "tid,time,event,period,ip,sym,dso", "--ns"};
    script.push_back(fmt::format("--max-stack={}", request_.stack_max_len));
    std::string text = run_script(script, deadline, "script");
    try {
      SampleBatch parsed;
      parse_perf_script(text, request_.stack_max_len, parsed);
      batch.samples = std::move(parsed.samples);
      if (batch.event.empty()) batch.event = parsed.event;
    } catch (const Error& e) {
      fail(e.what(), script_errors_);
    }
    if (batch.event.empty()) batch.event = event_;
    batch.fallback_reason = fallback_reason_;
    if (batch.fallback_reason.empty() &&
        event_without_modifiers(batch.event) != event_without_modifiers(request_.event)) {
      // perf itself swaps cycles for cpu-clock where there is no PMU, and says nothing.
      batch.fallback_reason = fmt::format(
          "'{}' is not available here (no hardware counters, as in many virtual machines); "
          "perf sampled '{}' instead",
          request_.event, batch.event);
    }
    state_.store(SamplerState::kFinished, std::memory_order_release);
    return batch;
  }

  std::string output() const override {
    std::string text = record_output();
    if (!script_errors_.empty()) text += (text.empty() ? "" : "\n") + script_errors_;
    return text;
  }

 private:
  std::string data_path() const { return dir_ + "/perf.data"; }
  // What perf record said, every attempt's, each line once (each_line_once()).
  std::string record_output() const {
    return trimmed(each_line_once(read_text(dir_ + "/record.log")));
  }
  // The log as written, relaunch marks included: launch_offset_ counts in it.
  std::string record_log() const { return trimmed(read_text(dir_ + "/record.log")); }

  void launch(const std::string& event) {
    event_ = event;
    std::vector<std::string> argv = {perf_, "record", "-e", event};
    if (request_.period != 0) {
      argv.insert(argv.end(), {"-c", std::to_string(request_.period)});
    } else {
      argv.insert(argv.end(), {"-F", std::to_string(request_.frequency_hz)});
    }
    argv.insert(argv.end(), {"--call-graph", request_.call_graph});
    // Sample times on CLOCK_MONOTONIC, the clock the range log reads, so that samples and
    // ranges line up.
    argv.insert(argv.end(), {"-k", "CLOCK_MONOTONIC", "-D", "-1", "--control",
                             fmt::format("fifo:{}/control,{}/ack", dir_, dir_)});
    if (!request_.include_kernel) argv.push_back("--all-user");
    // No build-id cache in ~/.debug: it makes stopping slower and the samples are read back at
    // once, from the same binaries.
    argv.insert(argv.end(), {"--no-buildid", "-o", data_path(), "-p", std::to_string(request_.pid)});
    command_ = command_line(argv);
    // A relaunch appends: the earlier attempts' output explains the relaunch.
    std::string log = dir_ + "/record.log";
    if (launches_++ > 0) std::ofstream(log, std::ios::app) << kRelaunchMark << "\n";
    launch_offset_ = read_text(log).size();
    // "enable" waits in the FIFO until perf has attached; perf answers it with "ack".
    write_control("enable\n");
    state_.store(SamplerState::kPreparing, std::memory_order_release);
    record_ = std::make_unique<ChildProcess>(argv, log, log);
  }

  std::string run_script(const std::vector<std::string>& argv,
                         std::chrono::steady_clock::time_point deadline, const char* name) {
    std::string out = fmt::format("{}/{}.out", dir_, name);
    std::string err = fmt::format("{}/{}.err", dir_, name);
    script_ = std::make_unique<ChildProcess>(argv, out, err);
    auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    std::optional<int> status = script_->wait_for(std::max(left, milliseconds(0)));
    std::string errors = trimmed(read_text(err));
    if (!errors.empty()) script_errors_ += (script_errors_.empty() ? "" : "\n") + errors;
    if (!status) {
      script_->kill();
      fail(fmt::format("'{}' did not finish in time (timeout_wait_for_finished)",
                       command_line(argv)),
           script_errors_);
    }
    if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
      fail(fmt::format("'{}' {}", command_line(argv), describe_wait_status(*status)),
           script_errors_);
    }
    std::string text = read_text(out);
    std::filesystem::remove(out);
    return text;
  }

  // The first event `perf evlist` lists that is not perf's bookkeeping "dummy" event.
  static std::string first_event(const std::string& evlist) {
    std::istringstream lines(evlist);
    std::string line;
    while (std::getline(lines, line)) {
      std::string name = event_without_modifiers(trimmed(line));
      if (!name.empty() && name != "dummy") return name;
    }
    return "";
  }

  static std::string first_line_about(std::string_view output,
                                      std::initializer_list<std::string_view> needles) {
    std::istringstream lines{std::string(output)};
    std::string line;
    while (std::getline(lines, line)) {
      if (mentions(line, needles)) return trimmed(line);
    }
    return "not supported";
  }

  bool read_ack() {
    char buffer[64];
    ssize_t n = read(ack_fd_, buffer, sizeof buffer);
    if (n <= 0) return false;
    ack_text_.append(buffer, static_cast<std::size_t>(n));
    return ack_text_.find("ack") != std::string::npos;
  }

  void write_control(std::string_view command) {
    // A few bytes into an empty FIFO of 64 KiB: it never blocks or writes short.
    if (write(ctl_fd_, command.data(), command.size()) != static_cast<ssize_t>(command.size())) {
      fail(fmt::format("cannot write '{}' to perf's control FIFO: {}", trimmed(std::string(command)),
                       std::strerror(errno)),
           record_ ? record_output() : "");
    }
  }

  void drain_control() {
    char buffer[256];
    while (read(ctl_fd_, buffer, sizeof buffer) > 0) {
    }
    ack_text_.clear();
  }

  void require(SamplerState wanted, const char* call) {
    SamplerState current = state();
    if (current != wanted) {
      throw Error(fmt::format("perf sampler: {}() needs state '{}', the run is '{}'", call,
                              to_string(wanted), to_string(current)));
    }
  }

  [[noreturn]] void fail(const std::string& what, const std::string& output) {
    state_.store(SamplerState::kFailed, std::memory_order_release);
    std::string message = what;
    message += fmt::format("\n  command: {}", command_);
    if (!output.empty()) message += "\n  perf said:\n    " + indent(output);
    std::string remedy = remedy_for(output);
    if (!remedy.empty()) message += "\n  " + remedy;
    throw Error(message);
  }

  static std::string indent(const std::string& text) {
    std::string out;
    for (char c : text) {
      out += c;
      if (c == '\n') out += "    ";
    }
    return out;
  }

  void close_fds() {
    if (ctl_fd_ >= 0) close(ctl_fd_);
    if (ack_fd_ >= 0) close(ack_fd_);
    ctl_fd_ = ack_fd_ = -1;
  }

  void remove_files() noexcept {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  std::string perf_;
  SamplerRequest request_;
  std::string dir_;
  int ctl_fd_ = -1;
  int ack_fd_ = -1;
  std::string ack_text_;
  std::string event_;
  std::string fallback_reason_;
  std::string command_;
  std::string script_errors_;
  static constexpr int kThreadRaceRetries = 5;
  int thread_race_retries_ = 0;
  int launches_ = 0;
  std::size_t launch_offset_ = 0;  // where the current attempt's output starts in record.log
  std::unique_ptr<ChildProcess> record_;
  std::unique_ptr<ChildProcess> script_;
  std::atomic<SamplerState> state_{SamplerState::kIdle};
};

class PerfSampler final : public Sampler {
 public:
  explicit PerfSampler(std::string perf) : perf_(std::move(perf)) {}

  std::string name() const override { return "perf"; }

  std::unique_ptr<SamplerSession> start(const SamplerRequest& request) override {
    if (request.pid <= 0) {
      throw Error(fmt::format("perf sampler: pid must be a process id (> 0), got {}", request.pid));
    }
    if (request.call_graph != "fp" && request.call_graph != "dwarf") {
      throw Error(fmt::format("perf sampler: call_graph '{}' is not one of 'fp', 'dwarf'",
                              request.call_graph));
    }
    if (request.period == 0 && request.frequency_hz == 0) {
      throw Error("perf sampler: frequency_hz is 0 and no period is set; give one of them");
    }
    if (request.event.empty()) throw Error("perf sampler: the event is empty (e.g. 'cycles')");
    try {
      return std::make_unique<PerfSession>(perf_, request);
    } catch (const Error& e) {
      std::string_view message = e.what();
      if (message.find("No such file or directory") != std::string_view::npos &&
          message.starts_with("cannot run")) {
        throw Error(fmt::format(
            "{}\n  remedy: install perf (Debian: `apt-get install linux-perf`), or point "
            "OPSCOPE_PERF at a perf executable",
            message));
      }
      throw;
    }
  }

 private:
  std::string perf_;
};

}  // namespace
}  // namespace sampling

std::shared_ptr<Sampler> perf_sampler(std::string perf_command) {
  if (perf_command.empty()) {
    const char* configured = std::getenv("OPSCOPE_PERF");
    perf_command = configured != nullptr && *configured != '\0' ? configured : "perf";
  }
  return std::make_shared<sampling::PerfSampler>(std::move(perf_command));
}

}  // namespace opscope
