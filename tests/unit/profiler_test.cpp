#include "opscope/profiler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <thread>

#include "collect/collector.h"
#include "opscope/error.h"
#include "opscope/export.h"
#include "opscope/mark.h"
#include "opscope/memory.h"
#include "opscope/thread_local_state.h"
#include "support/test_support.h"

namespace opscope {
namespace profiler_test {

int count_named(const ProfilerResult& r, std::string_view name) {
  int n = 0;
  for (const Event& e : r.events()) n += e.name == name;
  return n;
}

using testing::error_of;

// As torch.profiler: with a schedule, each step is a "ProfilerStep#N" range holding the
// step's work.
TEST(Profiler, WrapsEachStepInAProfilerStepRange) {
  Profiler prof({.schedule = [](std::int64_t) { return ProfilerAction::kRecord; }});
  prof.start();
  for (int i = 0; i < 3; ++i) {
    { OPSCOPE_RECORD_FUNCTION("work"); }
    prof.step();
  }
  prof.stop();
  const ProfilerResult& r = prof.result();
  for (int i = 0; i <= 3; ++i) EXPECT_EQ(count_named(r, "ProfilerStep#" + std::to_string(i)), 1);
  EXPECT_EQ(count_named(r, "work"), 3);
  for (const Event& e : r.events()) {
    if (e.name == "work") {
      ASSERT_GE(e.parent, 0);
      EXPECT_EQ(r.events()[static_cast<std::size_t>(e.parent)].name.substr(0, 13), "ProfilerStep#");
    }
    if (e.name.starts_with("ProfilerStep#")) EXPECT_EQ(e.scope, RecordScope::kUserScope);
  }
  EXPECT_EQ(prof.step_num(), 3);
}

// ../shared/reference/pytorch-1.13/schedule_fired.txt: skip_first=1 wait=1 warmup=1 active=2
// repeat=2 over 12 steps fires on_trace_ready at step_num 5 and 9.
TEST(Profiler, ScheduleFiresLikePyTorch) {
  std::vector<std::int64_t> fired;
  std::vector<std::vector<std::string>> steps_in_window;
  Profiler prof(
      {.schedule = schedule({.wait = 1, .warmup = 1, .active = 2, .repeat = 2, .skip_first = 1}),
       .on_trace_ready = [&](Profiler& p) {
         fired.push_back(p.step_num());
         std::vector<std::string> names;
         for (const Event& e : p.events()) {
           if (e.name.starts_with("ProfilerStep#")) names.emplace_back(e.name);
         }
         steps_in_window.push_back(names);
       }});
  prof.start();
  for (int i = 0; i < 12; ++i) {
    { OPSCOPE_RECORD_FUNCTION("work"); }
    prof.step();
  }
  prof.stop();
  EXPECT_EQ(fired, (std::vector<std::int64_t>{5, 9}));
  ASSERT_EQ(steps_in_window.size(), 2u);
  EXPECT_EQ(steps_in_window[0], (std::vector<std::string>{"ProfilerStep#3", "ProfilerStep#4"}));
  EXPECT_EQ(steps_in_window[1], (std::vector<std::string>{"ProfilerStep#7", "ProfilerStep#8"}));

  std::ifstream ref(std::string(OPSCOPE_REFERENCE_DIR) + "/schedule_fired.txt");
  if (ref) {
    std::string line;
    std::getline(ref, line);
    EXPECT_NE(line.find("[5, 9]"), std::string::npos) << line;
  }
}

TEST(Profiler, DefaultScheduleFiresOnceAtStop) {
  int fired = 0;
  Profiler prof({.on_trace_ready = [&](Profiler& p) {
    ++fired;
    EXPECT_EQ(count_named(p.result(), "work"), 2);
  }});
  prof.start();
  { OPSCOPE_RECORD_FUNCTION("work"); }
  prof.step();
  { OPSCOPE_RECORD_FUNCTION("work"); }
  prof.stop();
  EXPECT_EQ(fired, 1);
}

// Without a schedule the steps are only counted, as in torch.profiler: no "ProfilerStep#N"
// ranges, the user's ranges are the top level, and a window with nothing in it is empty.
TEST(Profiler, NoScheduleMeansNoStepRanges) {
  Profiler prof;
  prof.start();
  { OPSCOPE_RECORD_FUNCTION("work"); }
  prof.step();
  prof.stop();
  ASSERT_EQ(prof.result().events().size(), 1u);
  EXPECT_EQ(prof.result().events()[0].name, "work");
  EXPECT_EQ(prof.result().events()[0].parent, -1);
  EXPECT_EQ(prof.step_num(), 1);
  Profiler empty;
  empty.start();
  empty.stop();
  EXPECT_TRUE(empty.result().events().empty());
  EXPECT_EQ(empty.key_averages().table(), "");
}

TEST(Profiler, IncorrectScheduleWarns) {
  testing::WarningCapture warnings;
  Profiler prof({.schedule = [](std::int64_t step) {
    return step == 0 ? ProfilerAction::kRecord : ProfilerAction::kNone;
  }});
  prof.start();
  prof.step();
  prof.stop();
  EXPECT_TRUE(warnings.contains("Incorrect schedule: RECORD followed by NONE"));
}

TEST(Profiler, WarnsWhenOnTraceReadyNeverFires) {
  testing::WarningCapture warnings;
  Profiler prof({.schedule = schedule({.wait = 1, .warmup = 1, .active = 1}),
                 .on_trace_ready = [](Profiler&) {}});
  prof.start();
  prof.stop();
  EXPECT_TRUE(warnings.contains("step() was never called"));
}

TEST(Profiler, MisuseIsAnErrorNamingTheCall) {
  Profiler prof;
  EXPECT_NE(error_of([&] { prof.stop(); }).find("stop(): the profiler is not started"),
            std::string::npos);
  EXPECT_NE(error_of([&] { prof.step(); }).find("step(): the profiler is not started"),
            std::string::npos);
  EXPECT_NE(error_of([&] { prof.result(); }).find("no recording window has finished"),
            std::string::npos);
  prof.start();
  EXPECT_NE(error_of([&] { prof.start(); }).find("already started"), std::string::npos);
  Profiler other;
  EXPECT_EQ(error_of([&] { other.start(); }),
            "cannot start an opscope::Profiler: an opscope::Profiler is already recording in this "
            "process, and opscope records one session at a time; stop it first");
  prof.stop();
  EXPECT_NO_THROW(other.start());
  other.stop();
}

// The C++ call and the words apart (Error::detail()), so that a binding names its own call;
// and what holds the recorder is named by its ProfilerConfig::name.
TEST(Profiler, ErrorsKeepTheCallApartFromTheWords) {
  Profiler prof;
  try {
    prof.stop();
    ADD_FAILURE() << "stop() before start() did not throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "Profiler::stop(): the profiler is not started; call start() first");
    EXPECT_STREQ(e.detail(), "the profiler is not started; call start() first");
  }
  const Error plain("no call named");
  EXPECT_STREQ(plain.detail(), "no call named");
  Profiler holder({.name = "the test's own profiler"});
  holder.start();
  try {
    prof.start();
    ADD_FAILURE() << "a second profiler started";
  } catch (const Error& e) {
    EXPECT_STREQ(e.detail(),
                 "the test's own profiler is already recording in this process, and opscope "
                 "records one session at a time; stop it first");
    EXPECT_EQ(std::string(e.what()).rfind("cannot start an opscope::Profiler: ", 0), 0u)
        << e.what();
  }
  holder.stop();
}

TEST(Profiler, MetadataIsValidatedAndKept) {
  Profiler prof;
  prof.preset_metadata_json("preset", R"({"a": 1})");
  prof.start();
  prof.add_metadata("plain", "quoted \"value\"");
  prof.add_metadata_json("json", "[1, 2, 3]");
  const std::string err = error_of([&] { prof.add_metadata_json("bad", "{not json"); });
  EXPECT_NE(err.find("'bad'"), std::string::npos) << err;
  EXPECT_NE(err.find("not valid JSON"), std::string::npos) << err;
  EXPECT_THROW(prof.preset_metadata_json("bad", "01"), Error);
  prof.stop();
  const auto& md = prof.result().metadata();
  ASSERT_EQ(md.size(), 3u);
  EXPECT_EQ(md[0], (std::pair<std::string, std::string>{"preset", R"({"a": 1})"}));
  EXPECT_EQ(md[1].first, "plain");
  EXPECT_EQ(nlohmann::json::parse(md[1].second), "quoted \"value\"");
  EXPECT_EQ(md[2], (std::pair<std::string, std::string>{"json", "[1, 2, 3]"}));
}

TEST(Profiler, CudaWithoutBackendIsAcceptedAndMarked) {
  testing::WarningCapture warnings;
  Profiler prof({.activities = {ActivityType::kCPU, ActivityType::kCUDA},
                 .lenses = {.record_shapes = true, .with_stack = true}});
  prof.start();
  prof.stop();
  const auto& nr = prof.stats().not_recorded;
  EXPECT_EQ(nr, (std::vector<std::string>{"cuda"}));
  EXPECT_TRUE(warnings.contains("accepted but not recorded: cuda (" + activity_unavailable_reason(ActivityType::kCUDA) + ")"));
  EXPECT_TRUE(prof.result().lenses().record_shapes);
  EXPECT_TRUE(prof.result().lenses().with_stack);
  EXPECT_FALSE(prof.result().lenses().profile_memory);
}

TEST(Profiler, RecordsWorkerThreadsByDefault) {
  Profiler prof;
  prof.start();
  { OPSCOPE_RECORD_FUNCTION("on_main"); }
  std::thread([] { OPSCOPE_RECORD_FUNCTION("on_worker"); }).join();
  prof.stop();
  EXPECT_EQ(count_named(prof.result(), "on_worker"), 1);
  EXPECT_GE(prof.result().threads().size(), 2u);
}

TEST(Profiler, ThreadLimitedSessionRecordsOnlyCarriers) {
  ProfilerConfig config;
  config.experimental.record_all_threads = false;
  Profiler prof(config);
  prof.start();
  { OPSCOPE_RECORD_FUNCTION("on_starter"); }
  std::thread([] { OPSCOPE_RECORD_FUNCTION("stranger"); }).join();
  std::thread(wrap([] { OPSCOPE_RECORD_FUNCTION("carrier"); })).join();
  prof.stop();
  EXPECT_EQ(count_named(prof.result(), "on_starter"), 1);
  EXPECT_EQ(count_named(prof.result(), "stranger"), 0);
  EXPECT_EQ(count_named(prof.result(), "carrier"), 1);
}

TEST(Profiler, BufferLimitDropsAndCounts) {
  ProfilerConfig config;
  config.experimental.buffer_limit_bytes = 64 << 10;  // the first (64 KiB) chunk, no more
  Profiler prof(config);
  prof.start();
  constexpr int kRanges = 100'000;
  for (int i = 0; i < kRanges; ++i) {
    OPSCOPE_RECORD_FUNCTION("flood");
  }
  prof.stop();
  const SessionStats& s = prof.stats();
  const int kept = count_named(prof.result(), "flood");
  EXPECT_GT(kept, 0);
  EXPECT_GT(s.events_dropped, 0u);
  // ProfilerStep#0 also lands in the buffer (or is dropped), so the books balance within one.
  EXPECT_NEAR(static_cast<double>(kept) + static_cast<double>(s.events_dropped), kRanges + 1, 1.0);
  // A range whose end was dropped is a drop, not an open range.
  EXPECT_EQ(s.ranges_open_at_stop, 0u);
}

// The limit holds however many threads come and go: a thread that starts recording once the
// budget is spent gets no buffer at all, and everything it records is dropped and counted.
TEST(Profiler, BufferLimitHoldsWithShortLivedThreads) {
  ProfilerConfig config;
  config.experimental.buffer_limit_bytes = 1 << 20;
  Profiler prof(config);
  prof.start();
  constexpr int kThreads = 3000;
  constexpr int kRangesEach = 100;
  for (int t = 0; t < kThreads; ++t) {
    std::thread([] {
      for (int i = 0; i < kRangesEach; ++i) {
        OPSCOPE_RECORD_FUNCTION("short_lived");
      }
    }).join();
  }
  prof.stop();
  const SessionStats& s = prof.stats();
  // At most the limit plus one chunk (the budget's last grant may be a whole large chunk).
  EXPECT_LE(s.buffer_bytes, (1u << 20) + (2u << 20)) << s.buffer_bytes;
  const int kept = count_named(prof.result(), "short_lived");
  EXPECT_GT(kept, 0);
  EXPECT_GT(s.events_dropped, 0u);
  // Every range is either in the result or counted (ProfilerStep#0 too, within one).
  EXPECT_NEAR(static_cast<double>(kept) + static_cast<double>(s.events_dropped),
              kThreads * kRangesEach + 1, 1.0);
  EXPECT_EQ(s.ranges_open_at_stop, 0u);
}

// A range the window cannot show is counted, not lost: still open at stop(), whenever it ends.
TEST(Profiler, CountsRangesOpenAtStop) {
  Profiler prof;
  prof.start();
  { OPSCOPE_RECORD_FUNCTION("closed"); }
  std::optional<RecordFunction> open;
  open.emplace("open_at_stop", RecordScope::kUserScope);
  prof.stop();
  open->end();  // ended after stop(): too late for the window
  const SessionStats& s = prof.stats();
  EXPECT_EQ(s.ranges_open_at_stop, 1u);
  EXPECT_EQ(s.events_dropped, 0u);
  EXPECT_EQ(count_named(prof.result(), "closed"), 1);
  EXPECT_EQ(count_named(prof.result(), "open_at_stop"), 0);
  const auto trace = nlohmann::json::parse(chrome_trace_json(prof.result()));
  EXPECT_EQ(trace["opscope"]["ranges_open_at_stop"], 1);
}

// A range begun in one window and ended in the next belongs to neither: the first counts it,
// the second neither shows nor counts it.
TEST(Profiler, CountsARangeSpanningTwoWindowsOnce) {
  std::vector<SessionStats> stats;
  std::vector<int> spanning;
  Profiler prof({.schedule = schedule({.wait = 0, .warmup = 0, .active = 1, .repeat = 2}),
                 .on_trace_ready = [&](Profiler& p) {
                   stats.push_back(p.stats());
                   spanning.push_back(count_named(p.result(), "spanning"));
                 }});
  prof.start();
  std::optional<RecordFunction> range;
  range.emplace("spanning", RecordScope::kUserScope);
  prof.step();  // window 1 ends, window 2 begins
  range.reset();
  prof.step();
  prof.stop();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].ranges_open_at_stop, 1u);
  EXPECT_EQ(stats[1].ranges_open_at_stop, 0u);
  EXPECT_EQ(spanning, (std::vector<int>{0, 0}));
}

