// The on-demand client: a background thread that polls the daemon and runs the captures it
// asks for (opscope/ondemand.h).
//
// Threads: the client thread owns the endpoint, the polls and duration captures, and writes
// every trace file. step() runs on application threads: while no iteration capture is armed
// it is an atomic increment and a load; the step that starts or ends an armed capture takes
// the registry lock and starts or stops the Profiler there, then hands the stopped Profiler to
// the client thread to export. All capture state is under Client::mu_.
#include "ondemand/client.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include "export/memory_timeline.h"
#include "export/sink.h"
#include "export/trace_formats.h"
#include "ondemand/config.h"
#include "ondemand/flight_env.h"
#include "ondemand/ipc.h"
#include "opscope/error.h"
#include "opscope/flight_recorder.h"
#include "opscope/ondemand.h"
#include "opscope/profiler.h"
#include "profiler/flight_state.h"
#include "profiler/step_hook.h"

namespace opscope::ondemand {
namespace {

using Steady = std::chrono::steady_clock;
using Wall = std::chrono::system_clock;

// A pending iteration capture is dropped when step() has not been called for this long.
constexpr std::chrono::seconds kStepsStalled{60};

// What went wrong or was refused: a warning. What went as asked (a trace written, the daemon
// reached again) is information, logged by note() and never a warning: a program that turns
// warnings into errors must not fail because a capture succeeded.
void log(const std::string& message) { warn("on-demand: " + message); }
void note(const std::string& message) { inform("on-demand: " + message); }

std::optional<std::int64_t> env_number(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  const auto n = parse_non_negative(v);
  if (!n) log(std::string("ignored ") + name + "=\"" + v + "\": not a non-negative integer");
  return n;
}

// Signal plumbing: the handler only sets a flag and writes one byte to the client's wake pipe
// (both async-signal-safe); the client thread does the rest.
std::atomic<bool> g_sigusr2{false};
std::atomic<int> g_wake_fd{-1};

extern "C" void on_sigusr2(int) {
  const int saved = errno;
  g_sigusr2.store(true, std::memory_order_relaxed);
  const int fd = g_wake_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const char b = 's';
    [[maybe_unused]] const ssize_t n = ::write(fd, &b, 1);
  }
  errno = saved;
}

std::atomic<std::int64_t> g_steps{0};
// Set while an iteration capture waits for its first or last step: the only time step()
// leaves its fast path.
std::atomic<bool> g_iteration_armed{false};

// The request's activities reach the backends: CPU ranges always, GPU activity unless
// ACTIVITIES_ENABLED=false. Where the GPU's cannot be recorded, the Profiler records the rest,
// warns, and lists it in the trace's "opscope_not_recorded".
ProfilerConfig profiler_config(const CaptureRequest& r) {
  ProfilerConfig c;
  c.activities = {ActivityType::kCPU};
  if (r.gpu_activities) c.activities.push_back(ActivityType::kCUDA);
  c.lenses = r.lenses;
  // The program's own profiler, refused while this capture records, is told what holds it.
  c.name = "an on-demand capture (trace id " + r.trace_id + ")";
  return c;
}

// Writes `result` to `path` (in the format its suffix names), created in the open directory
// `dir_fd` that `path` goes in.
void write_trace_file(const ProfilerResult& result, const std::string& path, int dir_fd) {
  // The format the log file's suffix names; Kineto writes its JSON whatever the name, so a
  // name no format claims ("trace.log") gets Chrome's.
  const internal::TraceFormat* format = internal::trace_format_by_suffix(path);
  if (format == nullptr) format = &internal::trace_format_for(path, "chrome");
  // Created in the directory opened at acceptance, 0600: the trace is its owner's alone.
  const internal::FileSinkOptions file{
      .what = std::string(format->what), .mode = 0600, .dir_fd = dir_fd};
  std::unique_ptr<internal::Sink> sink =
      internal::open_file_sink(std::filesystem::path(path).filename().string(), file);
  format->write(result, path, *sink);
}

class Client {
 public:
  explicit Client(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // On an application thread, with the registry lock held, when iteration capture is armed.
  void on_step(std::int64_t count);
  ClientStatus status();

 private:
  struct Capture {
    CaptureRequest request;
    Wall::time_point start_at;           // kDuration
    Steady::time_point stop_at;          // kDuration, once recording
    std::int64_t start_step = 0;         // kIterations
    std::int64_t steps_seen = 0;         // kIterations: step_count() at the last check
    Steady::time_point steps_moved_at;   // kIterations: when step_count() last moved
    std::unique_ptr<Profiler> profiler;  // set while recording
    // The output's directory, opened when the request was accepted: the file is created in it
    // (not at its path) so that no later change of the path can redirect it.
    UniqueFd dir;
  };

  void run();
  void poll_daemon();
  void receive_all();
  void handle_config(const std::string& text);
  void arm(CaptureRequest request);
  // OPSCOPE_FLIGHT_DUMP: dumps the flight recorder to the request's path now.
  void dump_on_request(const CaptureRequest& request);
  // SIGUSR2 with sigusr2_flight_dump: dumps it into its dump_dir.
  void dump_on_sigusr2();
  // Starts/stops a due duration capture (returns how long until the next such event); drops
  // an iteration capture whose program stopped calling step().
  std::optional<Steady::duration> advance();
  // Starts the Profiler of `c` (mu_ held); false (and the capture dropped) when busy.
  bool start_recording(Capture& c);
  // Stops the capture's Profiler and queues it for export (mu_ held).
  void finish_recording();
  void export_finished();
  void wake();
  bool handles_sigusr2() const {
    return options_.sigusr2_duration_ms > 0 || options_.sigusr2_flight_dump;
  }
  // Tells opscope's daemon what became of request `trace_id` (no-op for dynolog, or for a
  // request without a numeric REQUEST_TRACE_ID such as a SIGUSR2 capture).
  void report(const std::string& trace_id, std::string_view state, const std::string& detail);

  const ClientOptions options_;
  const std::string trace_dir_;
  std::unique_ptr<Endpoint> endpoint_;
  std::string daemon_address_;             // the daemon's exact address (see receive_all)
  Steady::time_point last_foreign_log_{};  // client thread only
  int wake_pipe_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  bool registered_ = false;    // client thread only (mirrored in status_registered_)
  bool send_failing_ = false;  // client thread only: warned about an unreachable daemon
  // The daemon takes outcome reports (opscope's, not dynolog). Read and written by the client
  // thread only; report() may be called from a step() thread, hence atomic.
  std::atomic<bool> daemon_takes_reports_{false};
  struct sigaction previous_sigusr2_ {};

  std::mutex mu_;
  std::optional<Capture> capture_;
  std::optional<Capture> to_export_;  // stopped, for the client thread to write
  bool status_registered_ = false;
  std::uint64_t polls_ = 0;
  std::uint64_t configs_ = 0;
  std::uint64_t traces_ = 0;
  std::string last_trace_;

  std::thread thread_;
};

std::string client_endpoint_name() {
  // dynolog's clients name themselves "dynoconfigclient" + a uuid; the pid keeps it readable.
  std::random_device rd;
  char suffix[17];
  std::snprintf(suffix, sizeof suffix, "%08x%08x", rd(), rd());
  return "dynoconfigclient-opscope-" + std::to_string(::getpid()) + "-" + suffix;
}

Client::Client(ClientOptions options)
    : options_(std::move(options)),
      trace_dir_(options_.trace_dir.empty() ? allowed_trace_dir() : options_.trace_dir) {
  if (options_.poll_interval.count() < 1) {
    throw Error("ondemand::enable(): poll_interval is " +
                std::to_string(options_.poll_interval.count()) + " ms; it must be at least 1");
  }
  if (options_.daemon_endpoint.empty()) {
    throw Error("ondemand::enable(): daemon_endpoint is empty; dynolog's is \"dynolog\"");
  }
  if (options_.sigusr2_duration_ms < 0) {
    throw Error("ondemand::enable(): sigusr2_duration_ms is " +
                std::to_string(options_.sigusr2_duration_ms) + "; it must be 0 (off) or more");
  }
  if (options_.sigusr2_flight_dump && options_.sigusr2_duration_ms > 0) {
    throw Error("ondemand::enable(): sigusr2_flight_dump and sigusr2_duration_ms " +
                std::to_string(options_.sigusr2_duration_ms) +
                " both ask for SIGUSR2; choose a flight recorder dump or a capture");
  }
  endpoint_ = std::make_unique<Endpoint>(client_endpoint_name(), options_.socket_dir);
  endpoint_->enable_credentials();
  daemon_address_ = endpoint_->address_of_name(options_.daemon_endpoint);
  if (::pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw Error("ondemand::enable(): cannot create a pipe: " + std::string(std::strerror(errno)));
  }
  if (handles_sigusr2()) {
    g_sigusr2.store(false);
    g_wake_fd.store(wake_pipe_[1]);
    struct sigaction sa {};
    sa.sa_handler = on_sigusr2;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGUSR2, &sa, &previous_sigusr2_);
  }
  thread_ = std::thread([this] { run(); });
}

Client::~Client() {
  stop_.store(true);
  wake();
  if (thread_.joinable()) thread_.join();
  if (handles_sigusr2()) {
    ::sigaction(SIGUSR2, &previous_sigusr2_, nullptr);
    g_wake_fd.store(-1);
  }
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

void Client::wake() {
  const char b = 'w';
  [[maybe_unused]] const ssize_t n = ::write(wake_pipe_[1], &b, 1);
}

ClientStatus Client::status() {
  std::lock_guard<std::mutex> lock(mu_);
  ClientStatus s;
  s.enabled = true;
  s.registered = status_registered_;
  s.polls = polls_;
  s.configs = configs_;
  s.traces = traces_;
  s.capture_armed = capture_.has_value();
  s.capture_recording = capture_ && capture_->profiler != nullptr;
  s.endpoint = endpoint_->name();
  s.last_trace = last_trace_;
  return s;
}

void Client::run() {
  // Linux limits thread names to 15 characters.
  ::pthread_setname_np(::pthread_self(), "opscope-ondmand");
  Steady::time_point next_poll = Steady::now();
  while (!stop_.load()) {
    if (Steady::now() >= next_poll) {
      poll_daemon();
      next_poll = Steady::now() + options_.poll_interval;
    }
    if (g_sigusr2.exchange(false)) {
      if (options_.sigusr2_flight_dump) {
        dump_on_sigusr2();
      } else {
        CaptureRequest r;
        r.kind = CaptureKind::kDuration;
        r.duration_ms = options_.sigusr2_duration_ms;
        r.output_path = sigusr2_trace_path(trace_dir_, ::getpid());
        r.log_file = r.output_path;
        r.trace_id = "SIGUSR2";
        arm(std::move(r));
      }
    }
    std::optional<Steady::duration> until_capture;
    try {
      until_capture = advance();
    } catch (const std::exception& e) {
      log(std::string("capture failed: ") + e.what());
    }
    export_finished();

    Steady::duration wait = next_poll - Steady::now();
    if (until_capture && *until_capture < wait) wait = *until_capture;
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(wait).count();
    pollfd fds[2] = {{endpoint_->fd(), POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    const int ready = ::poll(fds, 2, static_cast<int>(std::max<std::int64_t>(ms, 0)));
    if (ready <= 0) continue;
    if (fds[1].revents != 0) {
      char buf[64];
      while (::read(wake_pipe_[0], buf, sizeof buf) > 0) {
      }
    }
    if (fds[0].revents != 0) receive_all();
  }

  // Shutting down: a recording capture is stopped and written, a pending one dropped.
  std::unique_lock<std::mutex> lock(mu_);
  g_iteration_armed.store(false);
  if (capture_ && capture_->profiler) {
    finish_recording();
  } else if (capture_) {
    log("dropped the pending capture (trace id " + capture_->request.trace_id +
        "): the client is disabled");
    report(capture_->request.trace_id, "failed", "the process disabled on-demand tracing");
    capture_.reset();
  }
  lock.unlock();
  export_finished();
}

void Client::poll_daemon() {
  std::string error;
  bool ok = true;
  if (!registered_) {
    const LibkinetoContext ctxt{-1, ::getpid(), options_.job_id};
    ok = endpoint_->send(options_.daemon_endpoint, "ctxt", encode_context(ctxt), &error);
  }
  if (ok) {
    const auto pids = pid_and_ancestors();
    ok = endpoint_->send(options_.daemon_endpoint, "req",
                         encode_request(kConfigTypeActivities, options_.job_id, pids), &error);
    if (ok) {
      std::lock_guard<std::mutex> lock(mu_);
      ++polls_;
    }
  }
  if (!ok && !send_failing_) {
    log(error + "; is the daemon running? Polling goes on every " +
        std::to_string(options_.poll_interval.count()) + " ms (warned once)");
  }
  if (ok && send_failing_) note("reached the daemon '" + options_.daemon_endpoint + "'");
  send_failing_ = !ok;
}

void Client::receive_all() {
  while (auto r = endpoint_->receive(std::chrono::milliseconds(0))) {
    // The kernel, not the name, says who sent it: only the daemon's exact address (another
    // user can bind "\0dynolog\0\0", a different address with a similar name), and only a
    // daemon running as this process's user or as root (dynolog usually does).
    std::string why;
    if (r->sender_address != daemon_address_) {
      why = "it came from '" + printable_address(r->sender_address) + "', not the daemon '" +
            printable_address(daemon_address_) + "'";
    } else if (!r->uid) {
      why = "the kernel gave no credentials for it";
    } else if (*r->uid != ::geteuid() && *r->uid != 0) {
      why = "its sender runs as uid " + std::to_string(*r->uid) +
            "; a daemon must run as this process's user (" + std::to_string(::geteuid()) +
            ") or as root";
    }
    if (!why.empty()) {
      // Rate-limited: another user's datagrams must not flood this process's stderr.
      const auto now = Steady::now();
      if (now - last_foreign_log_ > std::chrono::minutes(1)) {
        log("ignored a datagram: " + why + " (such datagrams are logged once a minute)");
        last_foreign_log_ = now;
      }
      continue;
    }
    if (!r->message) {
      log("ignored a malformed datagram from the daemon: " + r->error);
      continue;
    }
    if (r->message->type == "ctxt") {
      registered_ = true;
      const std::string& p = r->message->payload;
      daemon_takes_reports_.store(p.size() > sizeof(std::int32_t) &&
                                  std::string_view(p).substr(sizeof(std::int32_t)) ==
                                      kOpscopeDaemonMark);
      std::lock_guard<std::mutex> lock(mu_);
      status_registered_ = true;
    } else if (r->message->type == "req") {
      if (!r->message->payload.empty()) handle_config(r->message->payload);
    }
  }
}

void Client::handle_config(const std::string& text) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++configs_;
  }
  ParsedConfig parsed = parse_capture_config(text, ::getpid(), trace_dir_);
  for (const auto& w : parsed.warnings) warn(w);
  if (!parsed.request) {
    log(parsed.error);
    report(find_config_value(text, "REQUEST_TRACE_ID"), "refused", parsed.error);
    return;
  }
  if (parsed.request->kind == CaptureKind::kFlightDump) {
    dump_on_request(*parsed.request);
    return;
  }
  arm(std::move(*parsed.request));
}

void Client::dump_on_request(const CaptureRequest& request) {
  const std::string& path = request.output_path;
  std::string why;
  UniqueFd dir;
  if (!flight_recorder_running()) {
    why =
        "no flight recorder records in this process, and OPSCOPE_FLIGHT_DUMP asks for a dump of "
        "one (start it with OPSCOPE_FLIGHT_RECORDER=seconds[,MiB] or opscope::FlightRecorder)";
  } else {
    // The same rule as a capture's: the directory opened once, walking down from the allowed
    // one without following links, and the file created in it.
    dir = open_output_directory(path, trace_dir_, &why);
  }
  if (!dir) {
    log("refused the flight recorder dump to " + path + " (trace id " + request.trace_id +
        "): " + why);
    report(request.trace_id, "refused", why);
    return;
  }
  report(request.trace_id, "accepted", path);
  // A capture that records meanwhile pauses the recorder: the dump holds what the ring held
  // when it paused, and its metadata names the pause (flightRecorder.pausedNs).
  FlightDump written;
  try {
    written = flight::dump_with(
        path, "on-demand (trace id " + request.trace_id + ")",
        [&](const ProfilerResult& result) { write_trace_file(result, path, dir.get()); });
  } catch (const std::exception& e) {
    log("could not dump the flight recorder to " + path + ": " + e.what());
    report(request.trace_id, "failed",
           "could not dump the flight recorder to " + path + ": " + e.what());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++traces_;
    last_trace_ = path;
  }
  note("flight recorder dumped to " + path + " (" + std::to_string(written.events) + " events, " +
       std::to_string(written.open_ranges) + " ranges still open)");
  report(request.trace_id, "written", path);
}

void Client::dump_on_sigusr2() {
  if (!flight_recorder_running()) {
    log("SIGUSR2: no flight recorder records in this process, so none was dumped (start one "
        "with OPSCOPE_FLIGHT_RECORDER=seconds[,MiB] or opscope::FlightRecorder)");
    return;
  }
  const std::string path = flight_dump_path("sigusr2");
  try {
    const FlightDump written = dump_flight_recorder(path, "SIGUSR2");
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++traces_;
      last_trace_ = path;
    }
    note("SIGUSR2: flight recorder dumped to " + path + " (" + std::to_string(written.events) +
         " events, " + std::to_string(written.open_ranges) + " ranges still open)");
  } catch (const std::exception& e) {
    log("SIGUSR2: could not dump the flight recorder to " + path + ": " + e.what());
  }
}

void Client::arm(CaptureRequest request) {
  std::lock_guard<std::mutex> lock(mu_);
  if (capture_) {
    const std::string why = "a capture for " + capture_->request.output_path + " is already " +
                            (capture_->profiler ? "recording" : "pending");
    log("dropped a request (trace id " + request.trace_id + "): " + why);
    report(request.trace_id, "refused", why);
    return;
  }
  Capture c;
  // The directory is opened now, once: a path whose directory is swapped for a link later
  // still writes here, and one that goes through a link now (or a loop) is refused.
  std::string why;
  c.dir = open_output_directory(request.output_path, trace_dir_, &why);
  if (!c.dir) {
    log("config refused: ACTIVITIES_LOG_FILE=\"" + request.log_file + "\": " + why);
    report(request.trace_id, "refused", why);
    return;
  }
  report(request.trace_id, "accepted", request.output_path);
  if (request.kind == CaptureKind::kDuration) {
    c.start_at = request.start_time_ms > 0
                     ? Wall::time_point(std::chrono::milliseconds(request.start_time_ms))
                     : Wall::now();
  } else {
    // The next step boundary at the earliest: a window covers whole steps.
    c.start_step = first_capture_step(request.start_iteration, request.start_iteration_roundup,
                                      g_steps.load() + 1);
  }
  c.steps_seen = g_steps.load();
  c.steps_moved_at = Steady::now();
  c.request = std::move(request);
  const bool iterations = c.request.kind == CaptureKind::kIterations;
  capture_ = std::move(c);
  if (iterations) g_iteration_armed.store(true, std::memory_order_release);
}

bool Client::start_recording(Capture& c) {
  auto profiler = std::make_unique<Profiler>(profiler_config(c.request));
  try {
    profiler->start();
  } catch (const Error& e) {
    log("busy: refused the capture for " + c.request.output_path + " (trace id " +
        c.request.trace_id + "): " + e.what());
    report(c.request.trace_id, "refused", std::string("busy: ") + e.what());
    capture_.reset();
    g_iteration_armed.store(false);
    return false;
  }
  profiler->add_metadata("opscope_ondemand_trace_id", c.request.trace_id);
  c.profiler = std::move(profiler);
  report(c.request.trace_id, "recording", c.request.output_path);
  return true;
}

void Client::finish_recording() {
  Capture& c = *capture_;
  try {
    c.profiler->stop();
    to_export_ = std::move(c);
  } catch (const std::exception& e) {
    // The slot is freed either way, so a failed stop cannot wedge later requests or step().
    log("could not stop the capture for " + c.request.output_path + ": " + e.what());
    report(c.request.trace_id, "failed", std::string("could not stop the capture: ") + e.what());
  }
  capture_.reset();
  g_iteration_armed.store(false);
}

std::optional<Steady::duration> Client::advance() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!capture_) return std::nullopt;
  Capture& c = *capture_;
  if (c.request.kind == CaptureKind::kIterations) {
    // A program that stopped calling step() (or never did) would hold the one capture slot
    // forever and every later request would be dropped: give up on it.
    if (c.profiler) return std::nullopt;
    const std::int64_t steps = g_steps.load();
    if (steps != c.steps_seen) {
      c.steps_seen = steps;
      c.steps_moved_at = Steady::now();
    } else if (Steady::now() - c.steps_moved_at > kStepsStalled) {
      const std::string why = "step() was not called for " + std::to_string(kStepsStalled.count()) +
                              " s (call opscope::ondemand::step() once per iteration)";
      log("dropped the iteration capture for " + c.request.output_path + ": " + why);
      report(c.request.trace_id, "failed", why);
      capture_.reset();
      g_iteration_armed.store(false);
    }
    return std::nullopt;
  }
  if (!c.profiler) {
    const Wall::duration until = c.start_at - Wall::now();
    if (until > Wall::duration::zero()) return std::chrono::duration_cast<Steady::duration>(until);
    if (!start_recording(c)) return std::nullopt;
    c.stop_at = Steady::now() + std::chrono::milliseconds(c.request.duration_ms);
    return std::chrono::milliseconds(c.request.duration_ms);
  }
  const Steady::duration until = c.stop_at - Steady::now();
  if (until > Steady::duration::zero()) return until;
  finish_recording();
  return std::nullopt;
}

