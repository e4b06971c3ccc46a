// Module scopes (opscope/module.h, src/record/module.cpp): the module path ranges carry
// ("Module Hierarchy") and the "nn.Module: <name>" frames capture_stack places among the
// native frames of the functions that entered them.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "analysis/symbolizer.h"
#include "collect/string_table.h"
#include "opscope/export.h"
#include "opscope/module.h"
#include "opscope/profiler.h"
#include "opscope/record_function.h"
#include "record/stack_capture.h"
#include "support/unwinder_guard.h"

// Outside namespace opscope so that the symbolized names are unambiguous.
namespace opscope_modules_test {

using opscope::record::kMaxStackFrames;

struct Capture {
  std::array<std::uint64_t, kMaxStackFrames> words{};
  std::size_t n = 0;
  std::size_t max = kMaxStackFrames;
  std::uint64_t into_linear = 0;  // inner_capture's return address
  std::uint64_t into_mlp = 0;     // linear_forward's
  std::uint64_t into_caller = 0;  // mlp_forward's
};

inline void keep_frame() { asm volatile("" ::: "memory"); }
inline std::uint64_t address(void* p) { return reinterpret_cast<std::uint64_t>(p); }

[[gnu::noipa]] void inner_capture(Capture& c) {
  c.into_linear = address(__builtin_return_address(0));
  c.n = opscope::record::capture_stack(c.words.data(), c.max, 0, /*with_modules=*/true);
  keep_frame();
}

[[gnu::noipa]] void linear_forward(Capture& c) {
  c.into_mlp = address(__builtin_return_address(0));
  OPSCOPE_MODULE("Linear_0");
  inner_capture(c);
  keep_frame();
}

[[gnu::noipa]] void mlp_forward(Capture& c) {
  c.into_caller = address(__builtin_return_address(0));
  OPSCOPE_MODULE("MLP");
  linear_forward(c);
  keep_frame();
}

// Two modules entered in one function.
[[gnu::noipa]] void two_in_one_frame(Capture& c) {
  OPSCOPE_MODULE("Outer");
  {
    OPSCOPE_MODULE("Inner");
    inner_capture(c);
    keep_frame();
  }
  keep_frame();
}

// Ranges, as a model's layers would record them.
[[gnu::noipa]] void linear_op() {
  OPSCOPE_MODULE("Linear_0");
  OPSCOPE_RECORD_FUNCTION("aten::linear");
  keep_frame();
}

[[gnu::noipa]] void mlp_op() {
  OPSCOPE_MODULE("MLP");
  OPSCOPE_RECORD_FUNCTION("mlp_forward");
  linear_op();
  keep_frame();
}

[[gnu::noipa]] void unmoduled_op() {
  OPSCOPE_RECORD_FUNCTION("outside");
  keep_frame();
}

}  // namespace opscope_modules_test

namespace opscope {
namespace modules_test {

using nlohmann::json;
using opscope_modules_test::Capture;
using record::Unwinder;

// A frame word as a test reads it: a label's text, or "pc" for a native frame.
std::string label_or_pc(std::uint64_t word) {
  if (word & record::kLabelFrameBit) {
    return std::string(collect::interned(static_cast<std::uint32_t>(word)));
  }
  return "pc";
}

std::vector<std::string> shape_of(const Capture& c, std::size_t frames) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < std::min(frames, c.n); ++i) out.push_back(label_or_pc(c.words[i]));
  return out;
}

using opscope::testing::UnwinderGuard;

// Modules are entered only while a session records them.
class ModulesSession {
 public:
  explicit ModulesSession(bool with_stack = true)
      : profiler_({.lenses = {.with_stack = with_stack, .with_modules = true}}) {
    profiler_.start();
  }
  ~ModulesSession() {
    if (profiler_.is_started()) profiler_.stop();
  }
  Profiler& profiler() { return profiler_; }

 private:
  Profiler profiler_;
};

