// The legacy profiler: enable/disable, event lists, RecordProfile's trace, remote events.
#include "opscope/legacy.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "collect/collector.h"
#include "opscope/export.h"
#include "opscope/key_averages.h"
#include "opscope/mark.h"
#include "opscope/memory.h"
#include "opscope/profiler.h"
#include "opscope/observer.h"
#include "opscope/record_function.h"
#include "opscope/thread_local_state.h"
#include "profiler/nvtx.h"
#include "support/test_support.h"

extern char** environ;

namespace opscope {
namespace legacy_test {

using Kind = LegacyEventKind;
using testing::error_of;
using testing::read_file;
using testing::recorded_int;
using testing::TempDir;
using testing::WarningCapture;

// Disables a legacy profiler a failed assertion left running, so later tests start clean.
struct LegacyGuard {
  ~LegacyGuard() {
    if (profiler_legacy_enabled()) disable_profiler_legacy();
  }
};

std::vector<const LegacyEvent*> flatten(const ThreadEventLists& lists) {
  std::vector<const LegacyEvent*> out;
  for (const auto& l : lists) {
    for (const auto& e : l) out.push_back(&e);
  }
  return out;
}

// "mark:__start_profile push:outer push:inner pop pop mark:__stop_profile"
std::string shape_of(const std::vector<LegacyEvent>& list) {
  std::string s;
  for (const LegacyEvent& e : list) {
    if (!s.empty()) s += ' ';
    s += e.kind_str();
    if (!e.name().empty()) s += ":" + e.name();
  }
  return s;
}

void nested_work() {
  OPSCOPE_RECORD_FUNCTION("outer");
  { OPSCOPE_RECORD_FUNCTION("inner"); }
}

TEST(LegacyProfiler, RecordsMarksAndNestedRangesOnTheEnablingThread) {
  LegacyGuard guard;
  nested_work();  // before: not recorded
  enable_profiler_legacy();
  EXPECT_TRUE(profiler_legacy_enabled());
  nested_work();
  const ThreadEventLists lists = disable_profiler_legacy();
  EXPECT_FALSE(profiler_legacy_enabled());
  nested_work();  // after: not recorded

  ASSERT_EQ(lists.size(), 1u);
  const auto& l = lists[0];
  EXPECT_EQ(shape_of(l), "mark:__start_profile push:outer push:inner pop pop mark:__stop_profile");
  const std::uint64_t tid = collect::current_tid();
  for (const LegacyEvent& e : l) {
    EXPECT_EQ(e.thread_id(), tid);
    EXPECT_EQ(e.node_id(), -1);
    EXPECT_FALSE(e.is_remote());
  }
  // Pops carry their push's handle; handles of the two ranges differ.
  EXPECT_EQ(l[1].handle(), l[4].handle());
  EXPECT_EQ(l[2].handle(), l[3].handle());
  EXPECT_NE(l[1].handle(), l[2].handle());
  // Times never go backwards within the list.
  for (std::size_t i = 1; i < l.size(); ++i) EXPECT_LE(l[i - 1].cpu_ns(), l[i].cpu_ns());
  EXPECT_GE(l[0].cpu_elapsed_us(l[5]), 0.0);
}

TEST(LegacyProfiler, ErrorsOnDoubleEnableAndOnDisableWhenNotRunning) {
  LegacyGuard guard;
  EXPECT_EQ(error_of([] { disable_profiler_legacy(); }),
            "Can't disable profiler when it's not running");
  enable_profiler_legacy();
  EXPECT_EQ(error_of([] { enable_profiler_legacy(); }),
            "Profiler is already enabled on this thread");
  disable_profiler_legacy();
  EXPECT_EQ(error_of([] { disable_profiler_legacy(); }),
            "Can't disable profiler when it's not running");
  EXPECT_NE(error_of([] {
              enable_profiler_legacy({.state = LegacyProfilerState::kDisabled});
            }).find("kDisabled records nothing"),
            std::string::npos);
}

TEST(LegacyProfiler, OneSessionPerProcessWithTheModernProfiler) {
  LegacyGuard guard;
  enable_profiler_legacy();
  {
    Profiler prof;
    const std::string err = error_of([&] { prof.start(); });
    EXPECT_NE(err.find("the legacy profiler is already recording"), std::string::npos) << err;
  }
  // Another thread cannot enable a second one.
  std::string other;
  std::thread([&] { other = error_of([] { enable_profiler_legacy(); }); }).join();
  EXPECT_NE(other.find("already enabled on thread " + std::to_string(collect::current_tid())),
            std::string::npos)
      << other;
  disable_profiler_legacy();

  Profiler prof;
  prof.start();
  const std::string err = error_of([] { enable_profiler_legacy(); });
  EXPECT_NE(err.find("an opscope::Profiler is already recording"), std::string::npos) << err;
  EXPECT_FALSE(profiler_legacy_enabled());
  prof.stop();
}

TEST(LegacyProfiler, ThreadsRecordOnlyWithTheEnablingThreadsState) {
  LegacyGuard guard;
  enable_profiler_legacy();
  std::uint64_t carried_tid = 0;
  std::thread carried(wrap([&] {
    carried_tid = collect::current_tid();
    EXPECT_TRUE(profiler_legacy_enabled());
    OPSCOPE_RECORD_FUNCTION("on_worker");
  }));
  carried.join();
  std::thread stranger([] {
    EXPECT_FALSE(profiler_legacy_enabled());
    OPSCOPE_RECORD_FUNCTION("on_stranger");
  });
  stranger.join();
  const ThreadEventLists lists = disable_profiler_legacy();

  ASSERT_EQ(lists.size(), 2u);
  bool worker_list = false;
  for (const auto& l : lists) {
    if (l.front().thread_id() != carried_tid) continue;
    worker_list = true;
    EXPECT_EQ(shape_of(l), "push:on_worker pop");
  }
  EXPECT_TRUE(worker_list);
  for (const LegacyEvent* e : flatten(lists)) EXPECT_NE(e->name(), "on_stranger");
}

TEST(LegacyProfiler, AsyncRangeIsListedOnTheStartingThreadWithTheEndingThreadsPop) {
  LegacyGuard guard;
  enable_profiler_legacy();
  auto rf = std::make_unique<RecordFunction>("async_work", RecordScope::kUserScope);
  std::uint64_t ender = 0;
  std::thread([&] {
    ender = collect::current_tid();
    rf->end();
  }).join();
  const ThreadEventLists lists = disable_profiler_legacy();

  ASSERT_EQ(lists.size(), 1u) << "the pop must be in the starting thread's list";
  const auto& l = lists[0];
  EXPECT_EQ(shape_of(l), "mark:__start_profile push:async_work pop mark:__stop_profile");
  EXPECT_EQ(l[1].thread_id(), collect::current_tid());
  EXPECT_EQ(l[2].thread_id(), ender);
  EXPECT_TRUE(l[1].is_async());
  EXPECT_EQ(l[1].scope(), RecordScope::kUserScope);
}

TEST(LegacyProfiler, MemoryShapesFlopsAndStacksFollowTheConfig) {
  LegacyGuard guard;
  int block = 0;
  auto work = [&] {
    OPSCOPE_RECORD_FUNCTION_WITH_INPUTS("aten::mm", Value::tensor({2, 3}), Value::tensor({3, 4}));
    report_memory_usage(&block, 4096, 4096, 4096);
    report_memory_usage(&block, -4096, 0, 4096);
  };
  enable_profiler_legacy();
  work();
  const ThreadEventLists plain = disable_profiler_legacy();
  for (const LegacyEvent* e : flatten(plain)) {
    EXPECT_NE(e->kind(), Kind::kMemoryAlloc);
    EXPECT_TRUE(e->shapes().empty());
    EXPECT_EQ(e->flops(), -1);
    EXPECT_TRUE(e->stack().empty());
  }

  enable_profiler_legacy(
      {.lenses = {
           .record_shapes = true, .profile_memory = true, .with_stack = true, .with_flops = true}});
  work();
  const ThreadEventLists lists = disable_profiler_legacy();
  ASSERT_EQ(lists.size(), 1u);
  EXPECT_EQ(shape_of(lists[0]),
            "mark:__start_profile push:aten::mm memory_alloc memory_alloc pop "
            "mark:__stop_profile");
  const LegacyEvent& mm = lists[0][1];
  EXPECT_EQ(mm.shapes(), (std::vector<std::vector<std::int64_t>>{{2, 3}, {3, 4}}));
  EXPECT_EQ(mm.flops(), 2 * 2 * 3 * 4);
  ASSERT_FALSE(mm.stack().empty());
  bool names_the_test = false;
  for (const auto& f : mm.stack()) {
    names_the_test |= f.find("MemoryShapesFlopsAndStacksFollowTheConfig") != std::string::npos;
  }
  EXPECT_TRUE(names_the_test) << mm.stack().front();
  EXPECT_EQ(lists[0][2].cpu_memory_usage(), 4096);
  EXPECT_EQ(lists[0][3].cpu_memory_usage(), -4096);
}

TEST(LegacyProfiler, NvtxModeIsRefusedWithoutCuda) {
  LegacyGuard guard;
  std::string why;
  if (nvtx::available(&why)) {
    GTEST_SKIP() << "a CUDA device is present: NVTX mode is allowed here";
  }
  const std::string err =
      error_of([] { enable_profiler_legacy({.state = LegacyProfilerState::kNVTX}); });
  EXPECT_EQ(err, "Can't use NVTX profiler: " + why);
  EXPECT_FALSE(profiler_legacy_enabled());
  enable_profiler_legacy();  // a refused NVTX mode leaves nothing behind
  disable_profiler_legacy();
}

// NVTX mode's forwarding, checked through an NVTX injection library (tests/gpu) that logs what
// NVTX receives, as Nsight would get it. NVTX itself needs no GPU, so this runs everywhere the
// NVTX headers are; the mode as a whole needs a CUDA device and is run on one by hand.
TEST(NvtxForwarding, EveryRangeOfTheThreadAndItsWorkersReachesNvtx) {
#ifndef OPSCOPE_NVTX_INJECTION
  GTEST_SKIP() << "built without the NVTX headers: no injection library to check with";
#else
  TempDir dir;
  const std::string log = dir.file("nvtx.log");
  // NVTX reads these at its first call in the process, which this test makes.
  ::setenv("NVTX_INJECTION64_PATH", OPSCOPE_NVTX_INJECTION, 1);
  ::setenv("OPSCOPE_NVTX_LOG", log.c_str(), 1);
  nvtx::mark("__start_profile");
  const CallbackHandle h = nvtx::add_range_forwarding(/*with_shapes=*/true);
  {
    OPSCOPE_RECORD_FUNCTION("outer");
    OPSCOPE_RECORD_FUNCTION_WITH_INPUTS("aten::mm", Value::tensor({2, 3}), Value::tensor({3, 4}));
  }
  std::thread(wrap([] { OPSCOPE_RECORD_FUNCTION("on_worker"); })).join();
  std::thread([] { OPSCOPE_RECORD_FUNCTION("on_stranger"); }).join();
  EXPECT_TRUE(remove_callback(h));
  { OPSCOPE_RECORD_FUNCTION("after_removal"); }
  EXPECT_EQ(read_file(log),
            "mark __start_profile\n"
            "push outer\n"
            "push aten::mm, sizes = [[2, 3], [3, 4]]\n"
            "pop\n"
            "pop\n"
            "push on_worker\n"
            "pop\n");
#endif
}

TEST(LegacyProfiler, DisableOptions) {
  LegacyGuard guard;
  enable_profiler_legacy();
  nested_work();
  EXPECT_TRUE(disable_profiler_legacy({.consolidate = false}).empty());

  enable_profiler_legacy();
  nested_work();
  const ThreadEventLists kept = disable_profiler_legacy({.cleanup_tls_state = false});
  EXPECT_EQ(kept.size(), 1u);
  // Recording stopped even though the state stayed: a new profiler can start here.
  EXPECT_FALSE(profiler_legacy_enabled());
  enable_profiler_legacy();
  EXPECT_EQ(shape_of(disable_profiler_legacy()[0]), "mark:__start_profile mark:__stop_profile");
}

TEST(LegacyProfiler, MarksOfTheModernProfilerAreInstants) {
  Profiler prof;
  prof.start();
  mark("checkpoint");
  prof.stop();
  bool found = false;
  for (const Event& e : prof.events()) {
    if (e.name == "checkpoint") {
      found = true;
      EXPECT_EQ(e.kind, EventKind::kInstant);
    }
  }
  EXPECT_TRUE(found);
}

// --- RecordProfile and the legacy JSON ----------------------------------------------------------

nlohmann::json parse(const std::string& text) { return nlohmann::json::parse(text); }

TEST(RecordProfile, WritesOneCompleteEventPerRangeLikePyTorchsLegacyTrace) {
  std::ostringstream out;
  {
    RecordProfile guard(out);
    nested_work();
    nested_work();
  }
  const nlohmann::json trace = parse(out.str());
  ASSERT_TRUE(trace.is_array());
  ASSERT_EQ(trace.size(), 4u);
  // The keys of PyTorch's own legacy trace, event for event.
  const nlohmann::json reference =
      parse(read_file(std::string(OPSCOPE_REFERENCE_DIR) + "/legacy_trace.json"));
  std::set<std::string> ref_keys, our_keys;
  for (const auto& [k, v] : reference[0].items()) ref_keys.insert(k);
  for (const auto& e : trace) {
    our_keys.clear();
    for (const auto& [k, v] : e.items()) our_keys.insert(k);
    EXPECT_EQ(our_keys, ref_keys);
    EXPECT_EQ(e["ph"], "X");
    EXPECT_EQ(e["pid"], "CPU Functions");
    EXPECT_EQ(e["tid"], collect::current_tid());
    EXPECT_GE(e["ts"].get<double>(), 0.0);
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    EXPECT_TRUE(e["args"].empty());
  }
  // In order of the pops: inner ends first, and lies within outer.
  EXPECT_EQ(trace[0]["name"], "inner");
  EXPECT_EQ(trace[1]["name"], "outer");
  EXPECT_GE(trace[0]["ts"].get<double>(), trace[1]["ts"].get<double>());
  EXPECT_LE(trace[0]["ts"].get<double>() + trace[0]["dur"].get<double>(),
            trace[1]["ts"].get<double>() + trace[1]["dur"].get<double>());
  EXPECT_FALSE(profiler_legacy_enabled());
}

TEST(RecordProfile, FileAppearsOnlyWhenComplete) {
  TempDir dir;
  const std::string path = dir.file("legacy.json");
  {
    RecordProfile guard(path);
    nested_work();
    EXPECT_FALSE(std::filesystem::exists(path));
  }
  const nlohmann::json trace = parse(read_file(path));
  EXPECT_EQ(trace.size(), 2u);
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename(), "legacy.json") << "a temporary file was left behind";
  }
}

