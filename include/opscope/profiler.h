// opscope/profiler.h: profiling sessions, the torch.profiler.profile shape in C++.
//
//   opscope::Profiler prof({
//       .schedule = opscope::schedule({.wait = 1, .warmup = 1, .active = 2}),
//       .on_trace_ready = opscope::tensorboard_trace_handler("./log"),
//   });
//   prof.start();
//   for (int i = 0; i < 8; ++i) { train_step(); prof.step(); }
//   prof.stop();
//   std::cout << prof.key_averages().table({.sort_by = "self_cpu_time_total"});
//
// With a schedule, every step is wrapped in a "ProfilerStep#N" range (without one, as in
// torch.profiler, steps are only counted). Recording windows follow the schedule;
// when a window ends with a RECORD_AND_SAVE step, on_trace_ready is called with the profiler,
// whose result() is then that window. Control-plane misuse throws opscope::Error.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "opscope/internal/requires_cxx20.h"
#include "opscope/key_averages.h"
#include "opscope/lenses.h"
// A program that profiles records ranges: the range header comes with the Profiler (result.h,
// which readers of traces include, does not bring it).
#include "opscope/record_function.h"
#include "opscope/result.h"
#include "opscope/schedule.h"
#include "opscope/types.h"

namespace opscope {

// ActivityType (what a session records) is in opscope/types.h: the backends name it too.

// The activities this build and machine can record (kCPU always; kCUDA with a GPU backend).
// The CUDA driver and CUPTI are looked for (dlopen) once per process, on the first call of
// this or activity_unavailable_reason().
std::vector<ActivityType> supported_activities();

// Why `activity` cannot be recorded here, in a sentence naming what is missing (for kCUDA:
// no driver, the driver did not initialize, no device, no CUPTI, a build without the CUPTI
// backend); empty when it can be.
std::string activity_unavailable_reason(ActivityType activity);

class Profiler;
class ExecutionTraceObserver;  // opscope/execution_trace.h

struct ExperimentalConfig {
  // Most bytes of event buffer a window may use across all threads, however many threads come
  // and go. When reached, further events are dropped and counted (SessionStats::events_dropped,
  // trace metadata); a thread that starts recording past it gets no buffer at all and only
  // counts its drops.
  std::uint64_t buffer_limit_bytes = 1ull << 30;
  // Record every thread (true, the default) or only the starting thread and the threads that
  // carry its ThreadLocalState (see opscope/thread_local_state.h).
  bool record_all_threads = true;
  // torch's _ExperimentalConfig(verbose=): whether the Chrome trace gives each range recorded
  // with with_stack its "Call stack" argument. False keeps traces small; stacks still reach
  // tables and export_stacks.
  bool verbose = true;
  // Times each recorded range on the GPU with CUDA events, as torch's profiler does for
  // use_cuda without Kineto (KINETO_GPU_FALLBACK) and the legacy profiler's kCUDA: the range's
  // CUDA time in tables, its GPU span in the trace (README, "GPU activity"). Costs a driver
  // call or two per range end. Where it cannot be done (cuda_event_timing_unavailable_reason())
  // it is accepted, warned about and listed as "cuda events" in SessionStats::not_recorded.
  bool cuda_event_timing = false;
};

// "" when ranges can be timed with CUDA events here (ExperimentalConfig::cuda_event_timing,
// LegacyProfilerState::kCUDA); otherwise why not, in a sentence naming what is missing.
std::string cuda_event_timing_unavailable_reason();

struct ProfilerConfig {
  std::vector<ActivityType> activities = {ActivityType::kCPU};
  // Lenses: what each range records besides its times (README, "Lenses").
  LensSet lenses = {};
  Schedule schedule = {};  // empty: record every step, with no ProfilerStep#N ranges
  std::function<void(Profiler&)> on_trace_ready = {};
  ExperimentalConfig experimental = {};
  // Started when a recording window starts and stopped when it stops, so the execution trace
  // covers the same steps as the window; cleaned up (its file finalized) when the Profiler is
  // destroyed. Register it (register_callback) before the first window.
  std::shared_ptr<ExecutionTraceObserver> execution_trace_observer = {};
  // What errors call this profiler: another one that cannot start while this one records is
  // told "an opscope::Profiler is already recording". The Python package names its
  // opscope.profiler.profile, the on-demand client its capture.
  std::string name = "an opscope::Profiler";
};

class Profiler {
 public:
  explicit Profiler(ProfilerConfig config = {});
  // Stops the profiler if it is running (as stop(), but a failure only warns).
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Starts the schedule at step 0. Throws when already started, or when another Profiler in
  // this process is recording.
  void start();
  // Ends the current step and the schedule (a last on_trace_ready if a window was recording).
  // Throws when not started.
  void stop();
  // Ends step step_num() and begins the next. Throws when not started.
  void step();
  std::int64_t step_num() const;
  ProfilerAction current_action() const;
  bool is_started() const;