TEST(Modules, LabelsSitBetweenTheOwnersFrameAndItsCallees) {
  ModulesSession session;
  for (Unwinder u : {Unwinder::kFramePointers, Unwinder::kDwarf}) {
    SCOPED_TRACE(u == Unwinder::kDwarf ? "dwarf" : "frame pointers");
    UnwinderGuard guard(u);
    Capture c;
    opscope_modules_test::mlp_forward(c);
    // Innermost first: inner_capture, then Linear_0 entered by linear_forward, linear_forward,
    // MLP entered by mlp_forward, mlp_forward, this test.
    ASSERT_GE(c.n, 6u);
    EXPECT_EQ(shape_of(c, 6), (std::vector<std::string>{"pc", "nn.Module: Linear_0", "pc",
                                                        "nn.Module: MLP", "pc", "pc"}));
    EXPECT_EQ(c.words[2], c.into_linear);
    EXPECT_EQ(c.words[4], c.into_mlp);
    EXPECT_EQ(c.words[5], c.into_caller);
    for (std::size_t i = 6; i < c.n; ++i) {
      EXPECT_EQ(label_or_pc(c.words[i]), "pc") << i;  // no module left over
    }
    analysis::Symbolizer s;
    if (analysis::Symbolizer::reads_debug_info()) {
      EXPECT_EQ(s.resolve(c.words[0]).function.rfind("opscope_modules_test::inner_capture(", 0),
                0u);
      EXPECT_EQ(s.resolve(c.words[2]).function.rfind("opscope_modules_test::linear_forward(", 0),
                0u);
    }
  }
}

TEST(Modules, SeveralModulesInOneFrameKeepTheirNesting) {
  ModulesSession session;
  for (Unwinder u : {Unwinder::kFramePointers, Unwinder::kDwarf}) {
    UnwinderGuard guard(u);
    Capture c;
    opscope_modules_test::two_in_one_frame(c);
    EXPECT_EQ(shape_of(c, 5),
              (std::vector<std::string>{"pc", "nn.Module: Inner", "nn.Module: Outer", "pc", "pc"}));
  }
}

TEST(Modules, ACutStackKeepsItsModules) {
  ModulesSession session;
  for (Unwinder u : {Unwinder::kFramePointers, Unwinder::kDwarf}) {
    UnwinderGuard guard(u);
    for (const auto& [max, expected] :
         std::vector<std::pair<std::size_t, std::vector<std::string>>>{
             {4, {"pc", "nn.Module: Linear_0", "pc", "nn.Module: MLP"}},
             {3, {"pc", "nn.Module: Linear_0", "nn.Module: MLP"}},
             {2, {"nn.Module: Linear_0", "nn.Module: MLP"}},
             {1, {"nn.Module: Linear_0"}},
         }) {
      Capture c;
      c.max = max;
      opscope_modules_test::mlp_forward(c);
      EXPECT_EQ(c.n, max);
      EXPECT_EQ(shape_of(c, max), expected) << max;
    }
  }
}

TEST(Modules, NothingIsEnteredWithoutASessionThatRecordsModules) {
  Capture c;
  opscope_modules_test::mlp_forward(c);  // no session
  EXPECT_EQ(shape_of(c, 4), (std::vector<std::string>{"pc", "pc", "pc", "pc"}));
  EXPECT_EQ(internal::t_module, nullptr);

  Profiler stack_only({.lenses = {.with_stack = true}});
  stack_only.start();
  opscope_modules_test::mlp_forward(c);
  opscope_modules_test::mlp_op();
  stack_only.stop();
  EXPECT_EQ(shape_of(c, 4), (std::vector<std::string>{"pc", "pc", "pc", "pc"}));
  for (const Event& e : stack_only.result().events()) {
    const EventDetail* d = stack_only.result().detail(e);
    if (d == nullptr) continue;
    EXPECT_TRUE(d->module_path.empty()) << e.name;
    if (d->stack < 0) continue;
    for (const StackFrame& f : stack_only.result().stacks()[static_cast<std::size_t>(d->stack)]) {
      EXPECT_TRUE(f.is_native()) << f.label;
    }
  }
}

TEST(Modules, RangesCarryTheModulePath) {
  ModulesSession session(/*with_stack=*/false);
  opscope_modules_test::mlp_op();
  opscope_modules_test::unmoduled_op();
  EXPECT_EQ(internal::t_module, nullptr);  // every scope has left
  session.profiler().stop();
  const ProfilerResult& r = session.profiler().result();

  std::map<std::string, std::string> path_of;
  for (const Event& e : r.events()) {
    const EventDetail* d = r.detail(e);
    path_of[std::string(e.name)] = d == nullptr ? "" : std::string(d->module_path);
    if (d != nullptr) EXPECT_EQ(d->stack, -1) << e.name;  // no with_stack
  }
  EXPECT_EQ(path_of["aten::linear"], "MLP.Linear_0");
  EXPECT_EQ(path_of["mlp_forward"], "MLP");
  EXPECT_EQ(path_of["outside"], "");

  const json trace = json::parse(chrome_trace_json(r));
  int seen = 0;
  for (const json& e : trace["traceEvents"]) {
    const std::string name = e.value("name", "");
    if (name == "aten::linear") {
      ++seen;
      EXPECT_EQ(e["args"]["Module Hierarchy"], "MLP.Linear_0");
    } else if (name == "mlp_forward") {
      ++seen;
      EXPECT_EQ(e["args"]["Module Hierarchy"], "MLP");
    } else if (name == "outside") {
      ++seen;
      EXPECT_FALSE(e.contains("args") && e["args"].contains("Module Hierarchy"));
    }
  }
  EXPECT_EQ(seen, 3);
}

