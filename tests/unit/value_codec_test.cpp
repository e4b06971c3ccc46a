// Inputs of ranges: the Value view type and its encoding in the buffer.
#include "record/value_codec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace opscope::record {
namespace {

std::vector<RecordedValue> roundtrip(std::initializer_list<Value> inputs) {
  std::string bytes;
  encode_inputs(std::span<const Value>(inputs.begin(), inputs.size()), bytes);
  return decode_inputs(std::as_bytes(std::span<const char>(bytes.data(), bytes.size())));
}

TEST(ValueCodec, EveryKindRoundTrips) {
  const std::int64_t sizes[] = {32, 64};
  const std::int64_t strides[] = {64, 1};
  const Value items[] = {Value(1), Value(2), Value(3)};
  auto out = roundtrip({Value::tensor(sizes, "float", strides), Value(7), Value(0.5), Value(true),
                        Value("mean"), Value(), Value::list(items)});
  ASSERT_EQ(out.size(), 7u);
  EXPECT_EQ(out[0].kind, ValueKind::kTensor);
  EXPECT_EQ(out[0].sizes, (std::vector<std::int64_t>{32, 64}));
  EXPECT_EQ(out[0].strides, (std::vector<std::int64_t>{64, 1}));
  EXPECT_EQ(out[0].text, "float");
  EXPECT_EQ(out[0].device, "cpu");
  EXPECT_EQ(out[1].kind, ValueKind::kInt);
  EXPECT_EQ(out[1].i, 7);
  EXPECT_EQ(out[2].kind, ValueKind::kDouble);
  EXPECT_EQ(out[2].d, 0.5);
  EXPECT_EQ(out[3].kind, ValueKind::kBool);
  EXPECT_TRUE(out[3].b);
  EXPECT_EQ(out[4].kind, ValueKind::kString);
  EXPECT_EQ(out[4].text, "mean");
  EXPECT_EQ(out[5].kind, ValueKind::kNone);
  ASSERT_EQ(out[6].kind, ValueKind::kList);
  ASSERT_EQ(out[6].items.size(), 3u);
  EXPECT_EQ(out[6].items[2].i, 3);
  EXPECT_EQ(out[6].items_dropped, 0u);
}

TEST(ValueCodec, TensorFromBracesAndZeroDims) {
  auto out = roundtrip({Value::tensor({}, "long int"), Value::tensor({2, 3, 4}, "c10::Half")});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].sizes.empty());
  EXPECT_EQ(out[0].text, "long int");
  EXPECT_EQ(out[1].sizes, (std::vector<std::int64_t>{2, 3, 4}));
  EXPECT_TRUE(out[1].strides.empty());
}

TEST(ValueCodec, LongListsAndStringsAreCutNotLost) {
  std::vector<Value> many(kMaxRecordedListItems + 10, Value(true));  // 2 bytes each
  const std::string long_text(10000, 'x');
  auto out = roundtrip({Value::list(many), Value(long_text)});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].items.size(), kMaxRecordedListItems);
  EXPECT_EQ(out[0].items_dropped, 10u);
  EXPECT_EQ(out[1].text.size(), 4096u);
}

TEST(ValueCodec, HugeInputsStayWithinTheBudget) {
  // 2000 tensors of 8 dims: far past the 32 KiB budget. The encoding stops at the budget and
  // what it kept decodes.
  const std::int64_t dims[] = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<Value> tensors(2000, Value::tensor(dims));
  std::string bytes;
  encode_inputs(tensors, bytes);
  EXPECT_LE(bytes.size(), kMaxEncodedInputBytes + 1024);
  auto out = decode_inputs(std::as_bytes(std::span<const char>(bytes.data(), bytes.size())));
  EXPECT_GT(out.size(), 100u);
  EXPECT_LT(out.size(), 2000u);
  EXPECT_EQ(out.back().sizes.size(), 8u);
}

TEST(ValueCodec, TruncatedBytesDecodeWhatIsWhole) {
  std::string bytes;
  const Value in[] = {Value(1), Value::tensor({4, 4}), Value(2)};
  encode_inputs(in, bytes);
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    auto out = decode_inputs(std::as_bytes(std::span<const char>(bytes.data(), cut)));
    EXPECT_LE(out.size(), 3u);
  }
}

}  // namespace
}  // namespace opscope::record