TEST(RecordProfile, UnwritablePathFailsBeforeEnabling) {
  const std::string err = error_of([] { RecordProfile guard("/nonexistent-dir/x/legacy.json"); });
  EXPECT_NE(err.find("/nonexistent-dir/x/legacy.json"), std::string::npos) << err;
  EXPECT_FALSE(profiler_legacy_enabled());
}

TEST(RecordProfile, DestructorReportsInsteadOfThrowing) {
  WarningCapture warnings;
  std::ostringstream out;
  {
    RecordProfile guard(out);
    disable_profiler_legacy();  // someone else stopped it: nothing to write
  }
  EXPECT_TRUE(out.str().empty());
  EXPECT_TRUE(warnings.contains("RecordProfile: no legacy trace written"));
  EXPECT_TRUE(warnings.contains("Can't disable profiler when it's not running"));
}

TEST(WriteLegacyTrace, RefusesUnmatchedPopsAndAMissingStartMark) {
  const LegacyEvent start(Kind::kMark, "__start_profile", 1, 100);
  const LegacyEvent push(Kind::kPushRange, "op", 1, 200, 7);
  const LegacyEvent pop(Kind::kPopRange, "", 1, 300, 7);
  const LegacyEvent stray(Kind::kPopRange, "", 1, 400, 8);

  std::ostringstream ok;
  write_legacy_trace(ok, {{start, push, pop}});
  const nlohmann::json trace = parse(ok.str());
  ASSERT_EQ(trace.size(), 1u);
  EXPECT_DOUBLE_EQ(trace[0]["ts"].get<double>(), 0.1);
  EXPECT_DOUBLE_EQ(trace[0]["dur"].get<double>(), 0.1);

  std::ostringstream out;
  std::string err = error_of([&] { write_legacy_trace(out, {{start, push, pop, stray}}); });
  EXPECT_NE(err.find("Unmatched pop event"), std::string::npos) << err;
  EXPECT_NE(err.find("handle 8"), std::string::npos) << err;
  err = error_of([&] { write_legacy_trace(out, {{push, pop}}); });
  EXPECT_NE(err.find("Could not find __start_profile mark"), std::string::npos) << err;
  EXPECT_TRUE(out.str().empty()) << "nothing is written when the events are refused";
}

