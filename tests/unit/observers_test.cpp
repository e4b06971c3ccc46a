#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "opscope/error.h"
#include "opscope/profiler.h"
#include "opscope/observer.h"
#include "opscope/record_function.h"
#include "opscope/thread_local_state.h"

namespace opscope {
namespace observers_test {

class Counting : public ObserverContext {
 public:
  explicit Counting(std::string n) : name(std::move(n)) {}
  std::string name;
};

class ObserversTest : public ::testing::Test {
 protected:
  void TearDown() override { clear_callbacks(); }
};

TEST_F(ObserversTest, GlobalStartAndEndSeeTheRangeAndTheirContext) {
  std::vector<std::string> log;
  const CallbackHandle h = add_global_callback(RecordFunctionCallback(
      [&](const RecordFunction& rf) -> std::unique_ptr<ObserverContext> {
        log.push_back("start " + std::string(rf.name()));
        return std::make_unique<Counting>(std::string(rf.name()));
      },
      [&](const RecordFunction& rf, ObserverContext* ctx) {
        log.push_back("end " + std::string(rf.name()) + " ctx=" +
                      static_cast<Counting*>(ctx)->name);
      }));
  EXPECT_TRUE(has_global_callbacks());
  EXPECT_TRUE(has_callbacks());
  {
    OPSCOPE_RECORD_FUNCTION("a");
    { RecordFunction b("b"); }
  }
  EXPECT_EQ(log, (std::vector<std::string>{"start a", "start b", "end b ctx=b", "end a ctx=a"}));
  EXPECT_TRUE(remove_callback(h));
  EXPECT_FALSE(remove_callback(h));
  EXPECT_FALSE(has_callbacks());
  { OPSCOPE_RECORD_FUNCTION("after"); }
  EXPECT_EQ(log.size(), 4u);
}

TEST_F(ObserversTest, ScopeFilter) {
  std::vector<std::string> seen;
  add_global_callback(RecordFunctionCallback([&](const RecordFunction& rf) {
                        seen.emplace_back(rf.name());
                        return std::unique_ptr<ObserverContext>();
                      }).scopes({RecordScope::kUserScope}));
  { OPSCOPE_RECORD_FUNCTION("op"); }
  { OPSCOPE_USER_SCOPE("user"); }
  EXPECT_EQ(seen, std::vector<std::string>{"user"});
}

TEST_F(ObserversTest, SamplingProbability) {
  std::atomic<int> n{0};
  add_global_callback(RecordFunctionCallback([&](const RecordFunction&) {
                        ++n;
                        return std::unique_ptr<ObserverContext>();
                      }).sampling_prob(0.1));
  for (int i = 0; i < 20000; ++i) {
    OPSCOPE_RECORD_FUNCTION("sampled");
  }
  // Binomial(20000, 0.1): mean 2000, sd 42; 10 sd either way.
  EXPECT_GT(n.load(), 1580);
  EXPECT_LT(n.load(), 2420);
  EXPECT_THROW(RecordFunctionCallback([](const RecordFunction&) { return nullptr; }).sampling_prob(0),
               Error);
  EXPECT_THROW(RecordFunctionCallback([](const RecordFunction&) { return nullptr; }).sampling_prob(1.5),
               Error);
}

TEST_F(ObserversTest, NeedsInputsAndIds) {
  bool needs_inputs = false;
  std::uint64_t handle = 0;
  add_global_callback(RecordFunctionCallback([&](const RecordFunction& rf) {
                        needs_inputs = rf.needs_inputs();
                        handle = rf.handle();
                        return std::unique_ptr<ObserverContext>();
                      })
                          .needs_inputs(true)
                          .needs_ids(true));
  { OPSCOPE_RECORD_FUNCTION("with_inputs"); }
  EXPECT_TRUE(needs_inputs);
  EXPECT_NE(handle, 0u);
}

TEST_F(ObserversTest, ThreadLocalOnlySeesItsThreadAndCarriers) {
  std::atomic<int> seen{0};
  add_thread_local_callback(RecordFunctionCallback([&](const RecordFunction&) {
    ++seen;
    return std::unique_ptr<ObserverContext>();
  }));
  EXPECT_TRUE(has_thread_local_callbacks());
  EXPECT_FALSE(has_global_callbacks());
  { OPSCOPE_RECORD_FUNCTION("here"); }
  EXPECT_EQ(seen.load(), 1);
  std::thread([] { OPSCOPE_RECORD_FUNCTION("elsewhere"); }).join();
  EXPECT_EQ(seen.load(), 1);
  std::thread(wrap([] { OPSCOPE_RECORD_FUNCTION("carried"); })).join();
  EXPECT_EQ(seen.load(), 2);
  ThreadLocalState state;
  std::thread([&] {
    {
      ThreadLocalStateGuard guard(state);
      OPSCOPE_RECORD_FUNCTION("guarded");
    }
    OPSCOPE_RECORD_FUNCTION("after_guard");
  }).join();
  EXPECT_EQ(seen.load(), 3);
}

TEST_F(ObserversTest, ObserversAndSessionTogether) {
  int starts = 0;
  add_global_callback(RecordFunctionCallback([&](const RecordFunction&) {
    ++starts;
    return std::unique_ptr<ObserverContext>();
  }));
  Profiler prof;
  prof.start();
  { OPSCOPE_RECORD_FUNCTION("both"); }
  prof.stop();
  int recorded = 0;
  for (const Event& e : prof.result().events()) recorded += e.name == "both";
  EXPECT_EQ(recorded, 1);
  EXPECT_GE(starts, 1);  // "both" and the ProfilerStep#0 range
}

TEST_F(ObserversTest, AThrowingObserverDoesNotEscape) {
  add_global_callback(RecordFunctionCallback(
      [](const RecordFunction&) -> std::unique_ptr<ObserverContext> { throw std::runtime_error("x"); },
      [](const RecordFunction&, ObserverContext*) { throw std::runtime_error("y"); }));
  const auto run = [] { OPSCOPE_RECORD_FUNCTION("survives"); };
  EXPECT_NO_THROW(run());
}

TEST_F(ObserversTest, RegisteringNothingIsAnError) {
  EXPECT_THROW(add_global_callback(RecordFunctionCallback(nullptr, nullptr)), Error);
}

}  // namespace observers_test
}  // namespace opscope