  // The last finished recording window. Throws when no window has finished yet.
  const ProfilerResult& result() const;
  std::shared_ptr<const ProfilerResult> shared_result() const;
  const std::vector<Event>& events() const { return result().events(); }
  KeyAverages key_averages(bool group_by_input_shape = false, int group_by_stack_n = 0) const;
  // Writes result() as a Chrome trace (gzip when `path` ends in ".gz"). A failed export
  // throws and leaves the result intact, so it can be exported again elsewhere.
  void export_chrome_trace(const std::string& path) const;
  // Writes result()'s call stacks in the collapsed format flame-graph tools read (see
  // opscope/export.h). Needs with_stack.
  void export_stacks(const std::string& path,
                     const std::string& metric = "self_cpu_time_total") const;
  // Writes result()'s memory timeline for `device` ("cpu", "cuda:0"); the format follows the
  // suffix: .html, .json, .json.gz, .raw.json.gz. Needs record_shapes, profile_memory and
  // with_stack, as in PyTorch.
  void export_memory_timeline(const std::string& path, const std::string& device = "cpu") const;
  SessionStats stats() const { return result().stats(); }

  // Adds a string metadata entry to the window being recorded (or to the next one when none
  // is recording).
  void add_metadata(const std::string& key, const std::string& value);
  // As add_metadata, with a JSON value. Throws when `json` is not valid JSON.
  void add_metadata_json(const std::string& key, const std::string& json);
  // Metadata added to every window this profiler records. Throws when `json` is not valid.
  void preset_metadata_json(const std::string& key, const std::string& json);

  const ProfilerConfig& config() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The process's distributed setup as a JSON object, PyTorch's
// {"backend", "rank", "world_size", "pg_count", "pg_config", "nccl_version"}; opscope does not
// discover it, the program states it. While set, every recording window gets the metadata
// "distributedInfo" with this value, and ExecutionTraceObserver::start() records a
// "## process_group:init ##" range holding its "pg_config" (or, without one, all of it).
// Throws opscope::Error when `json` is not valid JSON; an empty string clears it. Thread-safe.
void set_distributed_info(const std::string& json);
// What set_distributed_info() set; empty when nothing is.
std::string distributed_info();

// Starts a profiler for its lifetime: start() at construction, stop() at destruction (a
// failure there is sent to the warning handler, never thrown).
class ProfilerScope {
 public:
  explicit ProfilerScope(Profiler& profiler) : profiler_(profiler) { profiler_.start(); }
  ~ProfilerScope();
  ProfilerScope(const ProfilerScope&) = delete;
  ProfilerScope& operator=(const ProfilerScope&) = delete;

 private:
  Profiler& profiler_;
};

// An on_trace_ready handler that writes each window to
// `<dir_name>/<worker_name>.<time_ns>.pt.trace.json[.gz]`, creating the directory when needed.
// `worker_name` defaults to "<hostname>_<pid>". Throws opscope::Error when the directory
// cannot be created or written.
std::function<void(Profiler&)> tensorboard_trace_handler(std::string dir_name,
                                                         std::string worker_name = "",
                                                         bool use_gzip = false);

}  // namespace opscope