// Counted on every thread: one that is still in its range at stop(), one whose range outlives
// the thread itself; threads that finished theirs, or ended one begun elsewhere, count nothing.
TEST(Profiler, CountsOpenRangesOfOtherThreads) {
  Profiler prof;
  prof.start();
  std::thread([] {
    for (int i = 0; i < 100; ++i) {
      OPSCOPE_RECORD_FUNCTION("finished_worker");
    }
  }).join();
  std::optional<RecordFunction> outlives_its_thread;
  std::thread([&] { outlives_its_thread.emplace("outlives", RecordScope::kUserScope); }).join();
  std::optional<RecordFunction> handed_over;
  std::thread([&] { handed_over.emplace("handed_over", RecordScope::kUserScope); }).join();
  handed_over.reset();  // ends on this thread, inside the window: an async range, not open
  std::mutex mu;
  std::condition_variable cv;
  bool begun = false, stopped = false;
  std::thread busy([&] {
    OPSCOPE_RECORD_FUNCTION("busy_at_stop");
    std::unique_lock<std::mutex> lock(mu);
    begun = true;
    cv.notify_all();
    cv.wait(lock, [&] { return stopped; });
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return begun; });
  }
  prof.stop();
  {
    std::lock_guard<std::mutex> lock(mu);
    stopped = true;
  }
  cv.notify_all();
  busy.join();
  outlives_its_thread.reset();
  EXPECT_EQ(prof.stats().ranges_open_at_stop, 2u);
  EXPECT_EQ(count_named(prof.result(), "finished_worker"), 100);
  EXPECT_EQ(count_named(prof.result(), "handed_over"), 1);
  EXPECT_EQ(count_named(prof.result(), "busy_at_stop"), 0);
}

