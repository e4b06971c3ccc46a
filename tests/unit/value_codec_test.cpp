// Inputs of ranges: the Value view type and its encoding in the buffer.
#include "record/value_codec.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace opscope::record {
namespace value_codec_test {

// Encodes as a range does, into room for the worst case; a canary after that room catches a
// write past it.
std::vector<std::byte> encode(std::span<const Value> inputs) {
  std::vector<std::byte> out(kMaxEncodeBytes + 1, std::byte{0xAB});
  const std::size_t n = encode_inputs_to(inputs, out.data());
  EXPECT_EQ(out[kMaxEncodeBytes], std::byte{0xAB}) << "wrote past kMaxEncodeBytes";
  EXPECT_LE(n, kMaxEncodedInputBytes);
  out.resize(n);
  return out;
}

std::vector<RecordedValue> roundtrip(std::initializer_list<Value> inputs) {
  return decode_inputs(encode(std::span<const Value>(inputs.begin(), inputs.size())));
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
  // 4000 tensors of 8 dims (13 bytes each): past the 32 KiB budget. The encoding stops at the
  // budget and what it kept decodes.
  const std::int64_t dims[] = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<Value> tensors(4000, Value::tensor(dims));
  const std::vector<std::byte> bytes = encode(tensors);
  EXPECT_GT(bytes.size(), kMaxEncodedInputBytes - 1024);
  auto out = decode_inputs(bytes);
  EXPECT_GT(out.size(), 100u);
  EXPECT_LT(out.size(), 4000u);
  EXPECT_EQ(out.back().sizes.size(), 8u);
}

TEST(ValueCodec, TruncatedBytesDecodeWhatIsWhole) {
  const std::int64_t dims[] = {4, 4};
  const Value in[] = {Value(1), Value::tensor(dims), Value(2)};
  const std::vector<std::byte> bytes = encode(in);
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    auto out = decode_inputs(std::span<const std::byte>(bytes.data(), cut));
    EXPECT_LE(out.size(), 3u);
  }
}

// Near a chunk's end a range sizes its inputs first and reserves exactly that: the size must
// be what is then written.
TEST(ValueCodec, SizeIsWhatIsWritten) {
  const std::int64_t sizes[] = {32, 64};
  const std::int64_t strides[] = {64, 1};
  const std::int64_t three[] = {3};  // not Value::tensor({3}): that array dies with the line
  const Value inner[] = {Value(1), Value("x"), Value::tensor(three)};
  const Value nested[] = {Value::list(inner), Value(false)};
  std::vector<Value> many(kMaxRecordedListItems + 3, Value(true));  // cut to 4096, 3 dropped
  const std::string long_text(5000, 'y');                           // cut to 4096 bytes
  std::vector<std::int64_t> huge_dims(100, 7);                      // cut to 64 dims
  std::vector<std::vector<Value>> levels(12);  // nesting past the depth that is kept
  Value deep = Value(7);
  for (auto& level : levels) {
    level = {deep};
    deep = Value::list(level);
  }
  const std::vector<std::vector<Value>> cases = {
      {},
      {Value::tensor(sizes, "float", strides), Value::tensor(sizes, "long int", {}, "cuda:1")},
      {Value(7), Value(0.5), Value(true), Value("mean"), Value(), Value::list(nested)},
      {Value::list(many), Value(long_text), Value::tensor(huge_dims)},
      {deep},
  };
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const std::size_t n = encoded_size(cases[c]);
    ASSERT_LE(n, kMaxEncodedInputBytes) << "case " << c;
    std::vector<std::byte> out(n + 1, std::byte{0xAB});
    EXPECT_EQ(encode_inputs_to(cases[c], out.data()), n) << "case " << c;
    EXPECT_EQ(out[n], std::byte{0xAB}) << "case " << c << ": wrote past its size";
    EXPECT_EQ(decode_inputs(std::span<const std::byte>(out.data(), n)).size(), cases[c].size());
  }
  const std::vector<RecordedValue> cut = decode_inputs(encode(cases[3]));
  ASSERT_EQ(cut.size(), 3u);
  EXPECT_EQ(cut[2].sizes.size(), kMaxRecordedTensorDims);
  // Over the budget the size says so; the range then reserves kMaxEncodeBytes.
  const std::int64_t dims[] = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<Value> tensors(4000, Value::tensor(dims));
  EXPECT_GT(encoded_size(tensors), kMaxEncodedInputBytes);
}

