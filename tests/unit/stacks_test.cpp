// Call stacks as the user sees them (src/analysis/stacks.h): the Chrome trace's "Call stack",
// the "Source Location" column of key_averages(group_by_stack_n).table(), end to end through
// a Profiler with with_stack, and a golden table from a hand-built result.
#include "analysis/stacks.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "opscope/export.h"
#include "opscope/key_averages.h"
#include "opscope/profiler.h"
#include "opscope/record_function.h"
#include "support/test_support.h"

// Outside namespace opscope so that the symbolized names are unambiguous.
namespace opscope_stacks_test {

inline void keep_frame() { asm volatile("" ::: "memory"); }

constexpr int kLeafRangeLine = __LINE__ + 2;
[[gnu::noipa]] void traced_leaf() {
  OPSCOPE_RECORD_FUNCTION("test::leaf");
  keep_frame();
}

[[gnu::noipa]] void traced_caller() {
  traced_leaf();
  keep_frame();
}

// A range with a dynamic name, which enters through a different slow path.
[[gnu::noipa]] void traced_dynamic() {
  opscope::RecordFunction rf(std::string_view("test::dynamic"));
  keep_frame();
}

// A range in a function the compiler inlines into its caller (as -O2 does with small ones).
constexpr int kInlinedRangeLine = __LINE__ + 2;
[[gnu::always_inline]] inline void traced_inlined() {
  OPSCOPE_RECORD_FUNCTION("test::inlined");
  keep_frame();
}

constexpr int kInlinedCallLine = __LINE__ + 3;
[[gnu::noipa]] void calls_traced_inlined() {
  keep_frame();
  traced_inlined();
  keep_frame();
}

[[gnu::noipa]] void traced_with_flops() {
  opscope::RecordFunction rf(std::string_view("test::flops"));
  rf.set_flops(2048);
  keep_frame();
}

}  // namespace opscope_stacks_test

namespace opscope {
namespace stacks_test {

using nlohmann::json;

constexpr std::int64_t kBase = 1'700'000'000'000'000'000;
constexpr std::int64_t kUs = 1000;

// Function names of this file's static functions need libdw; their lines need debug info in
// the test binary (-g), which Release builds leave out.
bool has_names() { return analysis::Symbolizer::reads_debug_info(); }
bool has_lines() {
  analysis::Symbolizer s;
  return s.resolve(reinterpret_cast<std::uint64_t>(&opscope_stacks_test::traced_leaf) + 1).line > 0;
}

// A frame of this file as Symbolizer::text writes it.
std::string frame_text(std::string_view function, int line) {
  if (!has_lines()) return std::string(function);
  return "unit/stacks_test.cpp(" + std::to_string(line) + "): " + std::string(function);
}

std::vector<json> events_named(const json& trace, std::string_view name) {
  std::vector<json> out;
  for (const json& e : trace["traceEvents"]) {
    if (e.value("name", "") == name) out.push_back(e);
  }
  return out;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = text.find(sep, begin);
    out.push_back(text.substr(begin, end - begin));
    if (end == std::string::npos) return out;
    begin = end + 1;
  }
}

// The table's columns as [begin, end) offsets, from its first separator line ("----  ----").
struct Columns {
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  std::vector<std::string> headers;
  std::vector<std::string> lines;

  explicit Columns(const std::string& table) : lines(split(table, '\n')) {
    const std::string& sep = lines.at(0);
    for (std::size_t i = 0; i < sep.size();) {
      if (sep[i] != '-') {
        ++i;
        continue;
      }
      std::size_t j = i;
      while (j < sep.size() && sep[j] == '-') ++j;
      spans.emplace_back(i, j);
      i = j;
    }
    for (std::size_t c = 0; c < spans.size(); ++c) headers.push_back(cell(lines.at(1), c));
  }
  static std::string trim(std::string s) {
    const std::size_t b = s.find_first_not_of(' ');
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(' ') - b + 1);
  }
  std::string cell(const std::string& line, std::size_t column) const {
    const auto [b, e] = spans.at(column);
    return b >= line.size() ? "" : trim(line.substr(b, e - b));
  }
  std::size_t column(std::string_view header) const {
    for (std::size_t c = 0; c < headers.size(); ++c) {
      if (headers[c] == header) return c;
    }
    return spans.size();
  }
  // The row whose Name cell is `name`, and the continuation lines under it.
  std::vector<std::string> row(std::string_view name) const {
    std::vector<std::string> out;
    for (std::size_t i = 3; i < lines.size(); ++i) {
      if (cell(lines[i], 0) != name) continue;
      out.push_back(lines[i]);
      for (std::size_t j = i + 1; j < lines.size() && cell(lines[j], 0).empty() &&
                                  !Columns::trim(lines[j]).empty() && lines[j][0] != '-';
           ++j) {
        out.push_back(lines[j]);
      }
      return out;
    }
    return out;
  }
};