// Marks and memory reports take ids too, but they are not ranges: nothing is counted open.
TEST(Profiler, MarksAndMemoryReportsAreNotOpenRanges) {
  Profiler prof({.lenses = {.profile_memory = true}});
  prof.start();
  int block = 0;
  for (int i = 0; i < 50; ++i) {
    OPSCOPE_RECORD_FUNCTION("with_reports");
    mark("a_mark");
    report_memory_usage(&block, 64, 64, 64);
    report_memory_usage(&block, -64, 0, 64);
  }
  prof.stop();
  EXPECT_EQ(prof.stats().ranges_open_at_stop, 0u);
  EXPECT_EQ(count_named(prof.result(), "with_reports"), 50);
  EXPECT_EQ(count_named(prof.result(), "a_mark"), 50);
  EXPECT_EQ(count_named(prof.result(), "[memory]"), 100);
}

TEST(Profiler, ScopeStartsAndStops) {
  Profiler prof;
  {
    ProfilerScope scope(prof);
    EXPECT_TRUE(prof.is_started());
    OPSCOPE_RECORD_FUNCTION("scoped");
  }
  EXPECT_FALSE(prof.is_started());
  EXPECT_EQ(count_named(prof.result(), "scoped"), 1);
}

TEST(Profiler, QuickSessionsBackToBack) {
  for (int i = 0; i < 200; ++i) {
    Profiler prof;
    prof.start();
    std::thread t([] { OPSCOPE_RECORD_FUNCTION("quick"); });
    { OPSCOPE_RECORD_FUNCTION("quick"); }
    t.join();
    prof.stop();
    ASSERT_EQ(count_named(prof.result(), "quick"), 2) << "session " << i;
  }
}

