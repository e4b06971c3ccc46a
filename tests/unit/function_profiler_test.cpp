// The sampling profiler: perf script parsing, what samples add up to, FunctionProfiler's run
// semantics against scripted samplers, and real perf runs (skipped, with the reason, where perf
// cannot sample).
#include <sys/stat.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "opscope/function_profiler.h"
#include "opscope/profiler.h"
#include "opscope/record_function.h"
#include "sampling/perf_script.h"
#include "sampling/range_log.h"
#include "support/test_support.h"

namespace opscope {
namespace function_profiler_test {

using testing::error_of;
using testing::TempDir;
using testing::WarningCapture;

// --- perf script -------------------------------------------------------------------------------

TEST(PerfScript, ParsesSamplesFramesAndEvent) {
  const char* text =
      "31708 12703.804876195:    1001001 cpu-clock:ppp: \n"
      "\t           1462a handle_amd (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)\n"
      "\t               0 [unknown] ([unknown])\n"
      "\n"
      "   42 12703.900000001:          7 cpu-clock:ppp: \n"
      "\t            11c9 ns::f(std::vector<int, std::allocator<int> > const&) (/opt/a.out)\n"
      "\t            1234 [unknown] (/opt/lib/libwork.so.1)\n"
      "\t            5678 main (/opt/a.out)\n"
      "\n";
  SampleBatch batch;
  sampling::parse_perf_script(text, 127, batch);
  ASSERT_EQ(batch.samples.size(), 2u);
  EXPECT_EQ(batch.event, "cpu-clock");
  EXPECT_EQ(batch.samples[0].tid, 31708);
  EXPECT_EQ(batch.samples[0].time_ns, 12703804876195ull);
  EXPECT_EQ(batch.samples[0].weight, 1001001u);
  EXPECT_EQ(batch.samples[0].frames,
            (std::vector<std::string>{"handle_amd", "[unknown]"}));
  EXPECT_EQ(batch.samples[1].tid, 42);
  EXPECT_EQ(batch.samples[1].time_ns, 12703900000001ull);
  EXPECT_EQ(batch.samples[1].frames,
            (std::vector<std::string>{"ns::f(std::vector<int, std::allocator<int> > const&)",
                                      "[libwork.so.1]", "main"}));
}

TEST(PerfScript, KeepsTheInnermostFramesAndReadsOneFrameHeaders) {
  const char* text =
      "7 1.5: 100 cycles:u: \n"
      "\t1 a (x)\n\t2 b (x)\n\t3 c (x)\n"
      "\n"
      "8 2.000000002: 100 cycles:u:  4 leaf (/bin/x)\n";
  SampleBatch batch;
  sampling::parse_perf_script(text, 2, batch);
  ASSERT_EQ(batch.samples.size(), 2u);
  EXPECT_EQ(batch.event, "cycles");
  EXPECT_EQ(batch.samples[0].time_ns, 1'500'000'000ull);  // fewer than nine decimals scale up
  EXPECT_EQ(batch.samples[0].frames, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(batch.samples[1].frames, (std::vector<std::string>{"leaf"}));
}

TEST(PerfScript, MalformedLinesNameTheLine) {
  SampleBatch batch;
  EXPECT_EQ(error_of([&] { sampling::parse_perf_script("\tdead beef (x)\n", 8, batch); }),
            "perf script output, line 1: a frame line outside a sample in '\tdead beef (x)'");
  EXPECT_EQ(error_of([&] { sampling::parse_perf_script("7 1.5 100 cycles:\n", 8, batch); }),
            "perf script output, line 1: no time in '7 1.5 100 cycles:'");
  EXPECT_EQ(error_of([&] { sampling::parse_perf_script("7 1.5: 100 cycles:\n\tzz f (x)\n", 8, batch); }),
            "perf script output, line 2: no frame address in '\tzz f (x)'");
  EXPECT_EQ(error_of([&] { sampling::parse_perf_script("x 1.5: 100 cycles:\n", 8, batch); }),
            "perf script output, line 1: no thread id in 'x 1.5: 100 cycles:'");
}

TEST(PerfScript, FrameNames) {
  EXPECT_EQ(sampling::frame_name("main", "/bin/x"), "main");
  EXPECT_EQ(sampling::frame_name("[unknown]", "/usr/lib/libc.so.6"), "[libc.so.6]");
  EXPECT_EQ(sampling::frame_name("[unknown]", "[kernel.kallsyms]"), "[kernel.kallsyms]");
  EXPECT_EQ(sampling::frame_name("[unknown]", "[unknown]"), "[unknown]");
  EXPECT_EQ(sampling::frame_name("", ""), "[unknown]");
}

// --- SampleProfile -----------------------------------------------------------------------------

Sample sample_at(std::int32_t tid, std::uint64_t t, std::vector<std::string> innermost_first) {
  return Sample{tid, t, 1, std::move(innermost_first)};
}

TEST(SampleProfile, CountsSelfAndTotalOncePerSample) {
  SampleBatch batch;
  batch.event = "cpu-clock";
  batch.samples = {sample_at(1, 10, {"leaf", "mid", "main"}),
                   sample_at(1, 20, {"leaf", "mid", "main"}),
                   sample_at(1, 30, {"mid", "main"}),
                   sample_at(1, 40, {"rec", "rec", "rec", "main"})};
  SampleProfile profile = SampleProfile::build(batch);
  EXPECT_EQ(profile.total_samples(), 4u);
  auto self = profile.top_by_self(10);
  ASSERT_EQ(self.size(), 3u);
  EXPECT_EQ(self[0].name, "leaf");
  EXPECT_EQ(self[0].self_samples, 2u);
  EXPECT_EQ(self[1].name, "mid");  // ties break by name: mid < rec
  EXPECT_EQ(self[2].name, "rec");
  EXPECT_EQ(self[2].total_samples, 1u);  // three frames, one sample
  auto total = profile.top_by_total(2);
  ASSERT_EQ(total.size(), 2u);
  EXPECT_EQ(total[0].name, "main");
  EXPECT_EQ(total[0].total_samples, 4u);
  EXPECT_EQ(total[0].self_samples, 0u);
  EXPECT_EQ(total[1].name, "mid");
  EXPECT_EQ(total[1].total_samples, 3u);
  EXPECT_EQ(profile.collapsed_stacks(),
            "main;mid 1\n"
            "main;mid;leaf 2\n"
            "main;rec;rec;rec 1\n");
}

TEST(SampleProfile, RangesOpenOnTheSampledThreadBecomeOuterFrames) {
  SampleBatch batch;
  batch.samples = {sample_at(1, 5, {"f", "main"}),     // before any range
                   sample_at(1, 15, {"f", "main"}),    // in step
                   sample_at(1, 25, {"g", "main"}),    // in step > aten::mm
                   sample_at(2, 25, {"h", "worker"}),  // other thread: its own range
                   sample_at(1, 35, {"f", "main"}),    // aten::mm ended at 30
                   sample_at(1, 50, {"f", "main"})};   // step ended at 40
  std::vector<SampledRange> ranges = {
      {1, 10, 40, "ProfilerStep#0"},
      {1, 20, 30, "aten::mm"},
      {2, 0, UINT64_MAX, "worker loop"},
  };
  SampleProfile profile = SampleProfile::build(batch, ranges);
  EXPECT_EQ(profile.collapsed_stacks(),
            "ProfilerStep#0;aten::mm;main;g 1\n"
            "ProfilerStep#0;main;f 2\n"
            "main;f 2\n"
            "worker_loop;worker;h 1\n");
  // Range frames are not functions.
  for (const FunctionSamples& row : profile.top_by_total(100)) {
    EXPECT_NE(row.name, "aten::mm");
  }
}

TEST(SampleProfile, WritesTheStackFileAndASummary) {
  SampleBatch batch;
  batch.event = "cpu-clock";
  batch.fallback_reason = "'cycles' is not available here";
  batch.samples = {sample_at(1, 1, {"hot", "main"}), sample_at(1, 2, {"hot", "main"}),
                   sample_at(1, 3, {"cold", "main"})};
  SampleProfile profile = SampleProfile::build(batch);
  TempDir dir;
  profile.write_collapsed_stacks(dir.file("stacks.folded"));
  EXPECT_EQ(testing::read_file(dir.file("stacks.folded")), profile.collapsed_stacks());
  profile.write_collapsed_stacks(dir.file("stacks.folded.gz"));
  EXPECT_EQ(testing::read_gzip_file(dir.file("stacks.folded.gz")), profile.collapsed_stacks());
  std::string summary = profile.summary(5);
  EXPECT_NE(summary.find("3 samples of 'cpu-clock' ('cycles' is not available here)"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("       2   66.7%        2   66.7%  hot"), std::string::npos) << summary;
  EXPECT_LT(summary.find("hot"), summary.find("cold"));
  // Issue 38: the callers are listed, with their inclusive samples (Total), not only the leaves.
  EXPECT_NE(summary.find("       0    0.0%        3  100.0%  main"), std::string::npos) << summary;
  EXPECT_LT(summary.find("main"), summary.find("hot"));
  std::string error = error_of([&] { profile.write_collapsed_stacks("/nonexistent-dir/x.folded"); });
  EXPECT_NE(error.find("/nonexistent-dir/x.folded"), std::string::npos) << error;
}

// --- the range log ------------------------------------------------------------------------------

TEST(RangeLog, LogsNestedRangesAndOnesThatEndOnAnotherThread) {
  sampling::RangeLog log;
  auto before = std::chrono::steady_clock::now();
  std::optional<RecordFunction> async;
  {
    OPSCOPE_RECORD_FUNCTION("outer");
    OPSCOPE_RECORD_FUNCTION("inner");
    async.emplace("async");
  }
  std::thread([&] { async.reset(); }).join();  // ends on another thread
  RecordFunction still_open("still_open");
  std::vector<SampledRange> ranges = log.take();
  still_open.end();
  auto after = std::chrono::steady_clock::now();
  ASSERT_EQ(ranges.size(), 4u);
  std::map<std::string, SampledRange> by_name;
  for (const SampledRange& r : ranges) by_name[r.name] = r;
  const auto ns = [](auto t) {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          t.time_since_epoch()).count());
  };
  const SampledRange& outer = by_name["outer"];
  const SampledRange& inner = by_name["inner"];
  EXPECT_EQ(outer.tid, sampling::current_tid());
  // CLOCK_MONOTONIC (steady_clock) ns, nested as the ranges were.
  EXPECT_GE(outer.begin_ns + 1000, ns(before));
  EXPECT_LE(outer.begin_ns, inner.begin_ns);
  EXPECT_LE(inner.end_ns, outer.end_ns);
  EXPECT_LE(outer.end_ns, ns(after) + 1000);
  EXPECT_NE(by_name["async"].end_ns, UINT64_MAX);  // found on its starting thread's log
  EXPECT_EQ(by_name["async"].tid, sampling::current_tid());
  EXPECT_EQ(by_name["still_open"].end_ns, UINT64_MAX);
}

// --- FunctionProfiler against scripted samplers ------------------------------------------------

// A sampler whose runs do what the test says, and count what was asked of them.
struct Script {
  bool fail_start = false;
  bool fail_running = false;
  bool fail_samples = false;
  std::atomic<int> starts{0};
  std::atomic<int> stops{0};
  // When set, wait_running blocks until `release` is set: a run that is "under way".
  bool hold_running = false;
  std::mutex mutex;
  std::condition_variable changed;
  bool holding = false;
  bool release = false;
};

class ScriptedSession final : public SamplerSession {
 public:
  explicit ScriptedSession(Script& script) : script_(script) {}
  SamplerState state() const override { return state_; }
  void wait_running(std::chrono::milliseconds) override {
    if (script_.hold_running) {
      std::unique_lock lock(script_.mutex);
      script_.holding = true;
      script_.changed.notify_all();
      script_.changed.wait(lock, [&] { return script_.release; });
    }
    if (script_.fail_running) {
      state_ = SamplerState::kFailed;
      throw Error("scripted sampler: did not start (its output)");
    }
    state_ = SamplerState::kRunning;
  }
  void stop(std::chrono::milliseconds) override {
    ++script_.stops;
    state_ = SamplerState::kProcessing;
  }
  SampleBatch samples(std::chrono::milliseconds) override {
    if (script_.fail_samples) {
      state_ = SamplerState::kFailed;
      throw Error("scripted sampler: lost the samples");
    }
    state_ = SamplerState::kFinished;
    SampleBatch batch;
    batch.event = "scripted";
    batch.samples = {Sample{1, 1, 1, {"work", "main"}}};
    return batch;
  }
  std::string output() const override { return "scripted output"; }

 private:
  Script& script_;
  SamplerState state_ = SamplerState::kPreparing;
};

class ScriptedSampler final : public Sampler {
 public:
  explicit ScriptedSampler(Script& script) : script_(script) {}
  std::string name() const override { return "scripted"; }
  std::unique_ptr<SamplerSession> start(const SamplerRequest&) override {
    ++script_.starts;
    if (script_.fail_start) throw Error("scripted sampler: not installed");
    return std::make_unique<ScriptedSession>(script_);
  }

 private:
  Script& script_;
};

FunctionProfilerOptions scripted(Script& script, bool stop_at_error = false) {
  FunctionProfilerOptions options;
  options.sampler = std::make_shared<ScriptedSampler>(script);
  options.stop_at_error = stop_at_error;
  return options;
}

TEST(FunctionProfiler, ReturnsTheResultAndTheSamples) {
  Script script;
  FunctionProfiler profiler(scripted(script));
  int calls = 0;
  int value = profiler.profile([&](int a, int b) { ++calls; return a * b; }, 6, 7);
  EXPECT_EQ(value, 42);
  EXPECT_EQ(calls, 1);
  const FunctionProfileResult& result = profiler.last_result();
  EXPECT_EQ(result.state, SamplerState::kFinished);
  EXPECT_TRUE(result.profiled);
  ASSERT_TRUE(result.profile);
  EXPECT_EQ(result.profile->total_samples(), 1u);
  EXPECT_EQ(result.sampler_output, "scripted output");
  EXPECT_EQ(profiler.state(), SamplerState::kFinished);
  EXPECT_EQ(script.stops.load(), 1);

  // References and move-only results come back as such.
  int target = 1;
  int& ref = profiler.profile([&]() -> int& { return target; });
  EXPECT_EQ(&ref, &target);
  auto owned = profiler.profile([] { return std::make_unique<int>(5); });
  EXPECT_EQ(*owned, 5);
  profiler.profile([&] { ++calls; });  // void
  EXPECT_EQ(calls, 2);
}

TEST(FunctionProfiler, AFailedStartRunsTheFunctionUnprofiledOrRefusesUnderStopAtError) {
  for (bool fail_start : {true, false}) {
    Script script;
    script.fail_start = fail_start;
    script.fail_running = !fail_start;
    {
      FunctionProfiler profiler(scripted(script));
      WarningCapture warnings;
      int calls = 0;
      EXPECT_EQ(profiler.profile([&] { return ++calls; }), 1);
      EXPECT_EQ(calls, 1);
      EXPECT_FALSE(profiler.last_result().profiled);
      EXPECT_EQ(profiler.last_result().state, SamplerState::kFailed);
      EXPECT_TRUE(warnings.contains("cannot start the scripted sampler: scripted sampler:"));
      EXPECT_TRUE(warnings.contains("Running the function unprofiled."));
    }
    {
      FunctionProfiler profiler(scripted(script, /*stop_at_error=*/true));
      int calls = 0;
      std::string error = error_of([&] { profiler.profile([&] { ++calls; }); });
      EXPECT_EQ(calls, 0);
      EXPECT_NE(error.find("cannot start the scripted sampler"), std::string::npos) << error;
      EXPECT_NE(error.find("The function was not called (stop_at_error)."), std::string::npos);
    }
  }
}

TEST(FunctionProfiler, SamplesLostAfterTheFunctionRan) {
  Script script;
  script.fail_samples = true;
  {
    FunctionProfiler profiler(scripted(script));
    WarningCapture warnings;
    EXPECT_EQ(profiler.profile([] { return 3; }), 3);
    EXPECT_TRUE(warnings.contains("the scripted sampler failed after the function ran"));
    EXPECT_EQ(profiler.last_result().state, SamplerState::kFailed);
  }
  {
    FunctionProfiler profiler(scripted(script, /*stop_at_error=*/true));
    int calls = 0;
    std::string error = error_of([&] { profiler.profile([&] { ++calls; }); });
    EXPECT_EQ(calls, 1);
    EXPECT_NE(error.find("lost the samples"), std::string::npos) << error;
  }
}

TEST(FunctionProfiler, AThrowingFunctionStopsTheSamplerAndPropagates) {
  Script script;
  FunctionProfiler profiler(scripted(script, /*stop_at_error=*/true));
  EXPECT_THROW(profiler.profile([]() -> int { throw std::logic_error("work failed"); }),
               std::logic_error);
  EXPECT_EQ(script.stops.load(), 1);
  EXPECT_EQ(profiler.last_result().state, SamplerState::kFinished);  // samples still read
  // The guard was released: the next run profiles.
  profiler.profile([] {});
  EXPECT_TRUE(profiler.last_result().profiled);
}

TEST(FunctionProfiler, OneRunPerProcess) {
  Script script;
  script.hold_running = true;
  auto profiler = std::make_shared<FunctionProfiler>(scripted(script));
  std::thread first([&] { profiler->profile([] {}); });
  {
    std::unique_lock lock(script.mutex);
    script.changed.wait(lock, [&] { return script.holding; });
  }
  EXPECT_EQ(profiler->state(), SamplerState::kPreparing);
  // A second call, on another profiler and on the same one, runs unprofiled with a warning ...
  Script other_script;
  FunctionProfiler other(scripted(other_script));
  {
    WarningCapture warnings;
    int calls = 0;
    EXPECT_EQ(other.profile([&] { return ++calls; }), 1);
    EXPECT_EQ(profiler->profile([&] { return ++calls; }), 2);
    EXPECT_TRUE(warnings.contains("another profile() run is under way in this process"));
    EXPECT_EQ(other_script.starts.load(), 0);
  }
  // ... or, under stop_at_error, is refused without calling the function.
  FunctionProfiler strict(scripted(other_script, /*stop_at_error=*/true));
  int strict_calls = 0;
  EXPECT_NE(error_of([&] { strict.profile([&] { ++strict_calls; }); })
                .find("the function was not called"),
            std::string::npos);
  EXPECT_EQ(strict_calls, 0);
  {
    std::lock_guard lock(script.mutex);
    script.release = true;
  }
  script.changed.notify_all();
  first.join();
  EXPECT_TRUE(profiler->last_result().profiled);
  EXPECT_EQ(script.starts.load(), 1);
}

TEST(FunctionProfiler, RecordsEnvironmentAndTags) {
  Script script;
  FunctionProfilerOptions options = scripted(script);
  ::setenv("OPSCOPE_TEST_SAMPLE_ENV", "value-1", 1);
  ::unsetenv("OPSCOPE_TEST_SAMPLE_UNSET");
  options.recorded_env_variables = {"OPSCOPE_TEST_SAMPLE_ENV", "OPSCOPE_TEST_SAMPLE_UNSET"};
  options.sample_tags = {"build:42", "set:small"};
  FunctionProfiler profiler(options);
  profiler.profile([] {});
  const FunctionProfileResult& result = profiler.last_result();
  EXPECT_EQ(result.env, (std::map<std::string, std::string>{{"OPSCOPE_TEST_SAMPLE_ENV", "value-1"}}));
  EXPECT_EQ(result.tags, (std::vector<std::string>{"build:42", "set:small"}));
}

TEST(FunctionProfiler, InvalidOptionsNameTheOption) {
  auto error_for = [](auto change) {
    FunctionProfilerOptions options;
    change(options);
    return error_of([&] { FunctionProfiler profiler(options); });
  };
  EXPECT_EQ(error_for([](auto& o) { o.max_profile_duration_sec = 0; }),
            "FunctionProfiler: max_profile_duration_sec = 0 is not allowed: give seconds in (0, 1e6]");
  EXPECT_EQ(error_for([](auto& o) { o.timeout_wait_for_running_sec = -1; }),
            "FunctionProfiler: timeout_wait_for_running_sec = -1 is not allowed: give seconds in (0, 1e6]");
  EXPECT_EQ(error_for([](auto& o) { o.frequency_hz = 0; }),
            "FunctionProfiler: frequency_hz = 0 is not allowed: give 1 to 100000 samples per "
            "second, or a sample_period");
  EXPECT_EQ(error_for([](auto& o) { o.call_graph = "lbr"; }),
            "FunctionProfiler: call_graph = 'lbr' is not one of 'fp', 'dwarf'");
  EXPECT_EQ(error_for([](auto& o) { o.stack_max_len = 0; }),
            "FunctionProfiler: stack_max_len = 0 is not allowed: give 1 to 1024");
}

TEST(FunctionProfiler, TheDecoratorProfilesEachCall) {
  Script script;
  auto profiler = std::make_shared<FunctionProfiler>(scripted(script));
  auto square = profiled([](int x) { return x * x; }, profiler);
  EXPECT_EQ(square(9), 81);
  EXPECT_EQ(square(3), 9);
  EXPECT_EQ(script.starts.load(), 2);
  EXPECT_TRUE(profiler->last_result().profiled);
}

// --- the perf sampler with commands that misbehave --------------------------------------------

// Writes an executable shell script into `dir` and returns its path.
std::string fake_perf(const TempDir& dir, const std::string& body) {
  std::string path = dir.file("fake-perf");
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  chmod(path.c_str(), 0755);
  return path;
}

TEST(PerfSampler, AFailingPerfRunsTheFunctionAndReportsItsOutput) {
  TempDir dir;
  FunctionProfilerOptions options;
  options.sampler = perf_sampler(fake_perf(dir, "echo 'perf: simulated failure' >&2; exit 3"));
  options.timeout_wait_for_running_sec = 10;
  FunctionProfiler profiler(options);
  WarningCapture warnings;
  int calls = 0;
  profiler.profile([&] { ++calls; });
  EXPECT_EQ(calls, 1);
  const std::string& error = profiler.last_result().error;
  EXPECT_NE(error.find("perf record exited with status 3 before it started sampling"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("perf: simulated failure"), std::string::npos) << error;
  EXPECT_NE(profiler.last_result().sampler_output.find("simulated failure"), std::string::npos);
  EXPECT_TRUE(warnings.contains("Running the function unprofiled."));
}

TEST(PerfSampler, APermissionFailureNamesTheRemedy) {
  TempDir dir;
  FunctionProfilerOptions options;
  options.sampler = perf_sampler(fake_perf(
      dir, "echo 'Error: Access to performance monitoring and observability operations is "
           "limited.' >&2; exit 255"));
  options.stop_at_error = true;
  FunctionProfiler profiler(options);
  std::string error = error_of([&] { profiler.profile([] {}); });
  EXPECT_NE(error.find("kernel.perf_event_paranoid is"), std::string::npos) << error;
  EXPECT_NE(error.find("sysctl -w kernel.perf_event_paranoid=2"), std::string::npos) << error;
}

TEST(PerfSampler, AMissingPerfNamesThePackage) {
  FunctionProfilerOptions options;
  options.sampler = perf_sampler("/nonexistent/perf");
  WarningCapture warnings;
  FunctionProfiler profiler(options);
  EXPECT_EQ(profiler.profile([] { return 7; }), 7);
  const std::string& error = profiler.last_result().error;
  EXPECT_NE(error.find("cannot run '/nonexistent/perf': No such file or directory"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("apt-get install linux-perf"), std::string::npos) << error;
}

TEST(PerfSampler, APerfThatNeverStartsTimesOut) {
  TempDir dir;
  FunctionProfilerOptions options;
  options.sampler = perf_sampler(fake_perf(dir, "echo 'perf: stuck'; exec sleep 30"));
  options.timeout_wait_for_running_sec = 0.3;
  FunctionProfiler profiler(options);
  WarningCapture warnings;
  auto start = std::chrono::steady_clock::now();
  int calls = 0;
  profiler.profile([&] { ++calls; });
  EXPECT_EQ(calls, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  const std::string& error = profiler.last_result().error;
  EXPECT_NE(error.find("perf record did not start sampling within 300 ms"), std::string::npos)
      << error;
  EXPECT_NE(error.find("perf: stuck"), std::string::npos) << error;
}

TEST(PerfSampler, APerfThatNeverStopsTimesOut) {
  TempDir dir;
  // Answers "enable" as perf does, then ignores "stop" and SIGINT.
  std::string body =
      "trap '' INT\n"
      "for a in \"$@\"; do case \"$a\" in fifo:*) f=${a#fifo:}; ack=${f#*,};; esac; done\n"
      "printf 'ack\\n' > \"$ack\"\n"
      "exec sleep 30";
  FunctionProfilerOptions options;
  options.sampler = perf_sampler(fake_perf(dir, body));
  options.timeout_wait_for_finished_sec = 0.3;
  FunctionProfiler profiler(options);
  WarningCapture warnings;
  int calls = 0;
  profiler.profile([&] { ++calls; });
  EXPECT_EQ(calls, 1);
  const std::string& error = profiler.last_result().error;
  EXPECT_NE(error.find("perf record did not stop within 300 ms"), std::string::npos) << error;
  EXPECT_TRUE(warnings.contains("failed after the function ran"));
}

// --- real perf ---------------------------------------------------------------------------------

// Two loops of the same body; one runs three times as many iterations. noinline and distinct
// so that perf sees two symbols.
// The busy work of the sampling tests: a chain of dependent multiply-adds (a 64-bit LCG step).
// Each step waits for the previous one's result, so an iteration costs the multiply's and the
// add's latency on any x86-64 or arm64 core, with no memory access at all. A loop on a
// `volatile` counter does not: its cost depends on store-to-load forwarding and memory
// renaming, which differ between two copies of the same loop (1.5:1 instead of 3:1 measured on
// an AMD EPYC), and a sanitizer instruments every access to it.
[[gnu::always_inline]] inline std::uint64_t multiply_add_chain(std::uint64_t x, std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    // Keeps the compiler from collapsing or unrolling the chain into something else; costs
    // nothing at run time.
    asm volatile("" : "+r"(x));
  }
  return x;
}
// Each function gets its own copy of the loop, so their self samples are told apart.
[[gnu::noinline]] std::uint64_t busy_three(std::uint64_t n) { return multiply_add_chain(3, 3 * n); }
[[gnu::noinline]] std::uint64_t busy_one(std::uint64_t n) { return multiply_add_chain(1, n); }

double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// Iterations of busy_one that take about `ms` on this machine (calibrated once).
std::uint64_t iterations_for_ms(double ms) {
  static const double per_ms = [] {
    auto start = std::chrono::steady_clock::now();
    busy_one(5'000'000);
    double took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return 5'000'000 / std::max(took, 0.01);
  }();
  return static_cast<std::uint64_t>(per_ms * ms);
}

std::uint64_t self_samples_of(const SampleProfile& profile, std::string_view function) {
  std::uint64_t n = 0;
  for (const FunctionSamples& row : profile.top_by_self(1000)) {
    if (row.name.find(function) != std::string::npos) n += row.self_samples;
  }
  return n;
}

#define REQUIRE_PERF()                                               \
  do {                                                               \
    const std::string& reason = testing::perf_unavailable_reason();  \
    if (!reason.empty()) GTEST_SKIP() << reason;                     \
  } while (false)

TEST(PerfSampling, AThreeToOneWorkloadShowsThreeToOne) {
  REQUIRE_PERF();
  FunctionProfiler profiler({.stop_at_error = true, .frequency_hz = 2000});
  // Interleaved in short rounds, so that a machine that slows down for a while (other tenants)
  // slows both loops alike. Each loop's CPU time is measured too: on a loaded virtual machine a
  // vCPU loses time to the host that the guest still counts as running (steal), in the
  // thread's CPU clock and in perf's cpu-clock alike, so the measured split, not the nominal
  // 3:1, is what the samples must match.
  const std::uint64_t n = iterations_for_ms(5);
  double cpu_three = 0;
  double cpu_one = 0;
  std::uint64_t sum = profiler.profile([&] {
    std::uint64_t s = 0;
    for (int round = 0; round < 30; ++round) {
      double t0 = thread_cpu_seconds();
      s += busy_three(n);
      double t1 = thread_cpu_seconds();
      s += busy_one(n);
      cpu_three += t1 - t0;
      cpu_one += thread_cpu_seconds() - t1;
    }
    return s;
  });
  EXPECT_GT(sum, 0u);
  const FunctionProfileResult& result = profiler.last_result();
  ASSERT_EQ(result.state, SamplerState::kFinished) << result.error;
  const SampleProfile& profile = *result.profile;
  const double three = static_cast<double>(self_samples_of(profile, "busy_three"));
  const double one = static_cast<double>(self_samples_of(profile, "busy_one"));
  ASSERT_GE(one, 20) << profile.summary();
  const double measured = cpu_three / cpu_one;
  EXPECT_NEAR(measured, 3.0, 0.3) << "the workload itself was not 3:1 in CPU time";
  EXPECT_NEAR(three / one, measured, 0.3 * measured)
      << "CPU time split " << measured << ":1\n" << profile.summary();
  EXPECT_GE(result.work_duration, std::chrono::milliseconds(300));
  // The collapsed stacks hold the same samples, leaf last.
  std::uint64_t in_stacks = 0;
  for (const auto& [stack, count] : profile.stacks()) {
    in_stacks += count;
    EXPECT_EQ(stack.find(' '), std::string::npos) << stack;
  }
  EXPECT_EQ(in_stacks, profile.total_samples());
  EXPECT_FALSE(profile.event().empty());
}

TEST(PerfSampling, SamplesInsideRangesGetTheRangeAsAFrame) {
  REQUIRE_PERF();
  FunctionProfiler profiler({.stop_at_error = true, .frequency_hz = 2000});
  Profiler session;  // a session recording at the same time sees the same ranges
  session.start();
  const std::uint64_t n = iterations_for_ms(100);
  profiler.profile([n] {
    OPSCOPE_RECORD_FUNCTION("op::three");
    busy_three(n);
    {
      OPSCOPE_RECORD_FUNCTION("op::one");
      busy_one(n);
    }
  });
  session.stop();
  const SampleProfile& profile = *profiler.last_result().profile;
  std::uint64_t three_in_range = 0;
  std::uint64_t one_in_nested_range = 0;
  for (const auto& [stack, count] : profile.stacks()) {
    if (stack.find("busy_three") != std::string::npos) {
      EXPECT_TRUE(stack.starts_with("op::three;")) << stack;
      three_in_range += count;
    }
    if (stack.find("busy_one") != std::string::npos) {
      EXPECT_TRUE(stack.starts_with("op::three;op::one;")) << stack;
      one_in_nested_range += count;
    }
  }
  EXPECT_GT(three_in_range, 0u) << profile.collapsed_stacks();
  EXPECT_GT(one_in_nested_range, 0u) << profile.collapsed_stacks();
  // The session recorded the same ranges.
  bool session_saw_it = false;
  for (const Event& event : session.result().events()) session_saw_it |= event.name == "op::one";
  EXPECT_TRUE(session_saw_it);
}

TEST(PerfSampling, SamplesFromOtherThreadsAreKept) {
  REQUIRE_PERF();
  FunctionProfiler profiler({.stop_at_error = true, .frequency_hz = 2000});
  const std::uint64_t n = iterations_for_ms(100);
  profiler.profile([n] {
    std::thread worker([n] { busy_one(n); });
    busy_three(n / 3);
    worker.join();
  });
  const SampleProfile& profile = *profiler.last_result().profile;
  EXPECT_GT(self_samples_of(profile, "busy_one"), 10u) << profile.summary();
}

TEST(PerfSampling, TwoThreadsProfilingAtOnceRunBothFunctionsOnce) {
  REQUIRE_PERF();
  std::atomic<int> calls{0};
  std::atomic<int> profiled{0};
  WarningCapture warnings;
  auto body = [&] {
    FunctionProfiler profiler({.frequency_hz = 1000});
    const std::uint64_t n = iterations_for_ms(100);
    profiler.profile([&] { ++calls; busy_one(n); });
    if (profiler.last_result().profiled) ++profiled;
    if (profiler.last_result().state == SamplerState::kFailed) {
      ADD_FAILURE() << profiler.last_result().error;
    }
  };
  std::thread a(body);
  std::thread b(body);
  a.join();
  b.join();
  EXPECT_EQ(calls.load(), 2);
  EXPECT_GE(profiled.load(), 1);
  if (profiled.load() == 1) {
    EXPECT_TRUE(warnings.contains("another profile() run is under way"));
  }
}

TEST(PerfSampling, AttachingWhileThreadsComeAndGo) {
  REQUIRE_PERF();
  // perf lists the threads, then attaches to each; a thread that ends in between fails the
  // attach. Threads that start and end all the time make that likely on every run.
  std::atomic<bool> done{false};
  std::thread churn([&] {
    while (!done.load()) {
      std::thread short_lived([] { busy_one(1000); });
      short_lived.join();
    }
  });
  FunctionProfiler profiler({.stop_at_error = true, .frequency_hz = 1000});
  for (int run = 0; run < 4; ++run) {
    std::string error = error_of([&] { profiler.profile([] { busy_one(iterations_for_ms(20)); }); });
    EXPECT_EQ(error, "(no error)") << "run " << run;
  }
  done = true;
  churn.join();
}

TEST(PerfSampling, MaxDurationEndsSamplingButNotTheFunction) {
  REQUIRE_PERF();
  FunctionProfiler profiler(
      {.stop_at_error = true, .max_profile_duration_sec = 0.1, .frequency_hz = 1000});
  const std::uint64_t n = iterations_for_ms(400);
  auto start = std::chrono::steady_clock::now();
  profiler.profile([n] { busy_one(n); });
  const FunctionProfileResult& result = profiler.last_result();
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(350));
  ASSERT_EQ(result.state, SamplerState::kFinished) << result.error;
  EXPECT_TRUE(result.sampling_cut_short);
  // perf took ~100 ms of samples at 1 kHz (it stops within its 100 ms control poll), not 400.
  EXPECT_LT(result.profile->total_samples(), 330u) << result.profile->summary();
}

}  // namespace function_profiler_test
}  // namespace opscope