TEST(Stacks, TraceCallStackStartsAtTheFunctionHoldingTheRange) {
  Profiler prof({.lenses = {.with_stack = true}});
  prof.start();
  opscope_stacks_test::traced_caller();
  opscope_stacks_test::traced_dynamic();
  prof.stop();

  const json trace = json::parse(chrome_trace_json(prof.result()));
  const auto leaf = events_named(trace, "test::leaf");
  ASSERT_EQ(leaf.size(), 1u);
  ASSERT_TRUE(leaf[0]["args"].contains("Call stack")) << leaf[0].dump();
  const std::vector<std::string> frames = split(leaf[0]["args"]["Call stack"], ';');
  ASSERT_GE(frames.size(), 3u) << leaf[0].dump();
  // Innermost first, as Kineto writes it; opscope's own frames are left out.
  if (has_names()) {
    EXPECT_EQ(frames[0], frame_text("opscope_stacks_test::traced_leaf()",
                                    opscope_stacks_test::kLeafRangeLine));
    EXPECT_NE(frames[1].find("opscope_stacks_test::traced_caller()"), std::string::npos)
        << frames[1];
    EXPECT_NE(frames[2].find("TraceCallStackStartsAtTheFunctionHoldingTheRange"), std::string::npos)
        << frames[2];
  }
  for (const std::string& f : frames) {
    EXPECT_EQ(f.find("opscope::RecordFunction"), std::string::npos) << f;
    EXPECT_EQ(f.find("opscope::record::"), std::string::npos) << f;
  }

  const auto dynamic = events_named(trace, "test::dynamic");
  ASSERT_EQ(dynamic.size(), 1u);
  const std::vector<std::string> dynamic_frames = split(dynamic[0]["args"]["Call stack"], ';');
  if (has_names()) {
    EXPECT_NE(dynamic_frames.at(0).find("opscope_stacks_test::traced_dynamic()"), std::string::npos)
        << dynamic[0].dump();
  }
}

// The range's own function comes first even when it was inlined, at the line of the range,
// and opscope's inlined RecordFunction code is not a frame; then the caller, at the call.
TEST(Stacks, ARangeInAnInlinedFunctionStartsAtThatFunction) {
  if (!has_lines()) GTEST_SKIP() << "the test binary has no debug info (Release): no inlining data";
  Profiler prof({.lenses = {.with_stack = true}});
  prof.start();
  opscope_stacks_test::calls_traced_inlined();
  prof.stop();
  const Event* inlined = nullptr;
  for (const Event& e : prof.result().events()) {
    if (e.name == "test::inlined") inlined = &e;
  }
  ASSERT_NE(inlined, nullptr);
  analysis::Symbolizer symbolizer;
  const std::vector<std::string> frames = analysis::stack_text(prof.result(), *inlined, symbolizer);
  ASSERT_GE(frames.size(), 2u);
  EXPECT_NE(frames[0].find("(" + std::to_string(opscope_stacks_test::kInlinedRangeLine) +
                           "): opscope_stacks_test::traced_inlined"),
            std::string::npos)
      << frames[0];
  EXPECT_EQ(frames[1], frame_text("opscope_stacks_test::calls_traced_inlined()",
                                  opscope_stacks_test::kInlinedCallLine));
  for (const std::string& f : frames)
    EXPECT_EQ(f.find("record_function.h"), std::string::npos) << f;
}