TEST(Profiler, TensorBoardHandlerNamesFiles) {
  testing::TempDir dir;
  const std::string logdir = dir.file("log/nested");
  Profiler prof({.on_trace_ready = tensorboard_trace_handler(logdir, "worker0", true)});
  prof.start();
  { OPSCOPE_RECORD_FUNCTION("tb"); }
  prof.stop();
  std::vector<std::string> files;
  for (const auto& f : std::filesystem::directory_iterator(logdir)) {
    files.push_back(f.path().filename().string());
  }
  ASSERT_EQ(files.size(), 1u);
  EXPECT_TRUE(std::regex_match(files[0], std::regex(R"(worker0\.\d{19}\.pt\.trace\.json\.gz)")))
      << files[0];
  const auto doc = nlohmann::json::parse(testing::read_gzip_file(logdir + "/" + files[0]));
  EXPECT_TRUE(doc.contains("traceEvents"));
}

TEST(Profiler, TensorBoardHandlerDefaultsWorkerToHostAndPid) {
  testing::TempDir dir;
  Profiler prof({.on_trace_ready = tensorboard_trace_handler(dir.path().string())});
  prof.start();
  prof.stop();
  auto it = std::filesystem::directory_iterator(dir.path());
  ASSERT_NE(it, std::filesystem::directory_iterator());
  const std::string name = it->path().filename().string();
  EXPECT_NE(name.find("_" + std::to_string(::getpid()) + "."), std::string::npos) << name;
  EXPECT_TRUE(name.ends_with(".pt.trace.json")) << name;
}