void Client::on_step(std::int64_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!capture_ || capture_->request.kind != CaptureKind::kIterations) return;
  Capture& c = *capture_;
  if (!c.profiler) {
    if (count >= c.start_step) {
      c.start_step = count;
      start_recording(c);
    }
    return;
  }
  if (count >= c.start_step + c.request.iterations) {
    finish_recording();
    wake();
  }
}

void Client::report(const std::string& trace_id, std::string_view state,
                    const std::string& detail) {
  if (!daemon_takes_reports_.load()) return;
  const auto id = parse_non_negative(trace_id);
  if (!id || *id == 0) return;
  OutcomeReport r{static_cast<std::uint64_t>(*id), std::string(state), detail};
  endpoint_->send(options_.daemon_endpoint, kReportType, encode_report(r));
}

void Client::export_finished() {
  std::optional<Capture> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done = std::exchange(to_export_, std::nullopt);
  }
  if (!done) return;
  const CaptureRequest& r = done->request;
  const std::string& path = r.output_path;
  try {
    write_trace_file(done->profiler->result(), path, done->dir.get());
  } catch (const std::exception& e) {
    log("could not write the trace " + path + ": " + e.what());
    report(r.trace_id, "failed", "could not write the trace " + path + ": " + e.what());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++traces_;
    last_trace_ = path;
  }
  note("trace written to " + path);
  report(r.trace_id, "written", path);
  if (r.memory_profile) {
    // PROFILE_MEMORY: the window's memory timeline beside the trace. The lenses PyTorch asks
    // for before it draws one are not needed here: the timeline reads allocation reports only.
    const std::string page = memory_timeline_path(path);
    try {
      internal::FileSink sink(std::filesystem::path(page).filename().string(),
                              {.what = "memory timeline", .mode = 0600, .dir_fd = done->dir.get()});
      internal::write_memory_timeline(done->profiler->result(),
                                      internal::parse_timeline_device("cpu"),
                                      internal::MemoryTimelineFormat::kHtml, sink);
      note("memory timeline written to " + page);
    } catch (const std::exception& e) {
      log("could not write the memory timeline " + page + ": " + e.what());
    }
  }
}