// A worker thread's stack ends at the outermost frame that has a name: the unnamed start-up
// code under it (libstdc++'s std::thread trampoline) is left out.
TEST(Stacks, AWorkerThreadsStackEndsAtItsOutermostNamedFrame) {
  if (!has_names()) GTEST_SKIP() << "built without libdw: this file's functions have no names";
  Profiler prof({.lenses = {.with_stack = true}});
  prof.start();
  std::thread([] { opscope_stacks_test::traced_caller(); }).join();
  prof.stop();
  analysis::Symbolizer symbolizer;
  for (const Event& e : prof.result().events()) {
    if (e.name != "test::leaf") continue;
    const std::vector<std::string> frames = analysis::stack_text(prof.result(), e, symbolizer);
    ASSERT_GE(frames.size(), 2u);
    EXPECT_NE(frames[0].find("traced_leaf"), std::string::npos) << frames[0];
    EXPECT_EQ(frames.back().find("+0x"), std::string::npos) << frames.back();
    return;
  }
  FAIL() << "no test::leaf range";
}

TEST(Stacks, NoCallStackWithoutWithStack) {
  Profiler prof;
  prof.start();
  opscope_stacks_test::traced_caller();
  prof.stop();
  const json trace = json::parse(chrome_trace_json(prof.result()));
  const auto leaf = events_named(trace, "test::leaf");
  ASSERT_EQ(leaf.size(), 1u);
  EXPECT_FALSE(leaf[0].contains("args") && leaf[0]["args"].contains("Call stack"));
  EXPECT_TRUE(prof.result().stacks().empty());
}

TEST(Stacks, EqualStacksAreStoredOnce) {
  Profiler prof({.lenses = {.with_stack = true}});
  prof.start();
  // One call site: an unrolled loop would call from several addresses, each its own stack.
  volatile int calls = 10;
#pragma GCC unroll 1
  for (int i = 0; i < calls; ++i) opscope_stacks_test::traced_caller();
  prof.stop();
  const ProfilerResult& r = prof.result();
  std::vector<std::int32_t> ids;
  for (const Event& e : r.events()) {
    if (e.name == "test::leaf") ids.push_back(r.detail(e)->stack);
  }
  ASSERT_EQ(ids.size(), 10u);
  for (std::int32_t id : ids) EXPECT_EQ(id, ids[0]);  // same call site, same stack
}

TEST(Stacks, SourceLocationColumnBeforeFlopsAsInPyTorchsHeader) {
  Profiler prof({.lenses = {.with_stack = true, .with_flops = true}});
  prof.start();
  opscope_stacks_test::traced_caller();
  opscope_stacks_test::traced_with_flops();
  prof.stop();

  const std::string table = prof.key_averages(false, 5).table();
  const Columns t(table);
  const std::size_t src = t.column("Source Location");
  const std::size_t flops = t.column("Total KFLOPs");  // 2048 FLOPs: the K scale
  ASSERT_LT(src, t.spans.size()) << table;
  ASSERT_LT(flops, t.spans.size()) << table;
  EXPECT_EQ(flops, src + 1) << table;  // the last two columns, as PyTorch's header has them
  EXPECT_EQ(flops, t.spans.size() - 1) << table;

  const std::vector<std::string> with_flops = t.row("test::flops");
  ASSERT_FALSE(with_flops.empty()) << table;
  EXPECT_EQ(t.cell(with_flops[0], flops), "2.048") << table;
  const std::vector<std::string> leaf = t.row("test::leaf");
  ASSERT_GE(leaf.size(), 2u) << table;
  EXPECT_EQ(t.cell(leaf[0], flops), "--") << table;
  if (has_names()) {
    EXPECT_NE(t.cell(with_flops[0], src).find("traced_with_flops()"), std::string::npos) << table;
    if (has_lines()) {
      EXPECT_EQ(t.cell(with_flops[0], src).find("unit/stacks_test.cpp("), 0u) << table;
    }
    // The innermost frame on the row itself, the callers on the lines below it.
    EXPECT_EQ(t.cell(leaf[0], src),
              frame_text("opscope_stacks_test::traced_leaf()", opscope_stacks_test::kLeafRangeLine))
        << table;
    EXPECT_NE(t.cell(leaf[1], src).find("traced_caller()"), std::string::npos) << table;
  }
}

