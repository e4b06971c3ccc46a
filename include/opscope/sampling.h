// opscope/sampling.h: external sampling profilers and what their samples add up to.
//
// A Sampler runs an external sampling profiler (perf by default) against a process; a
// SamplerSession is one such run. FunctionProfiler (opscope/function_profiler.h) drives a
// session around one call of a function in this process; `opscope sample` drives one around a
// whole command. Another sampler is added by implementing Sampler and SamplerSession.
//
//   auto session = opscope::perf_sampler()->start({.pid = pid});
//   session->wait_running(std::chrono::seconds(60));
//   ...                                   // the work
//   session->stop(std::chrono::seconds(60));
//   opscope::SampleProfile profile = opscope::SampleProfile::build(session->samples(deadline));
//   std::cout << profile.summary();
//
// Every failure throws opscope::Error with a message that says what failed, includes the
// sampler's own output, and, where there is one, the remedy.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace opscope {

// The states of one sampler run, as the sampler itself reports them.
enum class SamplerState : std::uint8_t {
  kIdle,        // no run yet
  kPreparing,   // the sampler is starting; nothing is sampled yet
  kRunning,     // the sampler said it samples
  kProcessing,  // sampling stopped; the samples are being read back
  kFinished,    // the samples were read
  kFailed,      // see the error
};
std::string_view to_string(SamplerState state);

// What to sample and how.
struct SamplerRequest {
  int pid = 0;  // the process to sample, all its threads (those it starts later too)
  // Event to sample on (perf's names: "cycles", "instructions", "cpu-clock", "task-clock",
  // ...). Where a hardware event cannot be opened (virtual machines often have no PMU), the
  // session falls back to "cpu-clock" and says so in SampleBatch::fallback_reason.
  std::string event = "cycles";
  // Samples per second (perf -F), or, when `period` is non-zero, one sample every `period`
  // events (perf -c).
  std::uint32_t frequency_hz = 999;
  std::uint64_t period = 0;
  bool include_kernel = false;     // user-space frames only by default (perf_event_paranoid 2)
  std::string call_graph = "fp";   // "fp" (frame pointers) or "dwarf" (unwind tables; heavier)
  std::size_t stack_max_len = 127;  // frames kept per sample, the innermost
};

// One sample: where a thread was, innermost frame first.
struct Sample {
  std::int32_t tid = 0;
  std::uint64_t time_ns = 0;  // CLOCK_MONOTONIC, the clock of opscope's range log too
  std::uint64_t weight = 1;   // events the sample stands for (perf's period)
  std::vector<std::string> frames;
};

struct SampleBatch {
  std::string event;            // the event actually sampled
  std::string fallback_reason;  // non-empty when `event` is not the one asked for, and why
  std::vector<Sample> samples;
};

// One run of a sampler against one process. Methods are called in this order, from one thread
// at a time; stop() may come from another thread than the one that started the run (a
// watchdog), and is then serialized by the caller.
class SamplerSession {
 public:
  virtual ~SamplerSession() = default;

  virtual SamplerState state() const = 0;
  // Blocks until the sampler reports that it samples (kRunning). Throws, after ending the
  // sampler, when it fails first or does not report within `timeout` (state kFailed).
  virtual void wait_running(std::chrono::milliseconds timeout) = 0;
  // Ends sampling (kProcessing). Throws when the sampler fails to end within `timeout` (it is
  // then killed, state kFailed). Does nothing when already stopped.
  virtual void stop(std::chrono::milliseconds timeout) = 0;
  // Reads the samples back (kFinished), within `timeout`, or throws (kFailed).
  virtual SampleBatch samples(std::chrono::milliseconds timeout) = 0;
  // Everything the sampler printed so far, for messages and logs.
  virtual std::string output() const = 0;
};

// A sampling profiler that can be started against a process.
class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::string name() const = 0;
  // Starts a run (kPreparing). Throws when the sampler cannot be started at all (not
  // installed, not executable), naming it and the remedy.
  virtual std::unique_ptr<SamplerSession> start(const SamplerRequest& request) = 0;
};

// The built-in sampler: Linux `perf record`, then `perf script` to read the samples back.
// `perf_command` is the perf executable, looked up in PATH unless it holds a '/'; when empty,
// $OPSCOPE_PERF, else "perf". It runs `perf record --control` with events disabled, so the
// run is kRunning exactly when perf acknowledges enabling them.
std::shared_ptr<Sampler> perf_sampler(std::string perf_command = "");

// A range (RecordFunction) that was open on a sampled thread; the sampling layer's range log
// records them while a FunctionProfiler runs.
struct SampledRange {
  std::int32_t tid = 0;
  std::uint64_t begin_ns = 0;  // CLOCK_MONOTONIC
  std::uint64_t end_ns = 0;    // UINT64_MAX while still open when the log was taken
  std::string name;
};

struct FunctionSamples {
  std::string name;
  std::uint64_t self_samples = 0;   // samples whose innermost frame is this function
  std::uint64_t total_samples = 0;  // samples with this function anywhere in the stack
};

// What a batch of samples adds up to.
class SampleProfile {
 public:
  // Sums `batch`. Samples taken while ranges from `ranges` were open on their thread get those
  // ranges' names as their outermost frames (outer range first), so a flame graph groups the
  // time under the operator it went to.
  static SampleProfile build(const SampleBatch& batch, const std::vector<SampledRange>& ranges = {});

  std::uint64_t total_samples() const { return total_samples_; }
  const std::string& event() const { return event_; }
  const std::string& fallback_reason() const { return fallback_reason_; }
  // The `n` functions with the most self (or total) samples, most first; ties by name.
  std::vector<FunctionSamples> top_by_self(std::size_t n = 20) const;
  std::vector<FunctionSamples> top_by_total(std::size_t n = 20) const;
  // Samples per collapsed stack (frames root first, joined by ';'), sorted by stack.
  const std::map<std::string, std::uint64_t>& stacks() const { return stacks_; }
  // The collapsed-stacks text export_stacks writes (one "stack count" line per stack), read by
  // flamegraph.pl and speedscope; the value is a sample count.
  std::string collapsed_stacks() const;
  // Writes collapsed_stacks() to `path` (gzip when it ends in ".gz"), under a temporary name
  // renamed when complete. Throws opscope::Error naming the path and the reason.
  void write_collapsed_stacks(const std::string& path) const;
  // A text table of the top `n` functions by total samples (those with the function anywhere
  // in the stack: its callees' included), with their self samples, and their shares of all.
  std::string summary(std::size_t n = 20) const;

 private:
  std::string event_;
  std::string fallback_reason_;
  std::uint64_t total_samples_ = 0;
  std::map<std::string, FunctionSamples> functions_;
  std::map<std::string, std::uint64_t> stacks_;
};

}  // namespace opscope