// The one client of the process. Leaked on purpose: the client thread may still run while
// static destructors do, and an atexit handler stops it first.
struct Registry {
  std::mutex mu;
  std::unique_ptr<Client> client;
};
Registry& registry() {
  static auto* r = new Registry;
  return *r;
}

void step_hook() noexcept { step(); }

void stop_at_exit() {
  try {
    disable();
  } catch (...) {
  }
}

}  // namespace

std::optional<int> parse_init_delay_s(const char* value) {
  if (value == nullptr) return std::nullopt;
  const auto n = parse_non_negative(value);
  if (!n || *n > 24 * 3600) return std::nullopt;
  return static_cast<int>(*n);
}

bool autostart_requested() {
  for (const char* name : {"KINETO_USE_DAEMON", "OPSCOPE_USE_DAEMON"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0) return true;
  }
  return false;
}

void warn_sigusr2_without_client() {
  const char* v = std::getenv("OPSCOPE_SIGUSR2");
  if (v == nullptr || *v == '\0') return;
  log(std::string("OPSCOPE_SIGUSR2=\"") + v +
      "\" is read by the on-demand client, which is not enabled: set KINETO_USE_DAEMON=1 (or "
      "OPSCOPE_USE_DAEMON=1), or call opscope::ondemand::enable(); until then SIGUSR2 keeps "
      "its default action, which ends the process");
}