TEST(Stacks, GroupByStackSplitsRowsByCallSite) {
  Profiler prof({.lenses = {.with_stack = true}});
  prof.start();
  opscope_stacks_test::traced_caller();  // test::leaf from traced_caller
  opscope_stacks_test::traced_leaf();    // and directly from here
  prof.stop();
  int leaf_rows = 0;
  const KeyAverages five = prof.key_averages(false, 5);
  for (const FunctionEventAvg& r : five.rows()) {
    if (r.key == "test::leaf") ++leaf_rows;
  }
  EXPECT_EQ(leaf_rows, 2);
  leaf_rows = 0;
  // One frame: both are in traced_leaf at the same line.
  const KeyAverages one = prof.key_averages(false, 1);
  for (const FunctionEventAvg& r : one.rows()) {
    if (r.key == "test::leaf") ++leaf_rows;
  }
  EXPECT_EQ(leaf_rows, 1);
}

// A window like the reference's (reference/pytorch-1.13/table_by_stack.txt), by hand, with
// labelled frames so that the table does not depend on this build's addresses:
//   forward [0,1300)                  stack: ref.cpp(8): main
//     aten::linear [10,1250)          stack: nn.Module: Linear_0; ref.cpp(8): main
//       aten::addmm [20,1200)  FLOPs  stack: model.cpp(113): Linear::forward(); nn.Module: ...
//   aten::relu [1400,1450)            stack: model.cpp(101): ReLU::forward(); ...
std::shared_ptr<const ProfilerResult> reference_like_result() {
  ProfilerResult::Builder b;
  const std::int32_t t = b.add_thread({7, "main"});
  b.set_lenses({.with_stack = true, .with_flops = true});
  const std::int32_t main_stack = b.add_stack({{0, "ref.cpp(8): main"}});
  const std::int32_t linear_stack = b.add_stack({{0, "model.cpp(113): Linear::forward()"},
                                                 {0, "nn.Module: Linear_0"},
                                                 {0, "model.cpp(202): Sequential::forward()"},
                                                 {0, "nn.Module: Sequential_0"},
                                                 {0, "ref.cpp(8): main"}});
  const std::int32_t relu_stack = b.add_stack({{0, "model.cpp(101): ReLU::forward()"},
                                               {0, "nn.Module: ReLU_0"},
                                               {0, "model.cpp(202): Sequential::forward()"},
                                               {0, "nn.Module: Sequential_0"},
                                               {0, "ref.cpp(8): main"}});
  std::uint64_t handle = 0;
  const auto add = [&](std::string_view name, std::int64_t start, std::int64_t end,
                       std::int32_t stack, std::int64_t flops) {
    Event e;
    e.name = name;
    e.thread = t;
    e.start_ns = kBase + start * kUs;
    e.end_ns = kBase + end * kUs;
    e.handle = ++handle;
    EventDetail d;
    d.stack = stack;
    d.flops = flops;
    e.detail = b.add_detail(std::move(d));
    b.add_event(e);
  };
  add("forward", 0, 1300, main_stack, -1);
  add("aten::linear", 10, 1250, linear_stack, -1);
  add("aten::addmm", 20, 1200, linear_stack, 524288);
  add("aten::relu", 1400, 1450, relu_stack, -1);
  return b.finish();
}

TEST(Stacks, TableGoldenGroupedByStack) {
  const auto r = reference_like_result();
  const std::string table =
      key_averages(*r, false, 3).table({.sort_by = "self_cpu_time_total", .row_limit = 6});
  EXPECT_EQ(table,
            testing::read_file(std::string(OPSCOPE_GOLDEN_DIR) + "/table_grouped_by_stack.txt"))
      << table;
}

TEST(Stacks, StackTextKeepsLabelsAndLimitsFrames) {
  const auto r = reference_like_result();
  analysis::Symbolizer s;
  const Event* addmm = nullptr;
  for (const Event& e : r->events()) {
    if (e.name == "aten::addmm") addmm = &e;
  }
  ASSERT_NE(addmm, nullptr);
  EXPECT_EQ(analysis::stack_text(*r, *addmm, s, 2),
            (std::vector<std::string>{"model.cpp(113): Linear::forward()", "nn.Module: Linear_0"}));
  EXPECT_EQ(analysis::stack_text(*r, *addmm, s).size(), 5u);
  Event no_detail;
  EXPECT_TRUE(analysis::stack_text(*r, no_detail, s).empty());
}

}  // namespace stacks_test
}  // namespace opscope
