#include "opscope/flight_recorder.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "collect/collector.h"
#include "opscope/error.h"
#include "opscope/profiler.h"
#include "opscope/record_function.h"
#include "opscope/trace_reader.h"
#include "support/cli_test_support.h"
#include "support/test_support.h"

namespace opscope {
namespace flight_recorder_test {

using testing::error_of;
using testing::TempDir;

// The events named `name` in a trace.
std::vector<const Event*> named(const ProfilerResult& r, std::string_view name) {
  std::vector<const Event*> out;
  for (const Event& e : r.events()) {
    if (e.name == name) out.push_back(&e);
  }
  return out;
}

nlohmann::json flight_metadata(const std::string& path) {
  const nlohmann::json trace = nlohmann::json::parse(testing::read_file(path));
  return trace.at("flightRecorder");
}

bool is_open(const ProfilerResult& r, const Event& e) {
  return r.other_args(e).find("\"open\"") != std::string_view::npos;
}

TEST(FlightRecorder, DumpHoldsTheLastRangesWithTheirNesting) {
  TempDir dir;
  FlightRecorder recorder({.keep_seconds = 60, .max_bytes = 1 << 20});
  for (int i = 0; i < 3; ++i) {
    OPSCOPE_USER_SCOPE("flight::outer");
    OPSCOPE_RECORD_FUNCTION("flight::inner");
  }
  const FlightDump dump = recorder.dump(dir.file("dump.json"));
  EXPECT_EQ(dump.path, dir.file("dump.json"));
  const auto result = read_trace(dump.path);
  const auto outer = named(*result, "flight::outer");
  const auto inner = named(*result, "flight::inner");
  ASSERT_EQ(outer.size(), 3u);
  ASSERT_EQ(inner.size(), 3u);
  for (const Event* e : inner) {
    ASSERT_GE(e->parent, 0);
    EXPECT_EQ(result->events()[static_cast<std::size_t>(e->parent)].name, "flight::outer");
  }
  const nlohmann::json meta = flight_metadata(dump.path);
  EXPECT_EQ(meta.at("trigger"), "dump()");
  EXPECT_EQ(meta.at("maxBytes"), 1 << 20);
  EXPECT_GT(meta.at("bytesUsed").get<std::uint64_t>(), 0u);
  EXPECT_LE(meta.at("bytesUsed").get<std::uint64_t>(), 1u << 20);
  EXPECT_EQ(meta.at("chunksOverwritten"), 0);
  EXPECT_EQ(meta.at("recordsDropped"), 0);
}

TEST(FlightRecorder, RangesStillOpenAreWrittenOpenUntilTheDump) {
  TempDir dir;
  FlightRecorder recorder({.max_bytes = 1 << 20});
  std::string path = dir.file("open.json");
  {
    OPSCOPE_USER_SCOPE("flight::hung_step");
    { OPSCOPE_RECORD_FUNCTION("flight::done_part"); }
    OPSCOPE_RECORD_FUNCTION("flight::waiting");
    recorder.dump(path);
  }
  const auto result = read_trace(path);
  const auto hung = named(*result, "flight::hung_step");
  const auto waiting = named(*result, "flight::waiting");
  const auto done = named(*result, "flight::done_part");
  ASSERT_EQ(hung.size(), 1u);
  ASSERT_EQ(waiting.size(), 1u);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(is_open(*result, *hung[0]));
  EXPECT_TRUE(is_open(*result, *waiting[0]));
  EXPECT_FALSE(is_open(*result, *done[0]));
  // Open ranges end at the dump, which is the trace's end, and nest as they were.
  EXPECT_EQ(hung[0]->end_ns, result->end_time_ns());
  ASSERT_GE(waiting[0]->parent, 0);
  EXPECT_EQ(result->events()[static_cast<std::size_t>(waiting[0]->parent)].name,
            "flight::hung_step");
  EXPECT_EQ(flight_metadata(path).at("openRanges"), 2);
}

TEST(FlightRecorder, ARangeEndedOutOfOrderLeavesTheOthersOpen) {
  TempDir dir;
  FlightRecorder recorder({.max_bytes = 1 << 20});
  auto first = std::make_unique<RecordFunction>("flight::first", RecordScope::kUserScope);
  auto second = std::make_unique<RecordFunction>("flight::second", RecordScope::kUserScope);
  first->end();  // not the innermost
  recorder.dump(dir.file("order.json"));
  second->end();
  const auto result = read_trace(dir.file("order.json"));
  ASSERT_EQ(named(*result, "flight::first").size(), 1u);
  ASSERT_EQ(named(*result, "flight::second").size(), 1u);
  EXPECT_FALSE(is_open(*result, *named(*result, "flight::first")[0]));
  EXPECT_TRUE(is_open(*result, *named(*result, "flight::second")[0]));
}

TEST(FlightRecorder, KeepsOnlyTheLastKeepSeconds) {
  TempDir dir;
  FlightRecorder recorder({.keep_seconds = 0.05, .max_bytes = 1 << 20});
  { OPSCOPE_RECORD_FUNCTION("flight::long_ago"); }
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  { OPSCOPE_RECORD_FUNCTION("flight::just_now"); }
  recorder.dump(dir.file("keep.json"));
  const auto result = read_trace(dir.file("keep.json"));
  EXPECT_EQ(named(*result, "flight::long_ago").size(), 0u);
  EXPECT_EQ(named(*result, "flight::just_now").size(), 1u);
  EXPECT_GE(flight_metadata(dir.file("keep.json")).at("recordsOlderThanKeep"), 1);
}

TEST(FlightRecorder, OverwritesTheOldestChunksAndSaysSo) {
  TempDir dir;
  FlightRecorder recorder({.max_bytes = collect::kRingMinBytes});
  for (int i = 0; i < 100'000; ++i) {  // 1.6 MB of compact ranges in a 256 KiB ring
    OPSCOPE_RECORD_FUNCTION("flight::old");
  }
  for (int i = 0; i < 10; ++i) {
    OPSCOPE_RECORD_FUNCTION("flight::newest");
  }
  recorder.dump(dir.file("ring.json"));
  const auto result = read_trace(dir.file("ring.json"));
  EXPECT_EQ(named(*result, "flight::newest").size(), 10u);
  const std::size_t old = named(*result, "flight::old").size();
  EXPECT_GT(old, 0u);
  EXPECT_LT(old, 100'000u);
  const nlohmann::json meta = flight_metadata(dir.file("ring.json"));
  EXPECT_GT(meta.at("chunksOverwritten").get<int>(), 0);
  EXPECT_GT(meta.at("recordsOverwritten").get<std::uint64_t>(), 0u);
  EXPECT_EQ(meta.at("bytesUsed"), collect::kRingMinBytes);
}

// However many threads come and go, the ring stays within its bytes, and the threads'
// registrations do not pile up: ten rounds of a hundred threads use about a hundred slots, not
// a thousand (the threads of earlier tests may hold some already: slots are counted from the
// highest one a thread gets before the rounds).
TEST(FlightRecorder, AThousandShortLivedThreadsStayWithinTheBound) {
  TempDir dir;
  FlightRecorder recorder({.max_bytes = 1 << 20});
  const auto slot_of_a_new_thread = [] {
    std::uint64_t slot = 0;
    std::thread([&] {
      { OPSCOPE_RECORD_FUNCTION("flight::probe"); }
      slot = collect::ensure_registered();
    }).join();
    return slot;
  };
  const std::uint64_t before = slot_of_a_new_thread();
  std::atomic<std::uint64_t> highest{0};
  for (int round = 0; round < 10; ++round) {
    std::vector<std::thread> threads;
    for (int i = 0; i < 100; ++i) {
      threads.emplace_back([&] {
        for (int j = 0; j < 200; ++j) {
          OPSCOPE_RECORD_FUNCTION("flight::short_lived");
        }
        std::uint64_t mine = collect::ensure_registered();
        std::uint64_t seen = highest.load();
        while (mine > seen && !highest.compare_exchange_weak(seen, mine)) {
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  EXPECT_LE(highest.load(), before + 150) << "exited threads' slots were not reused";
  std::thread([] { OPSCOPE_RECORD_FUNCTION("flight::after_them"); }).join();
  recorder.dump(dir.file("threads.json"));
  const nlohmann::json meta = flight_metadata(dir.file("threads.json"));
  EXPECT_LE(meta.at("bytesUsed").get<std::uint64_t>(), 1u << 20);
  EXPECT_GT(meta.at("chunksOverwritten").get<int>(), 0);  // 1000 threads' chunks: 64 MiB asked
  const auto result = read_trace(dir.file("threads.json"));
  EXPECT_EQ(named(*result, "flight::after_them").size(), 1u);
  EXPECT_GT(named(*result, "flight::short_lived").size(), 0u);
}

TEST(FlightRecorder, DumpsWhileOtherThreadsRecord) {
  TempDir dir;
  FlightRecorder recorder({.max_bytes = 4 << 20});
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        OPSCOPE_USER_SCOPE("flight::busy_outer");
        OPSCOPE_RECORD_FUNCTION("flight::busy_inner");
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int i = 0; i < 3; ++i) recorder.dump(dir.file("busy" + std::to_string(i) + ".json"));
  stop = true;
  for (auto& t : threads) t.join();
  for (int i = 0; i < 3; ++i) {
    const auto result = read_trace(dir.file("busy" + std::to_string(i) + ".json"));
    EXPECT_GT(named(*result, "flight::busy_inner").size(), 0u);
    for (const Event* e : named(*result, "flight::busy_inner")) {
      if (e->parent < 0) continue;  // its outer range may be older than the oldest chunk
      EXPECT_EQ(result->events()[static_cast<std::size_t>(e->parent)].name, "flight::busy_outer");
    }
  }
}

// The first dump writes into a FIFO nobody reads yet, so it is still writing when the second
// is asked for: that one is refused, naming the first's path.
TEST(FlightRecorder, ASecondDumpAtOnceIsRefusedNamingTheFirst) {
  TempDir dir;
  FlightRecorder recorder({.max_bytes = 1 << 20});
  for (int i = 0; i < 20'000; ++i) {
    OPSCOPE_RECORD_FUNCTION("flight::fill");
  }
  const std::string fifo = dir.file("slow.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread first([&] { recorder.dump(fifo); });
  const int reader = ::open(fifo.c_str(), O_RDONLY);  // the first dump has opened it
  ASSERT_GE(reader, 0);
  char byte;
  ASSERT_EQ(::read(reader, &byte, 1), 1);  // and has begun writing
  const std::string refused = error_of([&] { recorder.dump(dir.file("second.json")); });
  EXPECT_NE(refused.find("second.json"), std::string::npos) << refused;
  EXPECT_NE(refused.find("slow.json"), std::string::npos) << refused;
  EXPECT_NE(refused.find("one at a time"), std::string::npos) << refused;
  EXPECT_FALSE(std::filesystem::exists(dir.file("second.json")));
  char buffer[65536];
  while (::read(reader, buffer, sizeof buffer) > 0) {
  }
  ::close(reader);
  first.join();
  recorder.dump(dir.file("third.json"));  // once the first is done, dumps are taken again
  EXPECT_TRUE(std::filesystem::exists(dir.file("third.json")));
}

TEST(FlightRecorder, OneAtATimeAndOptionsOutOfRangeAreNamed) {
  FlightRecorder recorder({.max_bytes = 1 << 20});
  EXPECT_NE(error_of([] { FlightRecorder second; }).find("already recording"), std::string::npos);
  const std::string small = error_of([] { FlightRecorder r({.max_bytes = 1000}); });
  EXPECT_NE(small.find("max_bytes 1000"), std::string::npos) << small;
  const std::string keep = error_of([] { FlightRecorder r({.keep_seconds = -1}); });
  EXPECT_NE(keep.find("keep_seconds"), std::string::npos) << keep;
  const std::string factor = error_of([] { FlightRecorder r({.slow_step_factor = 0.5}); });
  EXPECT_NE(factor.find("slow_step_factor"), std::string::npos) << factor;
}

TEST(FlightRecorder, DumpWithoutARecorderSaysHowToStartOne) {
  ASSERT_FALSE(flight_recorder_running());
  const std::string message = error_of([] { dump_flight_recorder("x.json", "test"); });
  EXPECT_NE(message.find("no flight recorder"), std::string::npos) << message;
  EXPECT_NE(message.find("OPSCOPE_FLIGHT_RECORDER"), std::string::npos) << message;
}

TEST(FlightRecorder, AnUnwritablePathFailsAndLeavesNothing) {
  TempDir dir;
  FlightRecorder recorder({.max_bytes = 1 << 20});
  { OPSCOPE_RECORD_FUNCTION("flight::x"); }
  const std::string message = error_of([&] { recorder.dump(dir.file("missing/dir/trace.json")); });
  EXPECT_NE(message.find("missing/dir/trace.json"), std::string::npos) << message;
  // And the recorder goes on.
  recorder.dump(dir.file("ok.json"));
  EXPECT_EQ(named(*read_trace(dir.file("ok.json")), "flight::x").size(), 1u);
}

// A Profiler window pauses the flight recorder: the window's ranges are the window's, the
// recorder's before and after are the recorder's, and the dump names the pause.
TEST(FlightRecorder, AProfilerWindowPausesItAndTheDumpSaysWhen) {
  TempDir dir;
  FlightRecorder recorder({.max_bytes = 1 << 20});
  { OPSCOPE_RECORD_FUNCTION("flight::before_window"); }
  std::shared_ptr<const ProfilerResult> window;
  {
    Profiler profiler;
    profiler.start();
    { OPSCOPE_RECORD_FUNCTION("flight::in_window"); }
    profiler.stop();
    window = profiler.shared_result();
  }
  { OPSCOPE_RECORD_FUNCTION("flight::after_window"); }
  recorder.dump(dir.file("paused.json"));
  const auto result = read_trace(dir.file("paused.json"));
  EXPECT_EQ(named(*result, "flight::before_window").size(), 1u);
  EXPECT_EQ(named(*result, "flight::after_window").size(), 1u);
  EXPECT_EQ(named(*result, "flight::in_window").size(), 0u);
  EXPECT_EQ(named(*window, "flight::in_window").size(), 1u);
  EXPECT_EQ(named(*window, "flight::before_window").size(), 0u);
  const nlohmann::json paused = flight_metadata(dir.file("paused.json")).at("pausedNs");
  ASSERT_EQ(paused.size(), 1u);
  EXPECT_LE(paused[0][0].get<std::int64_t>(), paused[0][1].get<std::int64_t>());
  EXPECT_GE(paused[0][0].get<std::int64_t>(),
            named(*result, "flight::before_window")[0]->end_ns - 1000);
}

TEST(FlightRecorder, StartedDuringAWindowItRecordsOnceTheWindowStops) {
  TempDir dir;
  Profiler profiler;
  profiler.start();
  FlightRecorder recorder({.max_bytes = 1 << 20});
  { OPSCOPE_RECORD_FUNCTION("flight::window_only"); }
  profiler.stop();
  { OPSCOPE_RECORD_FUNCTION("flight::recorder_only"); }
  recorder.dump(dir.file("late.json"));
  const auto result = read_trace(dir.file("late.json"));
  EXPECT_EQ(named(*result, "flight::window_only").size(), 0u);
  EXPECT_EQ(named(*result, "flight::recorder_only").size(), 1u);
  EXPECT_EQ(named(profiler.result(), "flight::window_only").size(), 1u);
}

TEST(FlightRecorder, ASlowStepAmongFastOnesDumpsOnceIntoTheDumpDir) {
  TempDir dir;
  FlightRecorder recorder({.max_bytes = 1 << 20,
                           .slow_step_factor = 10,
                           .slow_step_window = 8,
                           .slow_step_min_interval_seconds = 60,
                           .dump_dir = dir.path().string()});
  const auto step = [&](std::chrono::milliseconds took, const char* name) {
    opscope::RecordFunction range(name, RecordScope::kUserScope);
    std::this_thread::sleep_for(took);
    range.end();
    recorder.step();
  };
  // Fast steps of 5 ms: one would need to take 50 ms to count as slow.
  step(std::chrono::milliseconds(5), "flight::first_step");
  for (int i = 0; i < 8; ++i) step(std::chrono::milliseconds(5), "flight::fast_step");
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "a fast step dumped";
  step(std::chrono::milliseconds(400), "flight::slow_step");
  step(std::chrono::milliseconds(400), "flight::slow_again");  // within the interval: no dump
  std::vector<std::filesystem::path> dumps;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    dumps.push_back(entry.path());
  }
  ASSERT_EQ(dumps.size(), 1u);
  EXPECT_NE(dumps[0].filename().string().find("slow_step"), std::string::npos);
  const auto result = read_trace(dumps[0].string());
  EXPECT_EQ(named(*result, "flight::slow_step").size(), 1u);
  EXPECT_EQ(named(*result, "flight::fast_step").size(), 8u);
  EXPECT_EQ(flight_metadata(dumps[0].string()).at("trigger"), "slow step");
}

// A child that records under a recorder armed for crashes, then fails: the raw file it leaves
// decodes into a trace with its last ranges, their names and nesting, and the ranges open at
// the crash.
struct Crash {
  int status = 0;
  std::string raw;
};

Crash run_child(const TempDir& dir, const char* mode) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl(OPSCOPE_FLIGHT_CRASH_CHILD, OPSCOPE_FLIGHT_CRASH_CHILD, dir.path().c_str(), mode,
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  Crash crash;
  ::waitpid(pid, &crash.status, 0);
  crash.raw = dir.file("opscope_flight_" + std::to_string(pid) + "_crash.raw");
  return crash;
}

void expect_crash_trace(const TempDir& dir, const Crash& crash, int signal) {
  // Killed by the signal; a sanitizer's own handler, chained to, ends it its own way (ASan
  // reports and aborts), which the dump must not depend on.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  EXPECT_TRUE(WIFSIGNALED(crash.status) && WTERMSIG(crash.status) == signal) << crash.status;
#else
  EXPECT_TRUE(WIFSIGNALED(crash.status) || WEXITSTATUS(crash.status) != 0) << crash.status;
#endif
  ASSERT_TRUE(std::filesystem::exists(crash.raw)) << crash.raw;
  EXPECT_FALSE(std::filesystem::exists(crash.raw + ".part"));
  const FlightDump dump = decode_flight_dump(crash.raw, dir.file("crash.json"));
  EXPECT_EQ(dump.open_ranges, 2u);
  const auto result = read_trace(dir.file("crash.json"));
  EXPECT_EQ(named(*result, "child::warmup").size(), 100u);
  EXPECT_EQ(named(*result, "child::dynamic_name").size(), 1u);
  const auto step = named(*result, "child::step");
  const auto fail = named(*result, "child::fail");
  ASSERT_EQ(step.size(), 1u);
  ASSERT_EQ(fail.size(), 1u);
  EXPECT_TRUE(is_open(*result, *step[0]));
  EXPECT_TRUE(is_open(*result, *fail[0]));
  ASSERT_GE(fail[0]->parent, 0);
  EXPECT_EQ(result->events()[static_cast<std::size_t>(fail[0]->parent)].name, "child::step");
  const nlohmann::json meta = flight_metadata(dir.file("crash.json"));
  EXPECT_EQ(meta.at("trigger"), "crash");
  EXPECT_EQ(meta.at("signal"), signal);
}

TEST(FlightRecorderCrash, AnAbortLeavesARawDumpThatDecodes) {
  TempDir dir;
  expect_crash_trace(dir, run_child(dir, "abort"), SIGABRT);
}

TEST(FlightRecorderCrash, ASegfaultLeavesARawDumpThatDecodes) {
  TempDir dir;
  expect_crash_trace(dir, run_child(dir, "segv"), SIGSEGV);
}

TEST(FlightRecorderCrash, AnExceptionThrownPastMainLeavesARawDumpThatDecodes) {
  TempDir dir;
  const Crash crash = run_child(dir, "throw");
  // std::terminate writes it (signal 0), then aborts. An exception no handler catches is not
  // unwound, so the ranges it passed are still open.
  EXPECT_TRUE(WIFSIGNALED(crash.status) && WTERMSIG(crash.status) == SIGABRT) << crash.status;
  ASSERT_TRUE(std::filesystem::exists(crash.raw)) << crash.raw;
  const FlightDump dump = decode_flight_dump(crash.raw, dir.file("crash.json"));
  EXPECT_EQ(flight_metadata(dir.file("crash.json")).at("signal"), 0);
  EXPECT_EQ(dump.open_ranges, 2u);
  const auto result = read_trace(dir.file("crash.json"));
  const auto fail = named(*result, "child::fail");
  ASSERT_EQ(fail.size(), 1u);
  EXPECT_TRUE(is_open(*result, *fail[0]));
  ASSERT_GE(fail[0]->parent, 0);
  EXPECT_EQ(result->events()[static_cast<std::size_t>(fail[0]->parent)].name, "child::step");
  EXPECT_EQ(named(*result, "child::warmup").size(), 100u);
}

TEST(FlightRecorderCrash, AProgramThatEndsWellLeavesNoFile) {
  TempDir dir;
  const Crash crash = run_child(dir, "exit");
  ASSERT_TRUE(WIFEXITED(crash.status));
  EXPECT_EQ(WEXITSTATUS(crash.status), 0);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(FlightRecorderCrash, TheCliDecodesARawDumpAndSaysWhatItWrote) {
  TempDir dir;
  const Crash crash = run_child(dir, "abort");
  ASSERT_TRUE(std::filesystem::exists(crash.raw)) << crash.raw;
  const std::string out = dir.file("decoded.json.gz");
  auto [code, text] =
      cli::tests::shell(std::string(OPSCOPE_CLI) + " flight decode " + crash.raw + " -o " + out);
  EXPECT_EQ(code, 0) << text;
  EXPECT_NE(text.find("2 open at the crash"), std::string::npos) << text;
  const auto result = read_trace(out);
  EXPECT_EQ(named(*result, "child::step").size(), 1u);
  std::tie(code, text) =
      cli::tests::shell(std::string(OPSCOPE_CLI) + " flight decode " + crash.raw);
  EXPECT_EQ(code, 2) << text;
  EXPECT_NE(text.find("no output given"), std::string::npos) << text;
  std::tie(code, text) = cli::tests::shell(std::string(OPSCOPE_CLI) + " flight decode " +
                                           dir.file("missing.raw") + " -o " + dir.file("m.json"));
  EXPECT_EQ(code, 1) << text;
  EXPECT_NE(text.find("missing.raw"), std::string::npos) << text;
}

TEST(FlightRecorderCrash, DecodeRefusesWhatIsNotAWholeDump) {
  TempDir dir;
  const std::string path = dir.file("junk.raw");
  {
    std::ofstream out(path);
    out << "not a dump at all, but long enough to hold a section head";
  }
  const std::string message = error_of([&] { decode_flight_dump(path, dir.file("x.json")); });
  EXPECT_NE(message.find("junk.raw"), std::string::npos) << message;
  EXPECT_NE(message.find("at byte"), std::string::npos) << message;
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.json")));
  EXPECT_NE(error_of([&] {
              decode_flight_dump(dir.file("none.raw"), dir.file("x.json"));
            }).find("cannot open"),
            std::string::npos);
}

}  // namespace flight_recorder_test
}  // namespace opscope