// --- remote events ------------------------------------------------------------------------------

LegacyEvent full_event() {
  LegacyEvent e(Kind::kPushRange, "aten::conv2d", 4242, 1'700'000'000'123'456'789, 0x1'0000'002A,
                {{1, 3, 224, 224}, {64, 3, 7, 7}, {}}, 3);
  e.set_memory_usage(-512, {});
  return e;
}

TEST(RemoteEvents, PortableValueHasTheTwelveFieldsInPyTorchsOrder) {
  const RecordedValue v = full_event().to_value();
  ASSERT_EQ(v.kind, ValueKind::kList);
  ASSERT_EQ(v.items.size(), 12u);
  EXPECT_EQ(v.items[0].i, static_cast<std::int64_t>(Kind::kPushRange));
  EXPECT_EQ(v.items[1].text, "aten::conv2d");
  EXPECT_EQ(v.items[2].i, 4242);
  EXPECT_EQ(v.items[3].kind, ValueKind::kDouble);
  EXPECT_EQ(v.items[3].d, static_cast<double>(0x1'0000'002A));
  EXPECT_EQ(v.items[4].i, 3);
  EXPECT_EQ(v.items[5].i, -512);
  EXPECT_EQ(v.items[6].i, 1'700'000'000'123'456'789);
  EXPECT_EQ(v.items[7].kind, ValueKind::kBool);
  EXPECT_EQ(v.items[10].i, -1);
  ASSERT_EQ(v.items[11].items.size(), 3u);
  EXPECT_EQ(v.items[11].items[1].items[3].i, 7);

  const LegacyEvent back = LegacyEvent::from_value(v);
  EXPECT_TRUE(back.is_remote());
  EXPECT_EQ(back.kind(), Kind::kPushRange);
  EXPECT_EQ(back.name(), "aten::conv2d");
  EXPECT_EQ(back.thread_id(), 4242u);
  EXPECT_EQ(back.handle(), 0x1'0000'002Au);
  EXPECT_EQ(back.node_id(), 3);
  EXPECT_EQ(back.cpu_memory_usage(), -512);
  EXPECT_EQ(back.cpu_ns(), 1'700'000'000'123'456'789);
  EXPECT_EQ(back.shapes(), full_event().shapes());
}