TEST(Profiler, FailedExportKeepsTheResult) {
  testing::TempDir dir;
  Profiler prof;
  prof.start();
  { OPSCOPE_RECORD_FUNCTION("precious"); }
  prof.stop();
  const std::string missing = dir.file("no/such/dir/trace.json");
  const std::string err = error_of([&] { prof.export_chrome_trace(missing); });
  EXPECT_NE(err.find(missing), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(missing));
  EXPECT_EQ(count_named(prof.result(), "precious"), 1);
  const std::string ok = dir.file("trace.json");
  prof.export_chrome_trace(ok);
  EXPECT_TRUE(std::filesystem::exists(ok));
}

TEST(Profiler, UnwritableTensorBoardDirIsAnError) {
  testing::TempDir dir;
  const std::string file = dir.file("a_file");
  std::ofstream(file) << "x";
  Profiler prof({.on_trace_ready = tensorboard_trace_handler(file + "/sub")});
  prof.start();
  const std::string err = error_of([&] { prof.stop(); });
  EXPECT_NE(err.find("Can't create directory"), std::string::npos) << err;
  EXPECT_FALSE(prof.is_started());
  EXPECT_NO_THROW(prof.result());  // the window is kept
}

}  // namespace profiler_test
}  // namespace opscope

// Fresh pages cost more per range than the range itself, so chunks a window used are kept
// for the next window (of this Profiler or another), and unmapped once nothing has recorded
// for the idle period.
TEST(Profiler, KeepsChunksForTheNextWindowAndReleasesThemWhenIdle) {
  constexpr int kRanges = 300'000;  // several 2 MiB chunks
  auto record = [] {
    for (int i = 0; i < kRanges; ++i) {
      OPSCOPE_RECORD_FUNCTION("test::pooled");
    }
  };
  {
    opscope::Profiler prof;
    prof.start();
    record();
    prof.stop();
  }
  const std::uint64_t kept = opscope::collect::pooled_chunk_bytes();
  EXPECT_GE(kept, 4u * opscope::collect::kLargeChunkBytes);
  {
    opscope::Profiler prof;
    prof.start();
    record();
    // The window took its chunks from the pool rather than mapping new ones.
    EXPECT_LT(opscope::collect::pooled_chunk_bytes(), kept);
    prof.stop();
    EXPECT_EQ(prof.stats().events_dropped, 0u);
  }
  opscope::collect::set_chunk_pool_idle_release(std::chrono::milliseconds(50));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (opscope::collect::pooled_chunk_bytes() != 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(opscope::collect::pooled_chunk_bytes(), 0u);
  opscope::collect::set_chunk_pool_idle_release(std::chrono::seconds(10));
}