TEST(Modules, CallStacksOfRangesShowModuleFrames) {
  ModulesSession session;
  opscope_modules_test::mlp_op();
  session.profiler().stop();
  const ProfilerResult& r = session.profiler().result();

  const json trace = json::parse(chrome_trace_json(r));
  std::string call_stack;
  for (const json& e : trace["traceEvents"]) {
    if (e.value("name", "") == "aten::linear") call_stack = e["args"]["Call stack"];
  }
  // Innermost first: linear_op holds the range and entered Linear_0; mlp_op entered MLP.
  const std::size_t linear_module = call_stack.find("nn.Module: Linear_0");
  const std::size_t mlp_module = call_stack.find("nn.Module: MLP");
  ASSERT_NE(linear_module, std::string::npos) << call_stack;
  ASSERT_NE(mlp_module, std::string::npos) << call_stack;
  EXPECT_LT(linear_module, mlp_module) << call_stack;
  if (analysis::Symbolizer::reads_debug_info()) {
    const std::size_t linear_fn = call_stack.find("opscope_modules_test::linear_op()");
    const std::size_t mlp_fn = call_stack.find("opscope_modules_test::mlp_op()");
    ASSERT_NE(linear_fn, std::string::npos) << call_stack;
    ASSERT_NE(mlp_fn, std::string::npos) << call_stack;
    // linear_op is the innermost frame: the range is in it, inside its module, so the module
    // frame comes before it; then mlp_op's module, then mlp_op.
    EXPECT_LT(linear_module, linear_fn) << call_stack;
    EXPECT_LT(linear_fn, mlp_module) << call_stack;
    EXPECT_LT(mlp_module, mlp_fn) << call_stack;
  }
}

// The path of a name depends on its parent and on the text, not on where the text lives.
TEST(Modules, PathsFollowTheTextAndTheParent) {
  ModulesSession session(/*with_stack=*/false);
  std::string name = "Alpha";  // short: the text lives inside `name`, at one address
  const char* const where = name.c_str();
  {
    OPSCOPE_MODULE(name.c_str());
    opscope_modules_test::unmoduled_op();
  }
  name = "Bravo";
  ASSERT_EQ(name.c_str(), where);
  {
    OPSCOPE_MODULE(name.c_str());
    opscope_modules_test::unmoduled_op();
  }
  for (const char* parent : {"Encoder", "Decoder", "Encoder"}) {
    OPSCOPE_MODULE(parent);
    opscope_modules_test::linear_op();  // "Linear_0": one literal, two parents
  }
  session.profiler().stop();
  const ProfilerResult& r = session.profiler().result();
  std::vector<std::string> paths;
  for (const Event& e : r.events()) {
    if (e.name == "outside" || e.name == "aten::linear") {
      paths.emplace_back(r.detail(e)->module_path);
    }
  }
  EXPECT_EQ(paths, (std::vector<std::string>{"Alpha", "Bravo", "Encoder.Linear_0",
                                             "Decoder.Linear_0", "Encoder.Linear_0"}));
}

TEST(Modules, EachThreadHasItsOwnModules) {
  ModulesSession session(/*with_stack=*/false);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      const std::string name = "Worker_" + std::to_string(t);
      OPSCOPE_MODULE(name.c_str());
      for (int i = 0; i < 100; ++i) opscope_modules_test::linear_op();
    });
  }
  for (std::thread& t : threads) t.join();
  session.profiler().stop();
  const ProfilerResult& r = session.profiler().result();
  std::map<std::uint64_t, std::set<std::string>> paths_by_thread;
  for (const Event& e : r.events()) {
    if (e.name != "aten::linear") continue;
    paths_by_thread[r.threads()[e.thread].tid].insert(std::string(r.detail(e)->module_path));
  }
  ASSERT_EQ(paths_by_thread.size(), 4u);
  std::set<std::string> all;
  for (const auto& [tid, paths] : paths_by_thread) {
    ASSERT_EQ(paths.size(), 1u) << tid;
    all.insert(*paths.begin());
  }
  EXPECT_EQ(all, (std::set<std::string>{"Worker_0.Linear_0", "Worker_1.Linear_0",
                                        "Worker_2.Linear_0", "Worker_3.Linear_0"}));
}

}  // namespace modules_test
}  // namespace opscope