TEST(RemoteEvents, MalformedValuesNameTheField) {
  RecordedValue v = full_event().to_value();
  RecordedValue bad = v;
  bad.items[1] = recorded_int(5);
  EXPECT_EQ(error_of([&] { LegacyEvent::from_value(bad); }),
            "LegacyEvent::from_value: field 1 (name) must be a string, got an int");
  bad = v;
  bad.items[0] = recorded_int(9);
  EXPECT_NE(error_of([&] { LegacyEvent::from_value(bad); }).find("field 0 (kind) is 9"),
            std::string::npos);
  bad = v;
  bad.items.resize(6);
  EXPECT_NE(error_of([&] { LegacyEvent::from_value(bad); }).find("missing field 6 (cpu_ns)"),
            std::string::npos);
  bad = v;
  bad.items[11].items[0].items[0].kind = ValueKind::kString;
  EXPECT_NE(error_of([&] { LegacyEvent::from_value(bad); }).find("field 11 (shapes), shape 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { LegacyEvent::from_value(recorded_int(1)); }).find("expected a list"),
            std::string::npos);
}

TEST(RemoteEvents, BytesRoundTripAndEveryTruncationIsAnError) {
  std::vector<LegacyEvent> events = {
      full_event(), LegacyEvent(Kind::kPopRange, "", 4243, 99, 0x1'0000'002A, {}, 3),
      LegacyEvent(Kind::kMark, "name \"quoted\"\n", 1, -5)};
  const std::string bytes = serialize_legacy_events(events);
  const std::vector<LegacyEvent> back = deserialize_legacy_events(bytes);
  ASSERT_EQ(back.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back[i].to_value().items.size(), 12u);
    EXPECT_EQ(serialize_legacy_events(std::span(&back[i], 1)),
              serialize_legacy_events(std::span(&events[i], 1)));
  }
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    const std::string err = error_of([&] { deserialize_legacy_events(bytes.substr(0, n)); });
    EXPECT_FALSE(err.empty()) << "a prefix of " << n << " bytes was accepted";
  }
  EXPECT_NE(error_of([&] {
              deserialize_legacy_events(bytes.substr(0, bytes.size() - 1));
            }).find("event 2, field 11 (shapes): truncated"),
            std::string::npos);
  EXPECT_NE(error_of([&] { deserialize_legacy_events(bytes + "x"); }).find("1 bytes follow"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              deserialize_legacy_events("{\"json\": true}");
            }).find("not serialized legacy events"),
            std::string::npos);
}

