// opscope/function_profiler.h: run one call of a function under an external sampling profiler.
//
//   opscope::FunctionProfiler profiler({.frequency_hz = 4999});
//   double loss = profiler.profile(train_step, batch);      // returns what train_step returns
//   if (const auto& result = profiler.last_result(); result.profile) {
//     std::cout << result.profile->summary(10);
//     result.profile->write_collapsed_stacks("train_step.folded");
//   }
//
// profile() starts the sampler against this process, waits until the sampler says it samples,
// calls the function, stops the sampler and reads the samples back. The work function runs
// exactly once, profiled or not, unless `stop_at_error` forbids running it unprofiled:
//
//   - one run per process at a time: a call while another thread's run is under way runs the
//     function unprofiled with a warning (stop_at_error: throws instead, without calling it);
//   - the sampler cannot start (perf missing, perf_event_paranoid, permissions, a timeout):
//     the function runs unprofiled and the reason and its remedy are warned (stop_at_error:
//     throws instead, without calling it);
//   - the sampler fails after the function ran: the function's result is returned and the
//     failure warned (stop_at_error: throws; the result is lost);
//   - the function throws: the sampler is stopped, the samples are still read (last_result),
//     and the exception propagates.
//
// While the function runs, every range (opscope::RecordFunction, from any thread) is logged
// with its thread and times, and the samples taken inside a range get its name as a frame
// (SampleProfile::build), so the flame graph shows which operator the time went to. Ranges need
// no Profiler session for this; when one records at the same time, it sees the same ranges.
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "opscope/sampling.h"

namespace opscope {

struct FunctionProfilerOptions {
  // Throw (opscope::Error) when the run cannot be profiled, instead of running unprofiled.
  bool stop_at_error = false;
  // Sampling stops after this long even if the function still runs (the rest is unprofiled).
  double max_profile_duration_sec = 600;
  std::uint32_t frequency_hz = 999;  // samples per second; see SamplerRequest
  std::uint64_t sample_period = 0;   // non-zero: one sample every this many events instead
  std::string event = "cycles";      // falls back to cpu-clock without hardware counters
  bool include_kernel = false;
  std::string call_graph = "fp";  // "fp" or "dwarf"
  double timeout_wait_for_running_sec = 60;
  double timeout_wait_for_finished_sec = 60;
  // Environment variables whose values are kept with the result (unset ones are left out).
  std::vector<std::string> recorded_env_variables;
  // Free-form labels kept with the result, e.g. the build or the input set.
  std::vector<std::string> sample_tags;
  std::size_t stack_max_len = 127;
  // Log ranges during the run and add them as frames. Costs each range an observer call.
  bool correlate_ranges = true;
  // The sampler; null means perf_sampler().
  std::shared_ptr<Sampler> sampler;
};

// What the last profile() call produced.
struct FunctionProfileResult {
  SamplerState state = SamplerState::kIdle;  // kFinished when `profile` holds the samples
  std::string error;                          // why the run failed or was not profiled
  bool profiled = false;                      // false: the function ran unprofiled
  std::chrono::nanoseconds work_duration{0};  // wall time of the work function
  bool sampling_cut_short = false;            // max_profile_duration_sec ended sampling early
  std::optional<SampleProfile> profile;       // the samples, when state == kFinished
  std::map<std::string, std::string> env;     // recorded_env_variables that were set
  std::vector<std::string> tags;              // sample_tags
  std::string sampler_output;                 // what the sampler printed
};

namespace internal {
class FunctionProfilerRun;
// Defined where FunctionProfilerRun is complete, so profile() can be instantiated without it.
struct FunctionProfilerRunDeleter {
  void operator()(FunctionProfilerRun* run) const noexcept;
};
using FunctionProfilerRunPtr = std::unique_ptr<FunctionProfilerRun, FunctionProfilerRunDeleter>;
}  // namespace internal

class FunctionProfiler {
 public:
  // Throws opscope::Error for invalid options (naming the option, its value and what is
  // allowed).
  explicit FunctionProfiler(FunctionProfilerOptions options = {});
  ~FunctionProfiler();
  FunctionProfiler(const FunctionProfiler&) = delete;
  FunctionProfiler& operator=(const FunctionProfiler&) = delete;

  // Calls fn(args...) under the sampler and returns its result (see the top of this file).
  template <class F, class... Args>
  std::invoke_result_t<F, Args...> profile(F&& fn, Args&&... args);

  // The state of the run under way, or of the last one.
  SamplerState state() const;
  // The last profile() call's outcome. Read it on the thread that called profile(), after it
  // returned.
  const FunctionProfileResult& last_result() const { return result_; }
  const FunctionProfilerOptions& options() const { return options_; }

 private:
  friend class internal::FunctionProfilerRun;
  // Starts a run; returns null when fn must run unprofiled. Throws under stop_at_error.
  internal::FunctionProfilerRunPtr begin();
  // Ends a run after fn returned (threw == false) or threw. Throws under stop_at_error when
  // fn returned and the samples could not be read.
  void end(internal::FunctionProfilerRunPtr run, bool threw);

  FunctionProfilerOptions options_;
  FunctionProfileResult result_;
  std::atomic<SamplerState> state_{SamplerState::kIdle};
};

template <class F, class... Args>
std::invoke_result_t<F, Args...> FunctionProfiler::profile(F&& fn, Args&&... args) {
  using Result = std::invoke_result_t<F, Args...>;
  internal::FunctionProfilerRunPtr run = begin();
  if (!run) return std::invoke(std::forward<F>(fn), std::forward<Args>(args)...);
  if constexpr (std::is_void_v<Result>) {
    try {
      std::invoke(std::forward<F>(fn), std::forward<Args>(args)...);
    } catch (...) {
      end(std::move(run), /*threw=*/true);
      throw;
    }
    end(std::move(run), /*threw=*/false);
  } else {
    std::optional<std::conditional_t<std::is_reference_v<Result>,
                                     std::reference_wrapper<std::remove_reference_t<Result>>,
                                     Result>>
        value;
    try {
      value.emplace(std::invoke(std::forward<F>(fn), std::forward<Args>(args)...));
    } catch (...) {
      end(std::move(run), /*threw=*/true);
      throw;
    }
    end(std::move(run), /*threw=*/false);
    if constexpr (std::is_reference_v<Result>) {
      return static_cast<Result>(value->get());
    } else {
      return std::move(*value);
    }
  }
}

// Wraps `fn` so that each call runs under `profiler` (the seed's decorator):
//
//   auto step = opscope::profiled(train_step, profiler);
//   step(batch);                      // == profiler->profile(train_step, batch)
//
// The profiler is shared, so its last_result() stays readable after the calls.
template <class F>
auto profiled(F fn, std::shared_ptr<FunctionProfiler> profiler) {
  return [fn = std::move(fn), profiler = std::move(profiler)](auto&&... args) -> decltype(auto) {
    return profiler->profile(fn, std::forward<decltype(args)>(args)...);
  };
}
// The same with a FunctionProfiler of its own, built from `options`.
template <class F>
auto profiled(F fn, FunctionProfilerOptions options = {}) {
  return profiled(std::move(fn), std::make_shared<FunctionProfiler>(std::move(options)));
}

}  // namespace opscope
