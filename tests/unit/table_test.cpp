// KeyAverages::table(), format_time_us() and format_memory(): byte-identical to PyTorch 1.13's
// tables (../shared/reference/pytorch-1.13/table_*.txt), except for PyTorch's swapped
// "Source Location" / FLOPs values.
//
// The reference tests rebuild, by hand, the rows PyTorch averaged when it wrote each table: the
// rows shown carry exactly the printed numbers, and the rows that row_limit cut stand for the
// rest of the window, so that the percentages and "Self CPU time total: 14.811ms" come out the
// same. Each cut row sorts below the last row shown.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "opscope/error.h"
#include "opscope/key_averages.h"
#include "support/test_support.h"

namespace opscope {
namespace table_test {

constexpr std::int64_t kUs = 1000;  // ns

std::int64_t kb(double kilobytes) { return std::llround(kilobytes * 1024); }

FunctionEventAvg row(std::string key, std::int64_t count, std::int64_t total_us,
                     std::int64_t self_us, std::int64_t mem = 0, std::int64_t self_mem = 0,
                     std::int64_t flops = 0) {
  FunctionEventAvg r;
  r.key = std::move(key);
  r.count = count;
  r.cpu_time_total_ns = total_us * kUs;
  r.self_cpu_time_total_ns = self_us * kUs;
  r.cpu_memory_usage = mem;
  r.self_cpu_memory_usage = self_mem;
  r.flops = flops;
  return r;
}

FunctionEventAvg with_shapes(FunctionEventAvg r, std::string shapes) {
  r.input_shapes = std::move(shapes);
  return r;
}

FunctionEventAvg with_stack(FunctionEventAvg r, std::vector<std::string> stack) {
  r.stack = std::move(stack);
  return r;
}

KeyAverages lenses_on(std::vector<FunctionEventAvg> rows) {
  KeyAverages avg(std::move(rows));
  avg.profile_memory = true;
  avg.with_flops = true;
  return avg;
}

// The reference file, or "" when shared/ is not checked out next to the repository.
std::string reference(const std::string& name) {
  std::string path = std::string(OPSCOPE_REFERENCE_DIR) + "/" + name;
  return std::filesystem::exists(path) ? testing::read_file(path) : "";
}

std::string golden(const std::string& name) {
  return testing::read_file(std::string(OPSCOPE_GOLDEN_DIR) + "/" + name);
}

// key_averages() of ref2.py's window (make_reference.py), grouped by name, in first-seen order.
// Self CPU times sum to 14.811 ms.
KeyAverages by_name() {
  return lenses_on({
      row("aten::zeros", 2, 82, 57, 8, 0),  // before aten::relu: equal self time, stable sort
      row("aten::empty", 6, 25, 25, kb(1.54), kb(1.54)),
      row("aten::zero_", 2, 6, 6),
      row("forward", 1, 13003, 346, kb(17.25), kb(-16.29)),
      row("aten::linear", 2, 12520, 40, kb(17.25), 0),
      row("aten::t", 3, 48, 30),
      row("aten::transpose", 3, 25, 18),
      row("aten::as_strided", 5, 7, 7),
      row("aten::addmm", 2, 12414, 3562, kb(17.25), kb(17.25), 606208),
      row("aten::expand", 1, 6, 6),
      row("aten::copy_", 4, 8840, 8840, 0, 0),
      row("aten::relu", 1, 107, 57, kb(16), 0),
      row("aten::clamp_min", 1, 50, 50, kb(16), kb(16)),  // before threshold_backward
      row("backward", 1, 1726, 663, kb(21.54), -12),
      row("aten::ones_like", 1, 20, 11),
      row("aten::empty_like", 3, 13, 8, kb(2.5), kb(1.25)),
      row("aten::empty_strided", 1, 4, 4, 4, 4),
      row("aten::fill_", 2, 14, 14),
      row("autograd::engine::evaluate_function: SumBackward0", 1, 314, 9),
      row("SumBackward0", 1, 305, 281),
      row("aten::sum", 3, 93, 84, 556, 556),
      row("autograd::engine::evaluate_function: AddmmBackward0", 2, 566, 25, kb(37.54), kb(-16)),
      row("AddmmBackward0", 2, 517, 229, kb(53), kb(-1.25)),
      row("aten::mm", 3, 271, 256, kb(54.25), kb(51.75), 688128),
      row("autograd::engine::evaluate_function: TBackward0", 2, 30, 8),
      row("TBackward0", 2, 22, 12),
      row("autograd::engine::evaluate_function: ReluBackward0", 1, 64, 6),
      row("ReluBackward0", 1, 58, 10),
      row("aten::threshold_backward", 1, 48, 48, kb(16), kb(16)),
      row("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 4, 99, 16),
      row("torch::autograd::AccumulateGrad", 4, 83, 43),
      row("aten::detach", 4, 40, 24),
      row("detach", 4, 16, 16),
  });
}

TEST(TableReference, DefaultMatchesPyTorch) {
  std::string expected = reference("table_default.txt");
  if (expected.empty()) GTEST_SKIP() << "no table_default.txt under " << OPSCOPE_REFERENCE_DIR;
  EXPECT_EQ(by_name().table({.sort_by = "self_cpu_time_total", .row_limit = 10}), expected);
}

TEST(TableReference, MemoryMatchesPyTorch) {
  std::string expected = reference("table_mem.txt");
  if (expected.empty()) GTEST_SKIP() << "no table_mem.txt under " << OPSCOPE_REFERENCE_DIR;
  EXPECT_EQ(by_name().table({.sort_by = "self_cpu_memory_usage", .row_limit = 8}), expected);
}

TEST(TableReference, ByShapeMatchesPyTorch) {
  std::string expected = reference("table_by_shape.txt");
  if (expected.empty()) GTEST_SKIP() << "no table_by_shape.txt under " << OPSCOPE_REFERENCE_DIR;
  // Grouped by (name, input shapes), sorted by CPU total; every cut row is under 172 us.
  KeyAverages avg = lenses_on({
      with_shapes(row("aten::zeros", 2, 82, 57, 8, 0), "[[], [], [], [], []]"),
      with_shapes(row("aten::empty", 6, 25, 25, kb(1.54), kb(1.54)), "[[], [], [], [], [], []]"),
      with_shapes(row("aten::zero_", 2, 6, 6), "[[]]"),
      with_shapes(row("forward", 1, 13003, 346, kb(17.25), kb(-16.29)), "[]"),
      with_shapes(row("aten::linear", 1, 12451, 34, kb(16), 0), "[[32, 64], [128, 64], [128]]"),
      with_shapes(row("aten::t", 3, 48, 30), "[[128, 64]]"),
      with_shapes(row("aten::transpose", 3, 25, 18), "[[128, 64], [], []]"),
      with_shapes(row("aten::as_strided", 5, 7, 7), "[[128, 64], [], [], []]"),
      with_shapes(row("aten::addmm", 1, 12357, 3514, kb(16), kb(16), 524288),
                  "[[128], [32, 64], [64, 128], [], []]"),
      with_shapes(row("aten::expand", 1, 6, 6), "[[128], [], []]"),
      with_shapes(row("aten::copy_", 1, 8829, 8829, 0, 0), "[[32, 128], [32, 128], []]"),
      with_shapes(row("aten::relu", 1, 107, 57, kb(16), 0), "[[32, 128]]"),
      with_shapes(row("aten::clamp_min", 1, 50, 50, kb(16), kb(16)), "[[32, 128], []]"),
      with_shapes(row("aten::linear", 1, 69, 6, kb(1.25), 0), "[[32, 128], [10, 128], [10]]"),
      with_shapes(row("aten::addmm", 1, 57, 48, kb(1.25), kb(1.25), 81920),
                  "[[10], [32, 128], [128, 10], [], []]"),
      with_shapes(row("aten::copy_", 3, 11, 11, 0, 0), "[[32, 10], [32, 10], []]"),
      with_shapes(row("backward", 1, 1726, 663, kb(21.54), -12), "[]"),
      with_shapes(row("aten::ones_like", 1, 20, 11), "[[], [], [], [], [], []]"),
      with_shapes(row("aten::empty_like", 3, 13, 8, kb(2.5), kb(1.25)), "[[32, 128], [], []]"),
      with_shapes(row("aten::empty_strided", 1, 4, 4, 4, 4), "[[], [], [], [], [], []]"),
      with_shapes(row("aten::fill_", 2, 14, 14), "[[], []]"),
      with_shapes(row("autograd::engine::evaluate_function: SumBackward0", 1, 314, 9), "[]"),
      with_shapes(row("SumBackward0", 1, 305, 281), "[[]]"),
      with_shapes(row("aten::sum", 3, 93, 84, 556, 556), "[[32, 10], []]"),
      with_shapes(row("autograd::engine::evaluate_function: AddmmBackward0", 2, 566, 25, kb(37.54),
                      kb(-16)),
                  "[]"),
      with_shapes(row("AddmmBackward0", 1, 345, 222, kb(21), kb(-1.25)), "[[32, 10]]"),
      with_shapes(row("aten::mm", 1, 64, 60, kb(5), kb(5), 81920), "[[32, 10], [10, 128]]"),
      with_shapes(row("aten::mm", 1, 50, 46, kb(17.25), kb(14.75), 81920), "[[10, 32], [32, 128]]"),
      with_shapes(row("AddmmBackward0", 1, 172, 7, kb(32), 0), "[[32, 128]]"),
      with_shapes(row("aten::mm", 1, 157, 150, kb(32), kb(32), 524288), "[[128, 32], [32, 64]]"),
      with_shapes(row("autograd::engine::evaluate_function: TBackward0", 2, 30, 8), "[]"),
      with_shapes(row("TBackward0", 2, 22, 12), "[[10, 128]]"),
      with_shapes(row("autograd::engine::evaluate_function: ReluBackward0", 1, 64, 6), "[]"),
      with_shapes(row("ReluBackward0", 1, 58, 10), "[[32, 128]]"),
      with_shapes(row("aten::threshold_backward", 1, 48, 48, kb(16), kb(16)),
                  "[[32, 128], [32, 128], []]"),
      with_shapes(
          row("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 4, 99, 16),
          "[]"),
      with_shapes(row("torch::autograd::AccumulateGrad", 4, 83, 43), "[[128, 64]]"),
      with_shapes(row("aten::detach", 4, 40, 24), "[[128, 64]]"),
      with_shapes(row("detach", 4, 16, 16), "[[128, 64]]"),
  });
  EXPECT_EQ(avg.table({.sort_by = "cpu_time_total", .row_limit = 10}), expected);
}

// Grouped by the 3 innermost stack frames (group_by_stack_n=3).
KeyAverages by_stack() {
  const std::vector<std::string> linear0 = {"<built-in function linear>",
                                            "torch/nn/modules/linear.py(113): forward",
                                            "nn.Module: Linear_0"};
  const std::vector<std::string> linear1 = {"<built-in function linear>",
                                            "torch/nn/modules/linear.py(113): forward",
                                            "nn.Module: Linear_1"};
  // 78 characters: longer than the 75 of the source column, so its start is cut to "...".
  const std::vector<std::string> record_function = {
      "<built-in method _record_function_enter of PyCapsule object at 0x7f5296afa640>",
      "torch/_ops.py(437): __call__", "torch/autograd/profiler.py(487): __enter__"};
  const std::vector<std::string> sum = {"<built-in method sum of Tensor object at 0x7f52966be620>",
                                        "ref2.py(8): <module>"};
  return lenses_on({
      row("aten::zeros", 2, 82, 57, 8, 0),
      row("aten::empty", 6, 25, 25, kb(1.54), kb(1.54)),
      row("aten::zero_", 2, 6, 6),
      with_stack(row("forward", 1, 13003, 346, kb(17.25), kb(-16.29)), record_function),
      with_stack(row("aten::linear", 2, 12520, 40, kb(17.25), 0), linear0),
      with_stack(row("aten::t", 3, 48, 30), linear0),
      with_stack(row("aten::transpose", 3, 25, 18), linear0),
      with_stack(row("aten::as_strided", 5, 7, 7), linear0),
      with_stack(row("aten::addmm", 1, 12357, 3514, kb(16), kb(16), 524288), linear0),
      with_stack(row("aten::expand", 1, 6, 6), linear0),
      with_stack(row("aten::copy_", 1, 8829, 8829, 0, 0), linear0),
      with_stack(row("aten::addmm", 1, 57, 48, kb(1.25), kb(1.25), 81920), linear1),
      with_stack(row("aten::copy_", 3, 11, 11, 0, 0), linear1),
      row("aten::relu", 1, 107, 57, kb(16), 0),
      row("aten::clamp_min", 1, 50, 50, kb(16), kb(16)),
      with_stack(row("backward", 1, 1726, 663, kb(21.54), -12), record_function),
      with_stack(row("aten::ones_like", 1, 20, 11), sum),
      row("aten::empty_like", 3, 13, 8, kb(2.5), kb(1.25)),
      row("aten::empty_strided", 1, 4, 4, 4, 4),
      with_stack(row("aten::fill_", 2, 14, 14), sum),
      with_stack(row("autograd::engine::evaluate_function: SumBackward0", 1, 314, 9), sum),
      with_stack(row("SumBackward0", 1, 305, 281), sum),
      row("aten::sum", 3, 93, 84, 556, 556),
      with_stack(
          row("autograd::engine::evaluate_function: AddmmBackward0", 1, 388, 18, kb(21), kb(-16)),
          linear1),
      with_stack(row("AddmmBackward0", 1, 345, 222, kb(21), kb(-1.25)), linear1),
      with_stack(row("aten::mm", 2, 114, 106, kb(22.25), kb(19.75), 163840), linear1),
      with_stack(
          row("autograd::engine::evaluate_function: AddmmBackward0", 1, 178, 7, kb(16.54), 0),
          linear0),
      with_stack(row("AddmmBackward0", 1, 172, 7, kb(32), 0), linear0),
      with_stack(row("aten::mm", 1, 157, 150, kb(32), kb(32), 524288), linear0),
      with_stack(row("autograd::engine::evaluate_function: TBackward0", 2, 30, 8), linear0),
      with_stack(row("TBackward0", 2, 22, 12), linear0),
      with_stack(row("autograd::engine::evaluate_function: ReluBackward0", 1, 64, 6), linear0),
      row("ReluBackward0", 1, 58, 10),
      row("aten::threshold_backward", 1, 48, 48, kb(16), kb(16)),
      row("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 4, 99, 16),
      row("torch::autograd::AccumulateGrad", 4, 83, 43),
      row("aten::detach", 4, 40, 24),
      row("detach", 4, 16, 16),
  });
}

// tests/golden/table_by_stack.txt is PyTorch's table_by_stack.txt with the values moved under
// their own headers: PyTorch prints the FLOPs value in the (left-aligned) Source Location column
// and the stack entries in the (right-aligned) FLOPs column, its continuation rows included.
// Everything else, padding of the blank separator rows included, is PyTorch's bytes.
TEST(TableReference, ByStackMatchesPyTorchWithColumnsInPlace) {
  EXPECT_EQ(by_stack().table({.sort_by = "self_cpu_time_total", .row_limit = 6}),
            golden("table_by_stack.txt"));
}

TEST(TableReference, ByStackGoldenDiffersFromPyTorchOnlyInTheSwappedColumns) {
  std::string pytorch = reference("table_by_stack.txt");
  if (pytorch.empty()) GTEST_SKIP() << "no table_by_stack.txt under " << OPSCOPE_REFERENCE_DIR;
  std::string ours = golden("table_by_stack.txt");
  // The first 169 characters of each line (Name .. # of Calls) are the same.
  std::istringstream a(pytorch), b(ours);
  std::string la, lb;
  int lines = 0;
  while (std::getline(a, la) && std::getline(b, lb)) {
    EXPECT_EQ(la.substr(0, 169), lb.substr(0, 169)) << "line " << lines;
    ++lines;
  }
  EXPECT_EQ(lines, 28);
  EXPECT_NE(pytorch, ours);
}

TEST(TableFormat, Time) {
  EXPECT_EQ(format_time_us(0), "0.000us");
  EXPECT_EQ(format_time_us(346), "346.000us");
  EXPECT_EQ(format_time_us(999.9994), "999.999us");
  EXPECT_EQ(format_time_us(1000), "1.000ms");
  EXPECT_EQ(format_time_us(8840), "8.840ms");
  EXPECT_EQ(format_time_us(1.2e6), "1.200s");
  EXPECT_EQ(format_time_us(90.33333333), "90.333us");
}

TEST(TableFormat, Memory) {
  EXPECT_EQ(format_memory(0), "0 b");
  EXPECT_EQ(format_memory(-12), "-12 b");
  EXPECT_EQ(format_memory(1023), "1023 b");
  EXPECT_EQ(format_memory(1024), "1.00 Kb");
  EXPECT_EQ(format_memory(17664), "17.25 Kb");
  EXPECT_EQ(format_memory(-16681), "-16.29 Kb");
  EXPECT_EQ(format_memory(3 * 1024 * 1024), "3.00 Mb");
  EXPECT_EQ(format_memory(-(std::int64_t{5} << 30)), "-5.00 Gb");
}

// The lines of a table, without their "\n".
std::vector<std::string> lines_of(const std::string& table) {
  std::vector<std::string> lines;
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::size_t code_points(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

TEST(TableLayout, EveryLineEndsWithTwoSpacesAndTheTotal) {
  std::string t = by_name().table();
  ASSERT_FALSE(t.empty());
  EXPECT_EQ(t.back(), '\n');
  std::vector<std::string> lines = lines_of(t);
  ASSERT_EQ(lines.size(), 33u + 5u);  // 3 header lines, 33 rows, separator, total
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    EXPECT_EQ(lines[i].substr(lines[i].size() - 2), "  ") << lines[i];
    EXPECT_EQ(lines[i].size(), lines[0].size()) << lines[i];
  }
  EXPECT_EQ(lines.back(), "Self CPU time total: 14.811ms");
}

TEST(TableLayout, Utf8AndQuotesAlignByCodePoints) {
  KeyAverages avg(
      {row("матмул", 1, 10, 10), row("名前 \"quoted\" 'x'", 1, 20, 20), row("plain", 1, 30, 30)});
  std::vector<std::string> lines = lines_of(avg.table());
  // Name width: longest name (15 code points, 19 bytes) + 4.
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    EXPECT_EQ(code_points(lines[i]), 19u + 2 + 6 * 14) << lines[i];
  }
  const std::string cyrillic = "матмул", quoted = "名前 \"quoted\" 'x'";
  EXPECT_EQ(lines[3].substr(0, 13 + cyrillic.size() + 2), std::string(13, ' ') + cyrillic + "  ");
  EXPECT_EQ(lines[4].substr(0, 4 + quoted.size() + 2), "    " + quoted + "  ");
}

TEST(TableLayout, LongNamesAreCutWithDots) {
  std::string long_name(60, 'n');
  std::string cyrillic;
  for (int i = 0; i < 60; ++i) cyrillic += "ж";
  KeyAverages avg({row(long_name, 1, 10, 10), row(cyrillic, 1, 5, 5), row("x", 1, 1, 1)});
  std::vector<std::string> lines = lines_of(avg.table());
  // width min(60 + 4, 55); a name of 52 or more code points keeps 52 and gains "...".
  EXPECT_EQ(lines[3].substr(0, 57), std::string(52, 'n') + "...  ");
  std::string cut;
  for (int i = 0; i < 52; ++i) cut += "ж";
  EXPECT_EQ(lines[4].substr(0, cut.size() + 5), cut + "...  ");
  EXPECT_EQ(lines[5].substr(0, 57), std::string(54, ' ') + "x  ");

  // Exactly max - 3 code points is cut too (PyTorch's >=); one fewer is not.
  KeyAverages edge({row(std::string(17, 'a'), 1, 1, 1), row(std::string(16, 'b'), 1, 1, 1)});
  std::vector<std::string> e = lines_of(edge.table({.max_name_column_width = 20}));
  EXPECT_EQ(e[3].substr(0, 22), std::string(17, 'a') + "...  ");
  EXPECT_EQ(e[4].substr(0, 22), "    " + std::string(16, 'b') + "  ");
}

TEST(TableLayout, EmptyTableIsEmpty) {
  EXPECT_EQ(KeyAverages().table(), "");
  EXPECT_EQ(KeyAverages().table({.sort_by = "count"}), "");
}

TEST(TableLayout, RowLimit) {
  KeyAverages avg({row("a", 1, 3, 3), row("b", 1, 2, 2), row("c", 1, 1, 1)});
  auto rows_shown = [&](int limit) { return lines_of(avg.table({.row_limit = limit})).size() - 5; };
  EXPECT_EQ(rows_shown(0), 0u);
  EXPECT_EQ(rows_shown(2), 2u);
  EXPECT_EQ(rows_shown(3), 3u);
  EXPECT_EQ(rows_shown(100), 3u);
  EXPECT_EQ(rows_shown(-1), 3u);
  // The total counts every row, shown or not.
  EXPECT_EQ(lines_of(avg.table({.row_limit = 1})).back(), "Self CPU time total: 6.000us");
}

TEST(TableLayout, NaNWhenThereIsNoSelfTime) {
  KeyAverages avg({row("idle", 2, 0, 0)});
  std::vector<std::string> lines = lines_of(avg.table());
  EXPECT_EQ(lines[3],
            "    idle           NaN       0.000us           NaN       0.000us       0.000us  "
            "           2  ");
  EXPECT_EQ(lines.back(), "Self CPU time total: 0.000us");
}

TEST(TableLayout, AsyncRowsHaveNoTotalShare) {
  FunctionEventAvg a = row("prefetch", 1, 200, 200);
  a.is_async = true;
  KeyAverages avg({a, row("step", 1, 400, 200)});
  std::vector<std::string> lines = lines_of(avg.table());
  EXPECT_EQ(lines[3].substr(0, 14 * 4 + 12),
            "    prefetch        50.00%     200.000us             0     200.000us");
  EXPECT_NE(lines[4].find("100.00%"), std::string::npos);
}

TEST(TableLayout, HeaderTopLevelAndNodeId) {
  FunctionEventAvg nested = row("inner", 1, 10, 10);
  nested.top_level = false;
  FunctionEventAvg remote = row("remote", 1, 5, 5);
  remote.node_id = 3;
  KeyAverages avg({nested, remote, row("outer", 1, 30, 20)});
  std::string t = avg.table({.row_limit = 1, .header = "My run", .top_level_events_only = true});
  std::vector<std::string> lines = lines_of(t);
  const std::size_t width = 10 + 7 * 14;  // "remote" + 4, seven columns of 12, spacing between
  ASSERT_EQ(lines.size(), 10u);
  EXPECT_EQ(lines[0], std::string(width, '='));
  EXPECT_EQ(lines[1], "My run");
  EXPECT_EQ(lines[2], std::string(width, '='));
  EXPECT_EQ(lines[3], "This report only display top-level ops statistics");
  EXPECT_EQ(lines[5].substr(lines[5].size() - 14), "     Node ID  ");
  // "inner" is skipped and does not count toward row_limit; "remote" is the one row.
  EXPECT_EQ(lines[7].substr(0, 10), "    remote");
  EXPECT_EQ(lines[7].substr(lines[7].size() - 28), "           1             3  ");
  EXPECT_EQ(lines[9], "Self CPU time total: 35.000us");
}

TEST(TableLayout, FlopsUnitsScaleWithTheSmallestCount) {
  auto header_and_cell = [](std::int64_t smallest, std::int64_t other) {
    KeyAverages avg(
        {row("a", 1, 2, 2, 0, 0, smallest), row("b", 1, 1, 1, 0, 0, other), row("c", 1, 1, 1)});
    avg.with_flops = true;
    std::vector<std::string> lines = lines_of(avg.table());
    return lines[1].substr(lines[1].size() - 14) + "|" + lines[3].substr(lines[3].size() - 14) +
           "|" + lines[5].substr(lines[5].size() - 14);
  };
  EXPECT_EQ(header_and_cell(999, 1000000), " Total FLOPs  |     999.000  |          --  ");
  EXPECT_EQ(header_and_cell(5'000'000'000, 6'000'000'000),
            "Total GFLOPs  |       5.000  |          --  ");
  EXPECT_EQ(header_and_cell(std::int64_t{1} << 62, std::int64_t{1} << 62),
            "Total PFLOPs  |    4611.686  |          --  ");

  // No positive count: no column, as when with_flops is off.
  KeyAverages none({row("a", 1, 1, 1)});
  none.with_flops = true;
  EXPECT_EQ(none.table().find("FLOPs"), std::string::npos);
}

TEST(TableLayout, SortIsDescendingAndStable) {
  KeyAverages avg(
      {row("one", 1, 10, 1), row("two", 2, 30, 1), row("three", 2, 20, 1), row("four", 4, 40, 1)});
  auto order = [&](const std::string& key) {
    std::string names;
    std::vector<std::string> lines = lines_of(avg.table({.sort_by = key}));
    for (std::size_t i = 3; i + 2 < lines.size(); ++i) {
      names += lines[i].substr(lines[i].find_first_not_of(' '), 5);
      names += ",";
    }
    return names;
  };
  EXPECT_EQ(order(""), "one  ,two  ,three,four ,");
  EXPECT_EQ(order("count"), "four ,two  ,three,one  ,");
  EXPECT_EQ(order("cpu_time"), "two  ,one  ,three,four ,");  // averages 10, 15, 10, 10
  EXPECT_EQ(order("self_cpu_time_total"), "one  ,two  ,three,four ,");
  EXPECT_EQ(order("self_cuda_time_total"), "one  ,two  ,three,four ,");
}

TEST(TableErrors, UnknownSortKeyNamesItAndTheValidOnes) {
  try {
    by_name().table({.sort_by = "self_cpu_time"});
    FAIL() << "expected opscope::Error";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("\"self_cpu_time\""), std::string::npos) << message;
    EXPECT_NE(message.find("self_cpu_time_total"), std::string::npos) << message;
    EXPECT_NE(message.find("self_cuda_memory_usage"), std::string::npos) << message;
  }
  // Even with no rows: the call is wrong whatever the window held.
  EXPECT_THROW(KeyAverages().table({.sort_by = "bogus"}), Error);
}

TEST(TableErrors, WidthsMustBePositive) {
  KeyAverages avg({row("a", 1, 1, 1)});
  for (int bad : {0, -5}) {
    EXPECT_THROW(avg.table({.max_name_column_width = bad}), Error);
    EXPECT_THROW(avg.table({.max_src_column_width = bad}), Error);
    EXPECT_THROW(avg.table({.max_shapes_column_width = bad}), Error);
  }
  const std::string message =
      testing::error_of([&] { avg.table({.max_shapes_column_width = 0}); });
  EXPECT_NE(message.find("max_shapes_column_width"), std::string::npos) << message;
  EXPECT_NE(message.find("got 0"), std::string::npos) << message;
}

}  // namespace table_test
}  // namespace opscope