TEST(RemoteEvents, RandomBytesNeverCrash) {
  const std::string good = serialize_legacy_events(std::vector<LegacyEvent>{full_event()});
  std::mt19937 rng(12345);
  int accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string bytes = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      bytes[8 + rng() % (bytes.size() - 8)] = static_cast<char>(rng());
    }
    try {
      accepted += deserialize_legacy_events(bytes).size() == 1;
    } catch (const Error&) {
    }
  }
  EXPECT_LT(accepted, 20000);  // most flips break a field's type or length
}

TEST(RemoteEvents, AddEventListNeedsAnEnabledProfilerAndKeepsListsPerNode) {
  LegacyGuard guard;
  EXPECT_NE(error_of([] { add_event_list({full_event()}); }).find("Profiler must be enabled"),
            std::string::npos);
  const std::vector<LegacyEvent> remote = deserialize_legacy_events(serialize_legacy_events(
      std::vector<LegacyEvent>{LegacyEvent(Kind::kPushRange, "far", 7, 1000, 5, {}, 2),
                               LegacyEvent(Kind::kPushRange, "farther", 7, 1000, 5, {}, 3),
                               LegacyEvent(Kind::kPopRange, "", 7, 3000, 5, {}, 3),
                               LegacyEvent(Kind::kPopRange, "", 7, 2000, 5, {}, 2)}));
  enable_profiler_legacy();
  nested_work();
  add_event_list(remote);
  const ThreadEventLists lists = disable_profiler_legacy();
  ASSERT_EQ(lists.size(), 3u);  // local, node 2, node 3
  EXPECT_EQ(shape_of(lists[1]), "push:far pop");
  EXPECT_EQ(lists[1][0].node_id(), 2);
  EXPECT_EQ(shape_of(lists[2]), "push:farther pop");
  EXPECT_EQ(lists[2][0].node_id(), 3);

  // Same handle on two nodes: matched per node.
  const auto result = legacy_result(lists);
  std::map<std::string, std::int64_t> durations;
  for (const Event& e : result->events()) durations[std::string(e.name)] = e.duration_ns();
  EXPECT_EQ(durations["far"], 1000);
  EXPECT_EQ(durations["farther"], 2000);
  EXPECT_EQ(result->stats().events_dropped, 0u);
  EXPECT_EQ(result->threads()[1].name, "node 2 thread 7");
}

