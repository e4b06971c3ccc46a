// FLOP formulas of the with_flops lens (DESIGN.md gives PyTorch's).
#include "analysis/flops.h"

#include <gtest/gtest.h>

#include <vector>

#include "support/test_support.h"

namespace opscope::analysis {
namespace flops_test {

RecordedValue tensor(std::vector<std::int64_t> sizes) {
  return opscope::testing::recorded_tensor(std::move(sizes));
}
RecordedValue integer(std::int64_t i) { return opscope::testing::recorded_int(i); }
RecordedValue ints(std::vector<std::int64_t> xs) {
  RecordedValue v;
  v.kind = ValueKind::kList;
  for (std::int64_t x : xs) v.items.push_back(integer(x));
  return v;
}

TEST(Flops, MatmulFamily) {
  EXPECT_EQ(estimate_flops("aten::mm", std::vector{tensor({32, 64}), tensor({64, 128})}),
            2 * 32 * 64 * 128);
  // addmm(bias, mat1, mat2): the reference's 524.288 KFLOPs for [32,64] x [64,128].
  EXPECT_EQ(estimate_flops("aten::addmm", std::vector{tensor({128}), tensor({32, 64}),
                                                      tensor({64, 128}), integer(1), integer(1)}),
            524288);
  EXPECT_EQ(estimate_flops("bmm", std::vector{tensor({4, 8, 16}), tensor({4, 16, 2})}),
            2 * 4 * 8 * 16 * 2);
  EXPECT_EQ(estimate_flops("aten::baddbmm",
                           std::vector{tensor({4, 8, 2}), tensor({4, 8, 16}), tensor({4, 16, 2})}),
            2 * 4 * 8 * 16 * 2);
}

TEST(Flops, Conv2dUsesOutputSizeAndGroups) {
  // N=2, Cin=4, 10x10 input, Cout=6, 3x3 kernel, stride 1, no padding: 8x8 output.
  EXPECT_EQ(estimate_flops("aten::conv2d", std::vector{tensor({2, 4, 10, 10}),
                                                       tensor({6, 4, 3, 3})}),
            2 * 2 * 8 * 8 * 3 * 3 * 4 * 6);
  // stride 2, padding 1, 2 groups: out = (10 + 2 - 2 - 1) / 2 + 1 = 5.
  RecordedValue none;
  EXPECT_EQ(estimate_flops("aten::conv2d",
                           std::vector{tensor({2, 4, 10, 10}), tensor({6, 2, 3, 3}), none,
                                       ints({2, 2}), ints({1, 1}), ints({1, 1}), integer(2)}),
            2 * 2 * 5 * 5 * 3 * 3 * 4 * 6 / 2);
}

TEST(Flops, ElementwiseCountsTheFirstInput) {
  EXPECT_EQ(estimate_flops("aten::mul", std::vector{tensor({3, 5, 7}), tensor({7})}), 105);
  EXPECT_EQ(estimate_flops("aten::add", std::vector{tensor({10}), integer(1)}), 10);
}

TEST(Flops, UnknownNamesCountZeroSilently) {
  testing::WarningCapture warnings;
  EXPECT_FALSE(has_flop_formula("aten::relu"));
  EXPECT_EQ(estimate_flops("aten::relu", std::vector{tensor({10})}), 0);
  EXPECT_TRUE(warnings.messages().empty());
}

TEST(Flops, MisfitsCountZeroAndWarnOncePerName) {
  testing::WarningCapture warnings;
  // A name used only here, so that no other test has warned for it already.
  const char* name = "aten::bmm";
  EXPECT_EQ(estimate_flops(name, std::vector{tensor({4, 8}), tensor({4, 8, 2})}), 0);
  EXPECT_EQ(estimate_flops(name, std::vector{tensor({4, 8, 3}), tensor({4, 16, 2})}), 0);
  EXPECT_EQ(estimate_flops(name, {}), 0);
  ASSERT_EQ(warnings.messages().size(), 1u);
  EXPECT_TRUE(warnings.contains("aten::bmm")) << warnings.messages()[0];
  EXPECT_TRUE(warnings.contains("input 0 has 2 dimensions, expected 3"))
      << warnings.messages()[0];
  // Inner sizes that differ, and a conv whose kernel exceeds the input: 0, never a crash.
  EXPECT_EQ(estimate_flops("mm", std::vector{tensor({2, 3}), tensor({4, 5})}), 0);
  EXPECT_EQ(estimate_flops("conv2d", std::vector{tensor({1, 1, 2, 2}), tensor({1, 1, 5, 5})}), 0);
  EXPECT_EQ(estimate_flops("conv2d", std::vector{tensor({1, -1, 2, 2}), tensor({1, 1, 5, 5})}), 0);
}

}  // namespace flops_test
}  // namespace opscope::analysis