std::string sigusr2_trace_path(const std::string& dir, pid_t pid) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return d + "/opscope_sigusr2_" + std::to_string(pid) + ".json";
}

ClientOptions client_options_from_env() {
  ClientOptions o;
  if (const char* e = std::getenv("OPSCOPE_DAEMON_ENDPOINT"); e != nullptr && *e != '\0') {
    o.daemon_endpoint = e;
  }
  if (const auto ms = env_number("OPSCOPE_DAEMON_POLL_MS"); ms && *ms > 0) {
    o.poll_interval = std::chrono::milliseconds(*ms);
  }
  if (const auto job = env_number("SLURM_JOB_ID")) o.job_id = *job;
  if (const auto ms = env_number("OPSCOPE_SIGUSR2_DURATION_MS")) o.sigusr2_duration_ms = *ms;
  if (const char* v = std::getenv("OPSCOPE_SIGUSR2"); v != nullptr && *v != '\0') {
    if (std::string_view(v) == "flight") {
      o.sigusr2_flight_dump = true;
      if (o.sigusr2_duration_ms > 0) {
        log("OPSCOPE_SIGUSR2=\"flight\" and OPSCOPE_SIGUSR2_DURATION_MS=\"" +
            std::to_string(o.sigusr2_duration_ms) +
            "\" both ask for SIGUSR2: it dumps the flight recorder; the duration is ignored");
        o.sigusr2_duration_ms = 0;
      }
    } else {
      log(std::string("ignored OPSCOPE_SIGUSR2=\"") + v +
          "\": the one value is \"flight\" (SIGUSR2 dumps the flight recorder; for a capture "
          "of N ms set OPSCOPE_SIGUSR2_DURATION_MS=N)");
    }
  }
  return o;
}