// Plain tensors (no strides, common names: what record_shapes mostly sees) take a fast path
// in encode_inputs_to; everything else the general encoder. Both must write the same bytes:
// at and across each limit of the fast path (16 inputs, 8 dimensions, one-byte varints,
// names in the table) the size agrees with encoded_size(), which counts with the general
// encoder, and every value comes back.
TEST(ValueCodec, PlainTensorsEncodeAsEveryOtherInput) {
  const std::vector<std::int64_t> dims8 = {1, 127, 128, 16383, 16384, std::int64_t{1} << 40, -1, 0};
  const std::vector<std::int64_t> dims9 = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<std::int64_t> small = {32, 64};
  const std::vector<std::int64_t> strides = {64, 1};
  const std::vector<std::vector<Value>> cases = {
      {Value::tensor(small), Value::tensor(dims8)},
      {Value::tensor(dims9)},                        // too many dims for the fast path
      {Value::tensor(small, "float", strides)},      // strides
      {Value::tensor(small, "float8_e4m3fn")},       // dtype not in the table
      {Value::tensor(small, "float", {}, "xla:0")},  // device not in the table
      {Value::tensor(small), Value(3)},              // not all tensors
      std::vector<Value>(16, Value::tensor(dims8, "c10::Half", {}, "cuda:1")),
      std::vector<Value>(17, Value::tensor(small, "long int")),  // more inputs than the fast path
      {Value::tensor({}, "bool")},
  };
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const std::vector<std::byte> bytes = encode(cases[c]);
    EXPECT_EQ(bytes.size(), encoded_size(cases[c])) << "case " << c;
    const std::vector<RecordedValue> out = decode_inputs(bytes);
    ASSERT_EQ(out.size(), cases[c].size()) << "case " << c;
    for (std::size_t i = 0; i < out.size(); ++i) {
      const Value& in = cases[c][i];
      ASSERT_EQ(out[i].kind, in.kind()) << "case " << c << " input " << i;
      if (in.kind() != ValueKind::kTensor) continue;
      EXPECT_EQ(out[i].sizes, std::vector<std::int64_t>(in.sizes().begin(), in.sizes().end()))
          << "case " << c << " input " << i;
      EXPECT_EQ(out[i].strides,
                std::vector<std::int64_t>(in.strides().begin(), in.strides().end()));
      EXPECT_EQ(out[i].text, in.dtype());
      EXPECT_EQ(out[i].device, in.device());
    }
  }
}

// What record_shapes costs is mostly buffer memory: two small CPU float tensors (an mm's
// inputs) take one 32-byte payload record.
TEST(ValueCodec, TwoSmallTensorsTakeOneRecord) {
  const std::int64_t a[] = {32, 64};
  const std::int64_t b[] = {64, 128};
  const Value in[] = {Value::tensor(a), Value::tensor(b)};
  EXPECT_LE(encoded_size(in), 32u);
}

// Common dtype and device names take one byte each, and come back as they went in; others
// are written out.
TEST(ValueCodec, CommonNamesTakeOneByte) {
  for (std::string_view name :
       {"float", "double", "c10::Half", "c10::BFloat16", "long int", "int", "short int",
        "signed char", "unsigned char", "bool", "c10::complex<float>", "c10::complex<double>",
        "cpu", "cuda", "cuda:0", "cuda:1", "meta"}) {
    const Value in[] = {Value::tensor({}, name, {}, name)};
    EXPECT_EQ(encoded_size(in), 5u) << name;  // tag, two zero counts, two names
    const std::vector<RecordedValue> out = decode_inputs(encode(in));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].text, name);
    EXPECT_EQ(out[0].device, name);
  }
  const Value other[] = {Value::tensor({}, "float8_e4m3fn", {}, "cuda:7")};
  EXPECT_EQ(encoded_size(other), 3u + 2 + 13 + 2 + 6);
  const std::vector<RecordedValue> out = decode_inputs(encode(other));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].text, "float8_e4m3fn");
  EXPECT_EQ(out[0].device, "cuda:7");
}

// The worst case really is bounded: every kind at its largest, nested as deep as kept, just
// under the budget, never writes past kMaxEncodeBytes (encode() checks the canary).
TEST(ValueCodec, WorstCaseStaysWithinTheRoom) {
  const std::string text(kMaxEncodedInputBytes, 'z');
  std::vector<std::int64_t> dims(kMaxRecordedTensorDims, std::int64_t{-1});  // 10-byte varints
  const std::string type_name(300, 't');
  for (std::size_t filler = kMaxEncodedInputBytes - 4200; filler <= kMaxEncodedInputBytes;
       filler += 97) {
    const Value leaf_string(std::string_view(text).substr(0, 4096));
    const Value leaf_tensor = Value::tensor(dims, type_name, dims, type_name);
    std::vector<std::vector<Value>> levels(9);
    Value deep = leaf_tensor;
    for (auto& level : levels) {
      level = {leaf_string, deep};
      deep = Value::list(level);
    }
    // Strings up to `filler` bytes of encoding (each at most 4096 long), then the deep value.
    std::vector<Value> in;
    for (std::size_t left = filler; left > 3;) {
      const std::size_t len = std::min<std::size_t>(left - 3, 4096);
      in.emplace_back(std::string_view(text).substr(0, len));
      left -= len + 3;
    }
    in.push_back(deep);
    encode(in);
  }
}

}  // namespace value_codec_test
}  // namespace opscope::record
