// The foreign stack provider (src/record/stack_capture.h): what a runtime such as Python
// appends to the native frames of ranges recorded with with_stack, and the modules it, not
// the native walk, places.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "collect/string_table.h"
#include "opscope/module.h"
#include "opscope/profiler.h"
#include "opscope/record_function.h"
#include "record/stack_capture.h"
#include "support/unwinder_guard.h"

namespace opscope_foreign_stack_test {

using opscope::record::kLabelFrameBit;

std::atomic<int> g_calls{0};
std::uint32_t g_outer_id = 0;
std::uint32_t g_inner_id = 0;

// A fake runtime with two frames: cuts every native frame but the innermost (as Python's
// provider cuts the interpreter) and appends its frames after it, innermost first.
std::size_t fake_provider(std::uint64_t* words, std::size_t n, std::size_t max) noexcept {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  std::size_t kept = n > 0 ? 1 : 0;
  if (kept < max) words[kept++] = kLabelFrameBit | g_inner_id;
  if (kept < max) words[kept++] = kLabelFrameBit | g_outer_id;
  return kept;
}

// Installs the fake provider for one test and removes it after.
class ForeignStack : public ::testing::Test {
 protected:
  void SetUp() override {
    g_calls = 0;
    g_inner_id = opscope::collect::intern("script.py(12): inner");
    g_outer_id = opscope::collect::intern("script.py(30): <module>");
    opscope::record::set_foreign_stack_provider(&fake_provider);
  }
  void TearDown() override { opscope::record::set_foreign_stack_provider(nullptr); }
};

std::vector<std::string> labels_of(const opscope::ProfilerResult& r, std::string_view name) {
  std::vector<std::string> out;
  for (const opscope::Event& e : r.events()) {
    if (e.name != name) continue;
    const opscope::EventDetail* d = r.detail(e);
    if (d == nullptr || d->stack < 0) continue;
    for (const opscope::StackFrame& f : r.stacks()[static_cast<std::size_t>(d->stack)]) {
      out.push_back(f.is_native() ? std::string("<native>") : std::string(f.label));
    }
  }
  return out;
}

[[gnu::noipa]] void ranged() { OPSCOPE_RECORD_FUNCTION("with_foreign"); }

TEST_F(ForeignStack, ProviderFramesFollowTheNativeFrames) {
  opscope::Profiler p({.lenses = {.with_stack = true}});
  p.start();
  ranged();
  p.stop();
  EXPECT_GE(g_calls.load(), 1);  // the session may record ranges of its own too
  const std::vector<std::string> frames = labels_of(p.result(), "with_foreign");
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0], "<native>");
  EXPECT_EQ(frames[1], "script.py(12): inner");
  EXPECT_EQ(frames[2], "script.py(30): <module>");
}

TEST_F(ForeignStack, NotCalledWithoutWithStack) {
  opscope::Profiler p({.lenses = {.record_shapes = true}});
  p.start();
  ranged();
  p.stop();
  EXPECT_EQ(g_calls.load(), 0);
}

TEST_F(ForeignStack, RemovedProviderIsNotCalled) {
  opscope::record::set_foreign_stack_provider(nullptr);
  opscope::Profiler p({.lenses = {.with_stack = true}});
  p.start();
  ranged();
  p.stop();
  EXPECT_EQ(g_calls.load(), 0);
  for (const std::string& f : labels_of(p.result(), "with_foreign")) EXPECT_EQ(f, "<native>");
}

TEST(ForeignStackLabels, AnIdNoInternGaveReadsAsUnknownNotOutOfBounds) {
  // A damaged stack (a record written into it) once read back a word as label 0xffffffe0 and
  // crashed the export; such an id now reads as a name that says so.
  const std::uint32_t id = opscope::collect::intern("script.py(1): known");
  EXPECT_EQ(opscope::collect::interned(id), "script.py(1): known");
  EXPECT_EQ(opscope::collect::interned(0xffffffe0u), "<unknown name>");
}

// A module entered by foreign code (stack_address nullptr) is the provider's to place: the
// native walk leaves it out, and still places the native modules around it.
class ForeignModules : public ::testing::TestWithParam<opscope::record::Unwinder> {};

TEST_P(ForeignModules, NativeWalkSkipsForeignModules) {
  opscope::testing::UnwinderGuard unwinder(GetParam());
  const std::uint32_t foreign_label = opscope::collect::intern("nn.Module: FromPython");
  const opscope::internal::ModuleFrame foreign{nullptr, nullptr, 0, foreign_label};
  const opscope::internal::ModuleFrame* saved = opscope::internal::t_module;
  opscope::internal::t_module = &foreign;
  std::uint64_t words[opscope::record::kMaxStackFrames];
  const std::size_t n =
      opscope::record::capture_stack(words, opscope::record::kMaxStackFrames, 0, true);
  opscope::internal::t_module = saved;
  ASSERT_GT(n, 0u);
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_NE(words[i], kLabelFrameBit | foreign_label) << "frame " << i;
  }
}

// A foreign module entered inside a native one (Python called from C++ that entered a
// module): the native module is still placed, the foreign one still skipped.
[[gnu::noipa]] std::vector<std::uint64_t> capture_inside_native_module(
    std::uint32_t foreign_label) {
  OPSCOPE_MODULE("NativeOuter");
  const opscope::internal::ModuleFrame foreign{opscope::internal::t_module, nullptr, 0,
                                               foreign_label};
  const opscope::internal::ModuleFrame* saved = opscope::internal::t_module;
  opscope::internal::t_module = &foreign;
  std::vector<std::uint64_t> words(opscope::record::kMaxStackFrames);
  words.resize(opscope::record::capture_stack(words.data(), words.size(), 0, true));
  opscope::internal::t_module = saved;
  return words;
}

TEST_P(ForeignModules, NativeModulesAroundForeignOnesArePlaced) {
  opscope::testing::UnwinderGuard unwinder(GetParam());
  opscope::Profiler p(
      {.lenses = {.with_stack = true, .with_modules = true}});  // enables module scopes
  p.start();
  const std::uint32_t foreign_label = opscope::collect::intern("nn.Module: FromPython");
  const std::uint32_t native_label = opscope::collect::intern("nn.Module: NativeOuter");
  const std::vector<std::uint64_t> words = capture_inside_native_module(foreign_label);
  p.stop();
  EXPECT_EQ(std::count(words.begin(), words.end(), kLabelFrameBit | native_label), 1);
  EXPECT_EQ(std::count(words.begin(), words.end(), kLabelFrameBit | foreign_label), 0);
}

INSTANTIATE_TEST_SUITE_P(BothUnwinders, ForeignModules,
                         ::testing::Values(opscope::record::Unwinder::kFramePointers,
                                           opscope::record::Unwinder::kDwarf));

}  // namespace opscope_foreign_stack_test