void enable(const ClientOptions& options) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.client) {
    throw Error("ondemand::enable(): the client is already enabled; call disable() first");
  }
  r.client = std::make_unique<Client>(options);
  internal::set_step_hook(&step_hook);
  static std::once_flag at_exit;
  std::call_once(at_exit, [] { std::atexit(stop_at_exit); });
}

void disable() {
  Registry& r = registry();
  std::unique_ptr<Client> client;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    client = std::move(r.client);
    internal::set_step_hook(nullptr);
  }
  client.reset();  // joins the thread outside the lock: step() may need it meanwhile
}

bool is_enabled() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.client != nullptr;
}

void step() noexcept {
  const std::int64_t count = g_steps.fetch_add(1, std::memory_order_relaxed) + 1;
  if (!g_iteration_armed.load(std::memory_order_acquire)) return;
  // An armed iteration capture: rare, so the lock and the Profiler work are acceptable here.
  try {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.client) r.client->on_step(count);
  } catch (const std::exception& e) {
    log(std::string("step(): ") + e.what());
  } catch (...) {
  }
}

std::int64_t step_count() noexcept { return g_steps.load(std::memory_order_relaxed); }

ClientStatus client_status() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.client) return {};
  return r.client->status();
}

}  // namespace opscope::ondemand

