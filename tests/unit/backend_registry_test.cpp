// The backend registry (backend/registry.h): the rows this build has, what they say on this
// machine, which backends a window's request gets, and that a Profiler's WARMUP step prepares
// the window's backends so that its RECORD step only starts them.
#include "backend/registry.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/cuda_events.h"
#include "backend/cuda_probe.h"
#include "opscope/error.h"
#include "opscope/profiler.h"
#include "opscope/record_function.h"
#include "session/recorder.h"

namespace opscope::backend {
namespace backend_registry_test {

std::vector<std::string> row_names() {
  std::vector<std::string> names;
  for (const BackendEntry* e : backend_entries()) names.emplace_back(e->name);
  return names;
}

TEST(BackendRegistry, HasARowPerBackendFileInFileOrder) {
  // The CUDA row is in every build: without CUPTI its reason says so (cuda_probe.cpp).
  EXPECT_EQ(row_names(), (std::vector<std::string>{"cpu", "cuda", "cuda_events"}));
  const auto rows = backend_entries();
  EXPECT_EQ(rows[0]->activity, ActivityType::kCPU);
  EXPECT_FALSE(rows[0]->times_ranges);
  EXPECT_EQ(rows[1]->activity, ActivityType::kCUDA);
  EXPECT_FALSE(rows[1]->times_ranges);
  EXPECT_EQ(rows[2]->activity, ActivityType::kCUDA);
  EXPECT_TRUE(rows[2]->times_ranges);
}

TEST(BackendRegistry, SaysWhatThisMachineCannotRecordAndWhy) {
  const auto rows = backend_entries();
  EXPECT_EQ(rows[0]->unavailable_reason(), "");
  EXPECT_EQ(rows[1]->unavailable_reason(), cuda_probe().reason);
  EXPECT_EQ(rows[2]->unavailable_reason(), cuda_event_timing_unavailable_reason());
  EXPECT_EQ(backend::activity_unavailable_reason(ActivityType::kCPU), "");
  EXPECT_EQ(backend::activity_unavailable_reason(ActivityType::kCUDA), cuda_probe().reason);
  EXPECT_EQ(range_timing_unavailable_reason(ActivityType::kCUDA),
            cuda_event_timing_unavailable_reason());
  EXPECT_NE(range_timing_unavailable_reason(ActivityType::kCPU).find("no backend"),
            std::string::npos);
  // The façade answers from the registry.
  EXPECT_EQ(opscope::activity_unavailable_reason(ActivityType::kCUDA), cuda_probe().reason);
  if (cuda_probe().recordable) GTEST_SKIP() << "this machine can record CUDA activity";
  EXPECT_FALSE(rows[1]->unavailable_reason().empty());
  EXPECT_EQ(supported_activities(), (std::vector<ActivityType>{ActivityType::kCPU}));
}

TEST(BackendRegistry, AWindowGetsTheAvailableBackendsItAsksFor) {
  WindowRequest cpu;
  auto backends = make_backends(cpu);
  ASSERT_EQ(backends.size(), 1u);
  EXPECT_EQ(backends[0]->name(), "cpu");

  WindowRequest none;
  none.activities = {};
  EXPECT_TRUE(make_backends(none).empty());

  const auto rows = backend_entries();
  WindowRequest both;
  both.activities = {ActivityType::kCPU, ActivityType::kCUDA};
  both.timed_range_threads = [] { return true; };
  EXPECT_TRUE(asks_for(both, *rows[0]));
  EXPECT_TRUE(asks_for(both, *rows[1]));
  EXPECT_TRUE(asks_for(both, *rows[2]));
  EXPECT_FALSE(asks_for(cpu, *rows[1]));
  EXPECT_FALSE(asks_for(cpu, *rows[2]));
  if (!cuda_probe().reason.empty() && !cuda_event_timing_unavailable_reason().empty()) {
    // Asked for but not available here: left out (the session lists it as not recorded).
    backends = make_backends(both);
    ASSERT_EQ(backends.size(), 1u);
    EXPECT_EQ(backends[0]->name(), "cpu");
  }
}

// A backend that counts what the recorder asks of it.
struct Calls {
  int made = 0;
  int prepared = 0;
  int started = 0;
  int stopped = 0;
  int collected = 0;
  bool fail_prepare = false;
};
Calls g_calls;

class CountingBackend final : public ActivityBackend {
 public:
  std::string_view name() const override { return "counting"; }
  void prepare() override {
    ++g_calls.prepared;
    if (g_calls.fail_prepare) throw Error("the counting backend cannot prepare");
  }
  void start() override { ++g_calls.started; }
  void stop() override { ++g_calls.stopped; }
  void collect(ProfilerResult::Builder&, const clock::TickConverter&) override {
    ++g_calls.collected;
  }
};

constexpr BackendEntry kCountingEntry{
    .name = "counting",
    .activity = ActivityType::kCPU,
    .unavailable_reason = [] { return std::string(); },
    .make = [](const WindowRequest&) -> std::unique_ptr<ActivityBackend> {
      ++g_calls.made;
      return std::make_unique<CountingBackend>();
    },
};

// The counting row, registered for one test.
class WithCountingBackend : public ::testing::Test {
 protected:
  WithCountingBackend() {
    g_calls = {};
    set_test_backend_entry(&kCountingEntry);
  }
  ~WithCountingBackend() override { set_test_backend_entry(nullptr); }
};

TEST_F(WithCountingBackend, ATestRowComesLast) {
  EXPECT_EQ(row_names(), (std::vector<std::string>{"cpu", "cuda", "cuda_events", "counting"}));
  const auto backends = make_backends(WindowRequest{});
  ASSERT_EQ(backends.size(), 2u);
  EXPECT_EQ(backends[1]->name(), "counting");
}

TEST_F(WithCountingBackend, WarmupPreparesTheWindowAndRecordOnlyStartsIt) {
  Profiler prof({.schedule = schedule({.wait = 0, .warmup = 1, .active = 1, .repeat = 1})});
  prof.start();  // step 0: WARMUP
  EXPECT_EQ(prof.current_action(), ProfilerAction::kWarmup);
  EXPECT_EQ(g_calls.made, 1);
  EXPECT_EQ(g_calls.prepared, 1);
  EXPECT_EQ(g_calls.started, 0);
  prof.step();  // step 1: RECORD_AND_SAVE
  EXPECT_EQ(prof.current_action(), ProfilerAction::kRecordAndSave);
  EXPECT_EQ(g_calls.made, 1);
  EXPECT_EQ(g_calls.prepared, 1);  // not twice
  EXPECT_EQ(g_calls.started, 1);
  { OPSCOPE_RECORD_FUNCTION("recorded"); }
  prof.step();  // step 2: NONE, the window closes
  EXPECT_EQ(g_calls.stopped, 1);
  EXPECT_EQ(g_calls.collected, 1);
  prof.stop();
  EXPECT_EQ(g_calls.prepared, 1);
  EXPECT_EQ(g_calls.started, 1);
  // The CPU backend beside it recorded as before.
  bool found = false;
  for (const Event& e : prof.result().events()) found = found || e.name == "recorded";
  EXPECT_TRUE(found);
}

TEST_F(WithCountingBackend, WithoutAScheduleTheWindowIsPreparedOnceAtStart) {
  Profiler prof;
  prof.start();
  EXPECT_EQ(g_calls.prepared, 1);
  EXPECT_EQ(g_calls.started, 1);
  prof.stop();
  EXPECT_EQ(g_calls.prepared, 1);
  EXPECT_EQ(g_calls.stopped, 1);
}

TEST_F(WithCountingBackend, AFailedPrepareLeavesNothingPreparedAndStartTriesAgain) {
  static int owner;
  session::Recorder::claim(&owner, "the test");
  session::Recorder recorder;
  session::WindowOptions w;
  g_calls.fail_prepare = true;
  EXPECT_THROW(recorder.prepare_window(w), Error);
  EXPECT_EQ(g_calls.prepared, 1);
  g_calls.fail_prepare = false;
  recorder.start_window(w);  // prepares anew: nothing was left prepared
  EXPECT_EQ(g_calls.made, 2);
  EXPECT_EQ(g_calls.prepared, 2);
  EXPECT_EQ(g_calls.started, 1);
  recorder.stop_window({});
  session::Recorder::release(&owner);
  EXPECT_EQ(g_calls.collected, 1);
}

}  // namespace backend_registry_test
}  // namespace opscope::backend
