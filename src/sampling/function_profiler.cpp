#include "opscope/function_profiler.h"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "opscope/error.h"
#include "sampling/range_log.h"

namespace opscope {
namespace internal {

// One profiled call: the sampler session, the range log, and the watchdog that ends sampling
// after max_profile_duration_sec. The watchdog and end() both stop the session, under `mutex`.
class FunctionProfilerRun {
 public:
  std::unique_ptr<SamplerSession> session;
  std::unique_ptr<sampling::RangeLog> ranges;
  std::chrono::steady_clock::time_point work_start;

  std::mutex mutex;
  std::condition_variable wake;
  bool work_done = false;
  bool cut_short = false;
  std::string watchdog_error;  // the watchdog's stop failed
  std::thread watchdog;
};

void FunctionProfilerRunDeleter::operator()(FunctionProfilerRun* run) const noexcept {
  delete run;
}

}  // namespace internal

namespace {

// One run per process: two samplers attached to one process at once would each see the other's
// overhead, and perf's control FIFOs and files are per run. Set by the run that profiles.
std::atomic<bool> g_run_under_way{false};

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(seconds * 1000.0)));
}

void check_seconds(const char* option, double value) {
  // 1e6 s (11 days) bounds the conversion to milliseconds and catches unit mistakes.
  if (!std::isfinite(value) || value <= 0 || value > 1e6) {
    throw Error(fmt::format("FunctionProfiler: {} = {} is not allowed: give seconds in (0, 1e6]",
                            option, value));
  }
}

}  // namespace

FunctionProfiler::FunctionProfiler(FunctionProfilerOptions options) : options_(std::move(options)) {
  check_seconds("max_profile_duration_sec", options_.max_profile_duration_sec);
  check_seconds("timeout_wait_for_running_sec", options_.timeout_wait_for_running_sec);
  check_seconds("timeout_wait_for_finished_sec", options_.timeout_wait_for_finished_sec);
  if (options_.sample_period == 0 && (options_.frequency_hz == 0 || options_.frequency_hz > 100000)) {
    throw Error(fmt::format(
        "FunctionProfiler: frequency_hz = {} is not allowed: give 1 to 100000 samples per second, "
        "or a sample_period",
        options_.frequency_hz));
  }
  if (options_.call_graph != "fp" && options_.call_graph != "dwarf") {
    throw Error(fmt::format("FunctionProfiler: call_graph = '{}' is not one of 'fp', 'dwarf'",
                            options_.call_graph));
  }
  if (options_.stack_max_len == 0 || options_.stack_max_len > 1024) {
    throw Error(fmt::format("FunctionProfiler: stack_max_len = {} is not allowed: give 1 to 1024",
                            options_.stack_max_len));
  }
  if (options_.event.empty()) {
    throw Error("FunctionProfiler: event is empty; give a perf event such as 'cycles' or 'cpu-clock'");
  }
  if (!options_.sampler) options_.sampler = perf_sampler();
}

FunctionProfiler::~FunctionProfiler() = default;

SamplerState FunctionProfiler::state() const { return state_.load(std::memory_order_acquire); }

internal::FunctionProfilerRunPtr FunctionProfiler::begin() {
  bool expected = false;
  if (!g_run_under_way.compare_exchange_strong(expected, true)) {
    // result_ belongs to the run under way (possibly this profiler's, on another thread).
    const char* message = "FunctionProfiler: another profile() run is under way in this process "
                          "(one at a time)";
    if (options_.stop_at_error) throw Error(fmt::format("{}; the function was not called", message));
    warn(fmt::format("{}; running the function unprofiled", message));
    return nullptr;
  }

  result_ = {};
  result_.tags = options_.sample_tags;
  for (const std::string& name : options_.recorded_env_variables) {
    if (const char* value = std::getenv(name.c_str())) result_.env[name] = value;
  }

  internal::FunctionProfilerRunPtr run(new internal::FunctionProfilerRun());
  try {
    SamplerRequest request;
    request.pid = static_cast<int>(getpid());
    request.event = options_.event;
    request.frequency_hz = options_.frequency_hz;
    request.period = options_.sample_period;
    request.include_kernel = options_.include_kernel;
    request.call_graph = options_.call_graph;
    request.stack_max_len = options_.stack_max_len;
    state_.store(SamplerState::kPreparing, std::memory_order_release);
    run->session = options_.sampler->start(request);
    run->session->wait_running(to_ms(options_.timeout_wait_for_running_sec));
  } catch (const std::exception& e) {
    result_.state = SamplerState::kFailed;
    result_.error = fmt::format("cannot start the {} sampler: {}", options_.sampler->name(), e.what());
    if (run->session) result_.sampler_output = run->session->output();
    run.reset();  // ends a sampler that half started
    state_.store(SamplerState::kFailed, std::memory_order_release);
    g_run_under_way.store(false);
    if (options_.stop_at_error) {
      throw Error(fmt::format("FunctionProfiler: {}\nThe function was not called (stop_at_error).",
                              result_.error));
    }
    warn(fmt::format("FunctionProfiler: {}\nRunning the function unprofiled.", result_.error));
    return nullptr;
  }
  state_.store(SamplerState::kRunning, std::memory_order_release);

  if (options_.correlate_ranges) run->ranges = std::make_unique<sampling::RangeLog>();
  internal::FunctionProfilerRun* raw = run.get();
  const auto limit = to_ms(options_.max_profile_duration_sec);
  const auto stop_timeout = to_ms(options_.timeout_wait_for_finished_sec);
  run->watchdog = std::thread([raw, limit, stop_timeout] {
    std::unique_lock lock(raw->mutex);
    if (raw->wake.wait_for(lock, limit, [raw] { return raw->work_done; })) return;
    raw->cut_short = true;
    try {
      raw->session->stop(stop_timeout);
    } catch (const std::exception& e) {
      raw->watchdog_error = e.what();
    }
  });
  run->work_start = std::chrono::steady_clock::now();
  return run;
}

void FunctionProfiler::end(internal::FunctionProfilerRunPtr run, bool threw) {
  result_.work_duration = std::chrono::steady_clock::now() - run->work_start;
  {
    std::lock_guard lock(run->mutex);
    run->work_done = true;
  }
  run->wake.notify_all();
  run->watchdog.join();
  std::vector<SampledRange> ranges;
  if (run->ranges) ranges = run->ranges->take();

  result_.sampling_cut_short = run->cut_short;
  state_.store(SamplerState::kProcessing, std::memory_order_release);
  try {
    if (!run->watchdog_error.empty()) throw Error(run->watchdog_error);
    const auto timeout = to_ms(options_.timeout_wait_for_finished_sec);
    run->session->stop(timeout);
    SampleBatch batch = run->session->samples(timeout);
    result_.profile = SampleProfile::build(batch, ranges);
    result_.state = SamplerState::kFinished;
    result_.profiled = true;
  } catch (const std::exception& e) {
    result_.state = SamplerState::kFailed;
    result_.error = fmt::format("the {} sampler failed after the function ran: {}",
                                options_.sampler->name(), e.what());
  }
  result_.sampler_output = run->session->output();
  run.reset();
  state_.store(result_.state, std::memory_order_release);
  g_run_under_way.store(false);

  if (result_.state == SamplerState::kFinished) return;
  if (options_.stop_at_error && !threw) {
    throw Error(fmt::format("FunctionProfiler: {}", result_.error));
  }
  warn(fmt::format("FunctionProfiler: {}", result_.error));
}

}  // namespace opscope