// --- opt-in by environment -------------------------------------------------------------------
// libopscope is a static library: an object file nobody references is not linked, and its
// static initializer never runs. src/CMakeLists.txt therefore makes every program that links
// opscope reference this symbol (-u opscope_ondemand_autostart), which pulls this file in.
extern "C" void opscope_ondemand_autostart() {}

namespace {

void autostart() {
  using namespace opscope::ondemand;
  try {
    enable();
  } catch (const std::exception& e) {
    opscope::warn(std::string("on-demand: not enabled: ") + e.what());
  }
}

// As PyTorch's kineto_client_interface.cpp: enabled at program start when KINETO_USE_DAEMON
// (or OPSCOPE_USE_DAEMON) is set; a positive init delay defers it to a detached thread.
// The client's thread may start before other files' static initializers have run: which object
// the linker puts first is not the library's to choose (CMake links unity batches last batch
// first; a static archive links this file first, for -u). So nothing the client reaches may be
// initialized dynamically: the library's globals are constant-initialized (the trace-format
// table is constexpr), and the clock's choice is made by a constructor of priority 101.
// The flight recorder of OPSCOPE_FLIGHT_RECORDER starts first, so that the client's SIGUSR2
// and OPSCOPE_FLIGHT_DUMP requests find it (flight_env.cpp: linked because this calls it).
struct Autostart {
  Autostart() {
    using namespace opscope::ondemand;
    start_flight_recorder_from_env();
    if (!autostart_requested()) {
      warn_sigusr2_without_client();
      return;
    }
    auto delay = parse_init_delay_s(std::getenv("OPSCOPE_DAEMON_INIT_DELAY_S"));
    if (!delay) delay = parse_init_delay_s(std::getenv("KINETO_DAEMON_INIT_DELAY_S"));
    if (delay && *delay > 0) {
      std::thread([s = *delay] {
        std::this_thread::sleep_for(std::chrono::seconds(s));
        autostart();
      }).detach();
    } else {
      autostart();
    }
  }
} g_autostart;

}  // namespace
