// The Profiler: torch.profiler.profile's control flow over the session layer, with the
// analysis and export layers behind its convenience methods.
#include "opscope/profiler.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <optional>
#include <string>

#include "backend/registry.h"
#include "collect/collector.h"
#include "json/json_writer.h"
#include "opscope/error.h"
#include "opscope/execution_trace.h"
#include "opscope/export.h"
#include "opscope/record_function.h"
#include "profiler/step_hook.h"
#include "session/recorder.h"
#include "session/step_driver.h"

namespace opscope {

namespace internal {
namespace {
std::atomic<StepHook> g_step_hook{nullptr};
}  // namespace
void set_step_hook(StepHook hook) noexcept { g_step_hook.store(hook, std::memory_order_release); }
}  // namespace internal

namespace {

std::string quote_json(std::string_view s) {
  internal::JsonWriter w;
  w.string(s);
  return w.str();
}

// Throws when a metadata value is not one valid JSON value; the message names the call, the
// key, the parser's complaint (with its byte offset) and the value.
void require_json(const char* call, const std::string& key, const std::string& json) {
  std::string error;
  if (!is_valid_json(json, &error)) {
    throw Error(std::string(call) + ": the value for key '" + key + "' is not valid JSON (" +
                error + "): " + json);
  }
}

// What a config asks for that this build does not record.
std::vector<std::string> unrecorded(const ProfilerConfig& c) {
  std::vector<std::string> out;
  for (ActivityType a : c.activities) {
    if (a == ActivityType::kCUDA && !activity_unavailable_reason(a).empty()) {
      out.emplace_back("cuda");
    }
  }
  if (c.experimental.cuda_event_timing && !cuda_event_timing_unavailable_reason().empty()) {
    out.emplace_back("cuda events");
  }
  return out;
}

struct DistributedInfo {
  std::mutex mutex;
  std::string json;
};
DistributedInfo& distributed() {
  static DistributedInfo info;
  return info;
}

}  // namespace

void set_distributed_info(const std::string& json) {
  std::string error;
  if (!json.empty() && !is_valid_json(json, &error)) {
    throw Error("set_distributed_info: the value is not valid JSON (" + error + "): " + json);
  }
  DistributedInfo& d = distributed();
  std::lock_guard<std::mutex> lock(d.mutex);
  d.json = json;
}

std::string distributed_info() {
  DistributedInfo& d = distributed();
  std::lock_guard<std::mutex> lock(d.mutex);
  return d.json;
}

std::vector<ActivityType> supported_activities() {
  std::vector<ActivityType> out;
  for (const backend::BackendEntry* e : backend::backend_entries()) {
    if (e->times_ranges || std::find(out.begin(), out.end(), e->activity) != out.end()) continue;
    if (backend::activity_unavailable_reason(e->activity).empty()) out.push_back(e->activity);
  }
  return out;
}

std::string activity_unavailable_reason(ActivityType activity) {
  return backend::activity_unavailable_reason(activity);
}

std::string cuda_event_timing_unavailable_reason() {
  return backend::range_timing_unavailable_reason(ActivityType::kCUDA);
}

struct Profiler::Impl {
  ProfilerConfig config;
  Schedule schedule;
  std::vector<std::string> not_recorded;
  session::Recorder recorder;
  std::shared_ptr<const ProfilerResult> result;
  std::optional<RecordFunction> step_range;
  std::vector<std::pair<std::string, std::string>> preset_metadata;
  std::vector<std::pair<std::string, std::string>> metadata;  // current or next window
  std::int64_t step_num = 0;
  ProfilerAction action = ProfilerAction::kNone;
  bool started = false;
  bool steps_taken = false;
  bool trace_ready_fired = false;
  // As torch.profiler: steps are ranges only when a schedule was given.
  bool record_steps = false;

  void begin_step_range() {
    if (!record_steps) return;
    step_range.emplace("ProfilerStep#" + std::to_string(step_num), RecordScope::kUserScope);
  }
  void end_step_range() {
    if (step_range) step_range.reset();
  }