// Runs the worker program and returns what it wrote to its stdout.
std::string run_worker(const std::vector<std::string>& args) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  std::vector<char*> argv;
  std::string program = OPSCOPE_LEGACY_WORKER;
  argv.push_back(program.data());
  std::vector<std::string> copies = args;
  for (auto& a : copies) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw std::runtime_error("posix_spawn " + program + " failed: " + std::to_string(rc));
  }
  std::string bytes;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) bytes.append(buf, n);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("the worker failed with status " + std::to_string(status));
  }
  return bytes;
}

TEST(RemoteEvents, EventsOfAChildProcessJoinTheParentsTraceAndTable) {
  LegacyGuard guard;
  enable_profiler_legacy();
  nested_work();
  // The child profiles its own work as node 1 and sends its events over a pipe.
  const std::string bytes = run_worker({"1", "5"});
  add_event_list(deserialize_legacy_events(bytes));
  const ThreadEventLists lists = disable_profiler_legacy();

  ASSERT_EQ(lists.size(), 2u);
  const auto& child = lists[1];
  EXPECT_EQ(child.front().node_id(), 1);
  EXPECT_TRUE(child.front().is_remote());
  EXPECT_NE(child.front().thread_id(), collect::current_tid());
  EXPECT_EQ(child.front().name(), "__start_profile");

  // The legacy trace holds both processes' ranges (matched per node).
  std::ostringstream out;
  write_legacy_trace(out, lists);
  std::map<std::string, int> counts;
  for (const auto& e : parse(out.str())) counts[e["name"].get<std::string>()]++;
  EXPECT_EQ(counts["outer"], 1);
  EXPECT_EQ(counts["remote::forward"], 5);
  EXPECT_EQ(counts["remote::mm"], 5);

  // And the table and the Chrome trace, through legacy_result.
  const auto result = legacy_result(lists);
  const std::string table = key_averages(*result).table({.sort_by = "cpu_time_total"});
  EXPECT_NE(table.find("remote::forward"), std::string::npos) << table;
  EXPECT_NE(table.find("outer"), std::string::npos) << table;
  TempDir dir;
  export_chrome_trace(*result, dir.file("merged.json"));
  const nlohmann::json chrome = parse(read_file(dir.file("merged.json")));
  bool named_node = false;
  for (const auto& e : chrome["traceEvents"]) {
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name" &&
        e["args"]["name"].get<std::string>().rfind("node 1 thread ", 0) == 0) {
      named_node = true;
    }
  }
  EXPECT_TRUE(named_node);
}

}  // namespace legacy_test
}  // namespace opscope