  // Runs the actions of one transition. Every action runs even when an earlier one threw (an
  // on_trace_ready that fails to export must not leave recording half-switched); the first
  // error is rethrown at the end.
  void run(Profiler& self, ProfilerAction prev, std::optional<ProfilerAction> current) {
    const session::Transition t = session::transition(prev, current);
    if (!t.warning.empty()) warn(t.warning);
    std::exception_ptr first;
    for (session::StepAction a : t.actions) {
      try {
        perform(self, a);
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }

  // Moves the schedule from `prev` to `action` and opens the range of step `step_num`. The
  // step range opens even when a transition action threw, so the profiler stays usable.
  void enter_step(Profiler& self, ProfilerAction prev) {
    try {
      run(self, prev, action);
    } catch (...) {
      begin_step_range();
      throw;
    }
    begin_step_range();
  }

  // The window the config asks for. What cannot be recorded here is left to the registry,
  // which makes no backend for it, and listed in not_recorded.
  session::WindowOptions window_options() const {
    session::WindowOptions w;
    w.request.activities = config.activities;
    w.request.epoch.buffer_limit_bytes = config.experimental.buffer_limit_bytes;
    w.request.epoch.record_all_threads = config.experimental.record_all_threads;
    w.request.lenses = config.lenses;
    if (config.experimental.cuda_event_timing) {
      // The ranges the window records: every thread's, or its members'.
      if (config.experimental.record_all_threads) {
        w.request.timed_range_threads = [] { return true; };
      } else {
        w.request.timed_range_threads = [] { return collect::thread_membership() != 0; };
      }
    }
    w.not_recorded = not_recorded;
    w.trace_call_stacks = config.experimental.verbose;
    return w;
  }

  void perform(Profiler& self, session::StepAction a) {
    switch (a) {
      case session::StepAction::kPrepare:
        // The window's backends are made and prepared now (a GPU backend loads and initializes
        // its library here, as Kineto does at warm-up), so that kStart only starts them.
        recorder.prepare_window(window_options());
        break;
      case session::StepAction::kStart: {
        // Before the window, as profiler.py's start_trace does.
        if (config.execution_trace_observer) config.execution_trace_observer->start();
        if (std::string info = distributed_info(); !info.empty()) {
          metadata.emplace_back("distributedInfo", std::move(info));
        }
        recorder.start_window(window_options());
        break;
      }
      case session::StepAction::kStop: {
        if (config.execution_trace_observer) config.execution_trace_observer->stop();
        auto md = preset_metadata;
        md.insert(md.end(), metadata.begin(), metadata.end());
        metadata.clear();
        result = recorder.stop_window(std::move(md));
        break;
      }
      case session::StepAction::kTraceReady:
        trace_ready_fired = true;
        if (config.on_trace_ready) config.on_trace_ready(self);
        break;
    }
  }
};

Profiler::Profiler(ProfilerConfig config) : impl_(std::make_unique<Impl>()) {
  if (config.activities.empty()) config.activities = supported_activities();
  impl_->record_steps = static_cast<bool>(config.schedule);
  impl_->schedule = config.schedule ? config.schedule : default_schedule();
  impl_->not_recorded = unrecorded(config);
  impl_->config = std::move(config);
}

Profiler::~Profiler() {
  if (impl_->started) {
    try {
      stop();
    } catch (const std::exception& e) {
      warn(std::string("Profiler destroyed while running; stopping it failed: ") + e.what());
    }
  }
  // profiler.py's __exit__: the execution trace is finalized with the profiler.
  if (const auto& et = impl_->config.execution_trace_observer) {
    try {
      et->cleanup();
    } catch (const std::exception& e) {
      warn(std::string("Profiler destroyed; finalizing its execution trace failed: ") + e.what());
    }
  }
}

void Profiler::start() {
  Impl& m = *impl_;
  if (m.started) {
    throw Error("Profiler::start()", "the profiler is already started; call stop() first");
  }
  session::Recorder::claim(this, m.config.name.c_str());
  if (!m.not_recorded.empty()) {
    std::string names;
    for (const auto& n : m.not_recorded) {
      names += (names.empty() ? "" : "; ") + n;
      if (n == "cuda") names += " (" + activity_unavailable_reason(ActivityType::kCUDA) + ")";
      if (n == "cuda events") names += " (" + cuda_event_timing_unavailable_reason() + ")";
    }
    warn("accepted but not recorded: " + names +
         " (listed as not_recorded in the session's stats and as \"opscope_not_recorded\" in "
         "the trace)");
  }
  m.started = true;
  m.steps_taken = false;
  m.trace_ready_fired = false;
  m.step_num = 0;
  m.action = m.schedule(0);
  m.enter_step(*this, ProfilerAction::kNone);
}

void Profiler::step() {
  Impl& m = *impl_;
  if (!m.started) {
    throw Error("Profiler::step()", "the profiler is not started; call start() first");
  }
  m.end_step_range();
  const ProfilerAction prev = m.action;
  ++m.step_num;
  m.steps_taken = true;
  m.action = m.schedule(m.step_num);
  m.enter_step(*this, prev);
  if (const auto hook = internal::g_step_hook.load(std::memory_order_acquire)) hook();
}

void Profiler::stop() {
  Impl& m = *impl_;
  if (!m.started) {
    throw Error("Profiler::stop()", "the profiler is not started; call start() first");
  }
  m.end_step_range();
  m.started = false;
  std::exception_ptr error;
  try {
    m.run(*this, m.action, std::nullopt);
  } catch (...) {
    error = std::current_exception();
  }
  session::Recorder::release(this);
  if (m.config.on_trace_ready && !m.trace_ready_fired) {
    warn(m.steps_taken
             ? "on_trace_ready was never called: after " + std::to_string(m.step_num) +
                   " step(s) the schedule never completed a RECORD_AND_SAVE step"
             : std::string("on_trace_ready was never called: step() was never called, so the "
                           "schedule never reached a RECORD_AND_SAVE step; call step() at the "
                           "end of each iteration"));
  }
  if (error) std::rethrow_exception(error);
}

std::int64_t Profiler::step_num() const { return impl_->step_num; }
ProfilerAction Profiler::current_action() const { return impl_->action; }
bool Profiler::is_started() const { return impl_->started; }
const ProfilerConfig& Profiler::config() const { return impl_->config; }

const ProfilerResult& Profiler::result() const { return *shared_result(); }

std::shared_ptr<const ProfilerResult> Profiler::shared_result() const {
  if (!impl_->result) {
    throw Error(
        "Profiler::result()",
        "no recording window has finished yet (the schedule records "
        "between its RECORD steps; results exist after stop() or on_trace_ready)");
  }
  return impl_->result;
}

KeyAverages Profiler::key_averages(bool group_by_input_shape, int group_by_stack_n) const {
  return opscope::key_averages(result(), group_by_input_shape, group_by_stack_n);
}

void Profiler::export_chrome_trace(const std::string& path) const {
  opscope::export_trace(result(), path, "chrome");
}

void Profiler::export_stacks(const std::string& path, const std::string& metric) const {
  opscope::export_stacks(result(), path, metric);
}

void Profiler::export_memory_timeline(const std::string& path, const std::string& device) const {
  opscope::export_memory_timeline(result(), path, device);
}

void Profiler::add_metadata(const std::string& key, const std::string& value) {
  impl_->metadata.emplace_back(key, quote_json(value));
}

void Profiler::add_metadata_json(const std::string& key, const std::string& json) {
  require_json("add_metadata_json", key, json);
  impl_->metadata.emplace_back(key, json);
}

void Profiler::preset_metadata_json(const std::string& key, const std::string& json) {
  require_json("preset_metadata_json", key, json);
  impl_->preset_metadata.emplace_back(key, json);
}

ProfilerScope::~ProfilerScope() {
  try {
    profiler_.stop();
  } catch (const std::exception& e) {
    warn(std::string("ProfilerScope: stopping the profiler failed: ") + e.what());
  }
}

}  // namespace opscope
